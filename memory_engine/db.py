"""Database helpers shared by the services (base layer: imports only Django and numpy)."""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np
from django.db import connection, models

__all__ = ["advisory_xact_lock", "allow_ledger_erasure", "copy_insert", "lock_project_documents", "vector_literal"]

#: The element type of each pgvector column type in its binary input (``vector_recv``,
#: ``halfvec_recv``): the dimension and a zero as big-endian uint16, then the elements big-endian.
_VECTOR_ELEMENTS = {"vector": ">f4", "halfvec": ">f2"}


def vector_literal(vector: list[float]) -> str:
    """A vector as pgvector's text literal (``'[0.1,0.2]'``), for raw SQL parameters; seven
    significant digits, as many as a pgvector float4 keeps."""
    return "[" + ",".join(f"{x:.7g}" for x in vector) + "]"


def advisory_xact_lock(key: str) -> None:
    """Wait for the PostgreSQL advisory lock named ``key`` and hold it until the end of the
    transaction: serializes decisions (quota, path, dedup) that a row lock cannot cover
    because the row does not exist yet. Call it inside ``transaction.atomic``."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [key])


def lock_project_documents(project_id: str) -> None:
    """Serialize one project's document quota and path checks and its ingestion-rule edits
    until the end of the transaction."""
    advisory_xact_lock(f"memory_engine.documents:{project_id}")


def allow_ledger_erasure() -> None:
    """Lift the append-only triggers (the memory ledger, the documents' raw captures) for
    DELETE in the current transaction only: explicit erasure."""
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL memory_engine.ledger_erasure = 'on'")


def copy_insert(objs: Sequence[models.Model]) -> None:
    """Insert ``objs``, new instances of one model, with one binary ``COPY``: the rows
    ``bulk_create`` writes (field defaults and ``pre_save`` values included, generated columns
    left to the database) at a fraction of its cost per row, mostly the vectors' text.

    A ``vector`` or ``halfvec`` column (whichever the table holds now: the catalog is read
    first) takes a numpy array or list, or None for NULL. Runs in the caller's transaction;
    errors come out as Django's (``DataError`` for a vector of the wrong dimension, as an INSERT).
    """
    if not objs:
        return
    meta = objs[0]._meta
    fields = [field for field in meta.concrete_fields if not field.generated]
    columns = [field.column for field in fields]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT a.attname, a.atttypid, t.typname FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
            "WHERE a.attrelid = %s::regclass AND a.attname = ANY(%s) AND NOT a.attisdropped",
            [meta.db_table, columns])
        types = {name: (oid, typname) for name, oid, typname in cursor.fetchall()}
        elements = [_VECTOR_ELEMENTS.get(types[column][1]) for column in columns]
        rows = []
        for obj in objs:
            row: list[object] = []
            for field, element in zip(fields, elements, strict=True):
                value = field.pre_save(obj, add=True)
                if element is None:
                    row.append(field.get_db_prep_save(value, connection))
                elif value is None:
                    row.append(None)
                else:
                    array = np.asarray(value, dtype=element)
                    row.append(struct.pack(">HH", len(array), 0) + array.tobytes())
            rows.append(row)
        names = ", ".join(connection.ops.quote_name(column) for column in columns)
        with connection.wrap_database_errors, cursor.cursor.copy(
                f"COPY {connection.ops.quote_name(meta.db_table)} ({names}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["bytea" if element else types[column][0]
                            for column, element in zip(columns, elements, strict=True)])
            for row in rows:
                copy.write_row(row)
    for obj in objs:
        obj._state.adding, obj._state.db = False, connection.alias
