"""Database helpers shared by the services (base layer: imports only Django, psycopg and numpy).

Beside Django's ORM and ``atomic()``, two ways of sending statements that the write funnel
(``services/memories/funnel.py``, its one user) keeps because a paired benchmark shows they pay
(docs/write-funnel.md): :func:`in_order` sends a write's statements together, one round trip
where Django sends one each (server-side binding, one each, costs 1.1–1.5×:
``bench/write.py --server-side-binding``), and :func:`prepared` plans them once per connection
(own time 9.15 against 9.79 ms p50: ``bench/write.py --baseline``). The write's transaction is
Django's ``atomic()``: carrying its ``BEGIN`` and ``COMMIT`` with the statements saves nothing
measurable.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import re
import struct
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, cast

import numpy as np
import psycopg
from django.db import DEFAULT_DB_ALIAS, connection, connections, models, router, transaction
from django.db.models.expressions import DatabaseDefault
from psycopg.adapt import Dumper
from psycopg.pq import ExecStatus, Format

from memory_engine.conf import engine_settings, reloads_with_settings

__all__ = ["IN_LIST_MAX", "MULTI_SHARD_LOG_LEVEL", "across_projects", "advisory_xact_lock", "allow_ledger_erasure",
           "delete_in_project", "in_batches", "in_order", "insert_rows", "insert_sql", "joins_statements",
           "lock_project_documents", "lost_prepared_statement", "one_round_trip", "prepared", "prepares_statements",
           "result_columns", "stop_preparing", "SubqueryCount", "update_sql", "vector_literal"]

logger = logging.getLogger(__name__)

#: The database types of pgvector fields whose values insert_rows sends as ``float4[]`` slices.
_VECTOR_TYPES = ("vector", "halfvec")
_FLOAT4 = psycopg.postgres.types["float4"]


class _Float4Array:
    """float32 values to send as one ``float4[]`` in PostgreSQL's binary array format, encoded
    by numpy (psycopg's list dumper takes ~1 µs per element)."""

    def __init__(self, values: np.ndarray) -> None:
        if not len(values):
            self.data = struct.pack(">iii", 0, 0, _FLOAT4.oid)
            return
        elements = np.empty(len(values), dtype=[("length", ">i4"), ("value", ">f4")])
        elements["length"], elements["value"] = 4, values
        self.data = struct.pack(">iiiii", 1, 0, _FLOAT4.oid, len(values), 1) + elements.tobytes()


class _Float4ArrayDumper(Dumper):
    format = Format.BINARY
    oid = _FLOAT4.array_oid

    def dump(self, obj: _Float4Array) -> bytes:
        return obj.data


def vector_literal(vector: Sequence[float]) -> str:
    """A vector as pgvector's text literal (``'[0.1,0.2]'``), for raw SQL parameters; seven
    significant digits, as many as a pgvector float4 keeps."""
    # one %-format of all the values: a third of the time of formatting them one by one
    return _literal_format(len(vector)) % tuple(vector)


@functools.cache
def _literal_format(dimensions: int) -> str:
    return "[" + ",".join(["%.7g"] * dimensions) + "]"


class SubqueryCount(models.Subquery):
    """The number of rows of a correlated queryset, e.g. a store's live memories:
    ``SubqueryCount(Memory.objects.live().filter(store=OuterRef("pk"), project=project))`` (the
    project named as a value, as the outer query names it, so that Citus routes both to the
    project's shard).

    A ``Count`` over a join groups by the outer row's key, which Django writes as its ``id``
    alone; PostgreSQL accepts that only while ``id`` is the whole primary key, and a tenant
    table's key is ``(id, project_id)`` (migration 0030). A subquery groups nothing."""

    template = "(SELECT count(*) FROM (%(subquery)s) counted)"
    output_field = models.BigIntegerField()

    def __init__(self, queryset: models.QuerySet[Any], **extra: Any) -> None:
        super().__init__(queryset.order_by().values("pk"), **extra)


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


#: The Citus setting that makes a statement reaching more than one shard an error, or silent.
MULTI_SHARD_LOG_LEVEL = "citus.multi_task_query_log_level"


@contextlib.contextmanager
def across_projects(using: str = DEFAULT_DB_ALIAS) -> Iterator[None]:
    """Statements that read every project by design, such as a scheduled task finding its work.

    On a distributed PostgreSQL a connection may refuse statements that reach more than one
    shard (``citus.multi_task_query_log_level = 'error'``, docs/scaling.md), so that a
    per-project path reading every node fails loudly. Inside this block that setting is ``off``
    for the transaction. Leaving the block restores the caller's value, so the per-project work
    that follows is held to it again. On one PostgreSQL the setting is an unused placeholder.
    """
    with transaction.atomic(using=using), connections[using].cursor() as cursor:
        cursor.execute("SELECT current_setting(%s, true)", [MULTI_SHARD_LOG_LEVEL])
        before = cursor.fetchone()[0]
        cursor.execute("SELECT set_config(%s, 'off', true)", [MULTI_SHARD_LOG_LEVEL])
        yield
        cursor.execute("SELECT set_config(%s, %s, true)", [MULTI_SHARD_LOG_LEVEL, before or ""])


#: The most values one ``__in`` filter of a list the caller does not bound is given: a statement
#: takes at most 65,535 parameters when a host binds them on the server
#: (``OPTIONS["server_side_binding"]``), and Django binds one per value.
IN_LIST_MAX = 10_000


def in_batches(values: Sequence[Any]) -> Iterator[Sequence[Any]]:
    """``values`` in slices of at most IN_LIST_MAX, one ``__in`` query each."""
    for start in range(0, len(values), IN_LIST_MAX):
        yield values[start:start + IN_LIST_MAX]


def _array_literal(values: Sequence[Any]) -> str:
    """A one-dimensional PostgreSQL array literal of ``values`` (text, NULL for None)."""
    items = ("NULL" if v is None else '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values)
    return "{" + ",".join(items) + "}"


def insert_rows(objs: Sequence[models.Model], *, batch_size: int = 500) -> None:
    """Insert ``objs``, new instances of one model, with one ``INSERT ... SELECT FROM unnest``
    of one array per column, bound server-side in binary: the rows ``bulk_create`` writes
    (field defaults and ``pre_save`` values included, generated columns left to the database)
    for a fraction of its client time, mostly the vectors' text.

    A pgvector field takes a numpy array or list, or None for NULL: all vectors go as one
    ``float4[]`` and each row takes its slice, cast to whichever type the column holds now
    (``vector`` or ``halfvec``, read from the catalog: an explicit cast, which a distributed
    PostgreSQL needs in an ``INSERT ... SELECT``). Runs in the caller's transaction; errors come
    out as Django's (``DataError`` for a vector of the wrong dimension, as from bulk_create). Not a
    ``COPY``: a binary COPY into the chunk table (PostgreSQL's multi-insert) was followed by
    ``missing chunk number 0 for toast value`` errors on later inserts in the test suite.
    One statement per ``batch_size`` rows, as bulk_create's ``batch_size``.
    """
    if not objs:
        return
    if len(objs) > batch_size:
        for start in range(0, len(objs), batch_size):
            insert_rows(objs[start:start + batch_size], batch_size=batch_size)
        return
    meta = objs[0]._meta
    fields = [field for field in meta.concrete_fields if not field.generated]
    connection.ensure_connection()
    column_types = _vector_column_types(meta.db_table) if any(
        (field.db_type(connection) or "").startswith(_VECTOR_TYPES) for field in fields) else {}
    selects: list[str] = []
    select_params: list[object] = []
    arrays: list[str] = []
    array_params: list[object] = []
    aliases: list[str] = []
    for i, field in enumerate(fields):
        values = [field.pre_save(obj, add=True) for obj in objs]
        db_type = field.db_type(connection) or ""
        if db_type.startswith(_VECTOR_TYPES):
            vectors: list[np.ndarray] = []
            starts: list[int | None] = []
            ends: list[int | None] = []
            length = 0
            for value in values:
                if value is None:
                    starts.append(None)
                    ends.append(None)
                    continue
                vectors.append(np.asarray(value, dtype=np.float32).ravel())
                starts.append(length + 1)
                length += len(vectors[-1])
                ends.append(length)
            selects.append(f"(CASE WHEN r.s{i} IS NOT NULL THEN (%s::float4[])[r.s{i}:r.e{i}] END)"
                           f"::{column_types[field.column]}")
            select_params.append(_Float4Array(np.concatenate(vectors) if vectors else np.empty(0, np.float32)))
            arrays += ["%s::int4[]", "%s::int4[]"]
            array_params += [starts, ends]
            aliases += [f"s{i}", f"e{i}"]
        elif db_type.endswith("[]"):
            # unnest flattens an array of arrays: each row's array goes as its literal's text
            selects.append(f"r.c{i}::{db_type}")
            arrays.append("%s::text[]")
            array_params.append([None if value is None else _array_literal(value) for value in values])
            aliases.append(f"c{i}")
        else:
            selects.append(f"r.c{i}")
            arrays.append(f"%s::{db_type}[]")
            array_params.append([field.get_db_prep_save(value, connection) for value in values])
            aliases.append(f"c{i}")
    names = ", ".join(connection.ops.quote_name(field.column) for field in fields)
    sql = (f"INSERT INTO {connection.ops.quote_name(meta.db_table)} ({names}) SELECT {', '.join(selects)} "
           f"FROM unnest({', '.join(arrays)}) AS r({', '.join(aliases)})")
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        cursor.adapters.register_dumper(_Float4Array, _Float4ArrayDumper)
        # never a prepared statement: it would break behind a transaction-pooling PgBouncer
        cursor.execute(sql, [*select_params, *array_params], binary=True, prepare=False)
    for obj in objs:
        obj._state.adding, obj._state.db = False, connection.alias


def _vector_column_types(table: str) -> dict[str, str]:
    """The type of each vector column of ``table`` as it is now (``vector(384)``, ``halfvec(384)``):
    an embedding model switch can change it."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
                       "JOIN pg_type t ON t.oid = a.atttypid WHERE a.attrelid = %s::regclass AND a.attnum > 0 "
                       "AND NOT a.attisdropped AND t.typname IN ('vector', 'halfvec')", [table])
        return dict(cursor.fetchall())


def insert_sql(obj: models.Model) -> tuple[str, list[Any]]:
    """The ``INSERT`` of ``obj``, a new instance, and its parameters (the values ``save()``
    would write: defaults and ``pre_save`` included, generated columns left to the database),
    for :func:`one_round_trip`."""
    fields, into = _insert_columns(type(obj))
    db = connections[DEFAULT_DB_ALIAS]  # the connection itself, not its proxy: one lookup per call
    placeholders: list[str] = []
    values: list[Any] = []
    for field in fields:
        value = field.pre_save(obj, add=True)
        if isinstance(value, DatabaseDefault):  # a db_default left unset
            placeholders.append("DEFAULT")
            continue
        placeholders.append("%s")
        values.append(field.get_db_prep_save(value, db))
    return f"{into} VALUES ({', '.join(placeholders)})", values


@functools.cache
def _insert_columns(model: type[models.Model]) -> tuple[list[models.Field], str]:
    """insert_sql's fields of ``model`` and the ``INSERT INTO table (columns)`` naming them."""
    meta = model._meta
    fields = [field for field in meta.concrete_fields if not field.generated]
    quote = connection.ops.quote_name
    return fields, f"INSERT INTO {quote(meta.db_table)} ({', '.join(quote(field.column) for field in fields)})"


def update_sql(obj: models.Model, changes: Mapping[str, Any]) -> tuple[str, list[Any]]:
    """The ``UPDATE`` of ``obj``'s row setting ``changes`` (field name: value; a model instance
    for a foreign key), the statement ``filter(pk=obj.pk).update(**changes)`` sends, and its
    parameters, for :func:`one_round_trip`. A row of a project names it too: on a distributed
    PostgreSQL that routes the statement to the project's node (docs/scaling.md)."""
    meta = obj._meta
    db = connections[DEFAULT_DB_ALIAS]  # the connection itself, not its proxy: one lookup per call
    quote = db.ops.quote_name
    columns: list[str] = []
    values: list[Any] = []
    for name, value in changes.items():
        field = meta.get_field(name)
        assert isinstance(field, models.Field) and field.column, f"{name} is not a column of {meta.label}"
        columns.append(f"{quote(field.column)} = %s")
        values.append(field.get_db_prep_save(value.pk if isinstance(value, models.Model) else value, db))
    where, keys = f"{quote(meta.pk.column)} = %s", [obj.pk]
    project_id = getattr(obj, "project_id", None)
    if project_id is not None:
        where, keys = f"{where} AND {quote('project_id')} = %s", [obj.pk, project_id]
    return f"UPDATE {quote(meta.db_table)} SET {', '.join(columns)} WHERE {where}", [*values, *keys]


def delete_in_project(rows: models.QuerySet[Any], project_id: str) -> tuple[int, dict[str, int]]:
    """Delete the rows of ``rows`` that belong to the project ``project_id`` (or the project
    itself), with what their foreign keys' ``on_delete`` takes along, and return what
    ``QuerySet.delete()`` returns (the rows deleted, in all and by model). Every statement names
    the project: on a distributed PostgreSQL each runs on the project's node (docs/scaling.md),
    where Django's collector looks related rows up and deletes them by id alone, across every
    node.

    ``CASCADE`` deletes the referencing rows the same way, deepest first; ``SET_NULL`` clears the
    reference; ``DO_NOTHING`` leaves it. ``RESTRICT`` is checked once everything is deleted (the
    foreign keys are deferred): a referencing row left raises ``RestrictedError`` and nothing is
    deleted, as in Django. No delete signals are sent; the engine's models have no receivers."""
    counts: dict[str, int] = {}
    restricted: list[models.QuerySet[Any]] = []
    # the database written to, as ``QuerySet.delete()`` chooses it (never a read replica)
    using = rows._db or router.db_for_write(rows.model)  # type: ignore[attr-defined]
    rows = rows.using(using)
    if _of_a_project(rows.model):
        rows = rows.filter(project_id=project_id)
    with transaction.atomic(using=using):
        ids = list(rows.order_by().values_list("pk", flat=True))
        _delete_ids(rows.model, ids, project_id, using, counts, restricted)
        for referencing in restricted:
            left = list(referencing[:10])
            if left:
                raise models.RestrictedError(f"{len(left)} {referencing.model._meta.label} row(s) still reference "
                                             "the rows to delete.", set(left))
    return sum(counts.values()), counts


def _delete_ids(model: type[models.Model], ids: list[Any], project_id: str, using: str, counts: dict[str, int],
                restricted: list[models.QuerySet[Any]]) -> None:
    if not ids:
        return
    meta = model._meta
    for relation in meta.get_fields(include_hidden=True):
        # the reverse side of every foreign key to ``model`` (Django's collector follows the same)
        if not (isinstance(relation, models.ForeignObjectRel) and relation.auto_created and not relation.concrete
                and (relation.one_to_one or relation.one_to_many)):
            continue
        field, on_delete = relation.field, relation.on_delete
        if on_delete is models.DO_NOTHING:
            continue
        related = cast(type[models.Model], relation.related_model)
        referencing = related._base_manager.using(using).filter(**{f"{field.name}__in": ids})
        if _of_a_project(related):
            referencing = referencing.filter(project_id=project_id)
        if on_delete is models.CASCADE:
            assert related is not model, f"{meta.label} cascades to itself: not supported"
            _delete_ids(related, list(referencing.order_by().values_list("pk", flat=True)), project_id, using,
                        counts, restricted)
        elif on_delete is models.SET_NULL:
            referencing.update(**{field.name: None})
        elif on_delete is models.RESTRICT:
            restricted.append(referencing)
        else:
            raise NotImplementedError(f"{related._meta.label}.{field.name}: on_delete {on_delete.__name__}")
    quote = connections[using].ops.quote_name
    assert meta.pk is not None
    sql, params = f"DELETE FROM {quote(meta.db_table)} WHERE {quote(meta.pk.column)} = ANY(%s)", [ids]
    if _of_a_project(model):
        sql, params = f"{sql} AND {quote('project_id')} = %s", [ids, project_id]  # type: ignore[list-item]
    with connections[using].cursor() as cursor:
        cursor.execute(sql, params)
        if cursor.rowcount:
            counts[meta.label] = counts.get(meta.label, 0) + cursor.rowcount


def _of_a_project(model: type[models.Model]) -> bool:
    return any(field.attname == "project_id" for field in model._meta.concrete_fields)


def joins_statements() -> bool:
    """Whether several statements can go in one query: client-side parameter binding (Django's
    default for psycopg 3). With ``OPTIONS["server_side_binding"]`` each statement is prepared
    on the server, one per query."""
    return connection.settings_dict.get("OPTIONS", {}).get("server_side_binding") is not True


Params = Sequence[Any] | Mapping[str, Any]


def in_order(cursor: Any, statements: Sequence[tuple[str, Params]]) -> Iterator[None]:
    """Execute ``statements`` in order, sent together as one query where joins_statements()
    (one round trip instead of one each), else one by one; yields once per statement, with the
    cursor on that statement's result. Each is still a statement of its own (its triggers,
    checks, errors and snapshot as if sent alone, seeing the rows the ones before it wrote); an
    error stops the rest and aborts the transaction.

    The statements' parameters are all positional (``%s``: one list, in order) or all named
    (``%(name)s``: one mapping; a name used by two statements must have one value).
    """
    if not joins_statements():
        for sql, params in statements:
            cursor.execute(sql, params)
            yield
        return
    joined: list[Any] | dict[str, Any]
    if all(isinstance(params, Mapping) for _, params in statements):
        joined = {}
        for _, params in statements:
            assert isinstance(params, Mapping)
            clashes = [name for name, value in params.items() if name in joined and joined[name] != value]
            if clashes:
                raise ValueError(f"statements sent together give {clashes} different values")
            joined.update(params)
    else:
        joined = [value for _, params in statements for value in params]
    cursor.execute(";\n".join(sql for sql, _ in statements), joined)
    for index in range(len(statements)):
        if index:
            cursor.nextset()
        yield


#: How many statements prepared() keeps prepared on one connection; past it the least recently
#: used is deallocated in the query that prepares the next.
PREPARED_MAX = 64
#: SQLSTATEs of a prepared statement that is not what prepared() believes: gone (DEALLOCATE,
#: DISCARD ALL, a transaction-pooling proxy that sent the query to another server connection) or
#: there already (the same text). lost_prepared_statement also counts one a table change made
#: invalid for its result.
_PREPARED_LOST = {"26000", "42P05"}
#: per psycopg connection: the names of the statements prepared() prepared on it, least recently used first
_prepared: weakref.WeakKeyDictionary[Any, OrderedDict[str, None]] = weakref.WeakKeyDictionary()


class _Preparing:
    #: why prepared() stopped preparing in this process (stop_preparing); None: it prepares
    stopped: str | None = None
    #: part of every statement's name: a new one each time the names prepared() knows are
    #: forgotten, so a statement still prepared on a server session never meets a new PREPARE
    generation = 0


_NAMED_PARAMETER = re.compile(r"%\((\w+)\)s")


def prepares_statements() -> bool:
    """Whether prepared() prepares: WRITE_PREPARED_STATEMENTS is on, the statements are sent
    together (client-side binding: an ``EXECUTE`` takes its arguments in its text), and no
    prepared statement was lost in this process."""
    return engine_settings.WRITE_PREPARED_STATEMENTS and joins_statements() and _Preparing.stopped is None


def prepared(sql: str, params: Mapping[str, Any], *,
             inline: Sequence[str] = ()) -> tuple[list[tuple[str, Params]], tuple[str, Params]]:
    """``sql`` (named parameters) as an ``EXECUTE`` of a statement prepared on the connection,
    and what prepares it: its ``PREPARE`` the first time (after a ``DEALLOCATE`` of the least
    recently used past PREPARED_MAX), else nothing. For :func:`in_order`, the preparing
    statements go first in the query: a PREPARE is not undone by a rollback (not even one of a
    statement after it in the same query), and is counted as prepared once it is sent (when it
    fails, the caller sees lost_prepared_statement). A prepared statement is planned once for all its executions
    (PostgreSQL's ``plan_cache_mode`` ``auto``: after five custom plans, a generic one when it
    costs no more), where a statement sent as text is planned each time (docs/write-funnel.md,
    "Prepared statements").

    The parameters named in ``inline`` go into the prepared text as literals: those that shape
    the plan (a store, whose share of the table the planner reads from its statistics; a
    ``LIMIT``), so the one plan is the plan that store would get. Each distinct text is a
    statement of its own, named by its hash. Without prepares_statements(): ``([], (sql, params))``.
    """
    if not prepares_statements():
        return [], (sql, params)
    connection.ensure_connection()
    raw = connection.connection
    body = sql
    for name in inline:
        # doubled %: the PREPARE goes through the query's client-side formatting like the rest
        literal = psycopg.sql.Literal(params[name]).as_string(raw).replace("%", "%%")
        body = body.replace(f"%({name})s", literal)
    names: list[str] = []

    def placeholder(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    body = _NAMED_PARAMETER.sub(placeholder, body)
    statement = f"me_{hashlib.sha1(body.encode()).hexdigest()[:16]}_{_Preparing.generation}"
    known = _prepared.setdefault(raw, OrderedDict())
    preparing: list[tuple[str, Params]] = []
    if statement in known:
        known.move_to_end(statement)
    else:
        if len(known) >= PREPARED_MAX:
            oldest, _ = known.popitem(last=False)
            preparing.append((f"DEALLOCATE {oldest}", {}))
        known[statement] = None
        preparing.append((f"PREPARE {statement} AS {body}", {}))
    arguments = f"({', '.join(f'%({name})s' for name in names)})" if names else ""
    return preparing, (f"EXECUTE {statement}{arguments}", {name: params[name] for name in names})


def lost_prepared_statement(exc: BaseException) -> bool:
    """Whether ``exc`` (a database error) says a statement prepared() made is not there, is there
    already, or no longer fits its tables; then the caller runs its statements again, unprepared
    after stop_preparing()."""
    cause = exc.__cause__
    state = getattr(cause, "sqlstate", None)
    return state in _PREPARED_LOST or (state == "0A000" and "cached plan must not change result type" in str(cause))


def stop_preparing(exc: BaseException) -> None:
    """Stop preparing statements in this process, after ``exc`` (lost_prepared_statement). A
    server session that loses what was prepared on it between transactions is behind a
    transaction-pooling proxy, or something deallocates there; preparing again would fail again."""
    if _Preparing.stopped is None:
        logger.warning(
            "the write funnel stops preparing its statements in this process (%s); behind a "
            "transaction-pooling proxy such as PgBouncer, set MEMORY_ENGINE['WRITE_PREPARED_STATEMENTS'] = False",
            exc)
    _Preparing.stopped = str(exc)
    _forget_prepared()


@reloads_with_settings
def _resume_preparing() -> None:
    _Preparing.stopped = None
    _forget_prepared()


def _forget_prepared() -> None:
    _prepared.clear()
    _Preparing.generation += 1


def result_columns(cursor: Any) -> list[str] | None:
    """The column names of the cursor's current result, or None when its statement returns no
    rows (as ``cursor.description`` tells), read from the result itself: ``description`` builds a
    psycopg ``Column`` per column, with its type looked up, each time it is read (~1 µs a
    column; a write reads results of 30 columns)."""
    result = cursor.pgresult
    if result is None or not (result.nfields or result.status == ExecStatus.TUPLES_OK):
        return None
    encoding = cursor.connection.info.encoding
    return [result.fname(index).decode(encoding) for index in range(result.nfields)]


def one_round_trip(writes: Sequence[tuple[str, Params]], *, saved: Sequence[models.Model] = ()) -> None:
    """Run ``writes`` (statements with their parameters, none returning rows) in order, sent
    together as one query (:func:`in_order`). ``saved``: the new instances among them, marked as
    saved."""
    with connection.cursor() as cursor:
        for _ in in_order(cursor, writes):
            pass
    for obj in saved:
        obj._state.adding, obj._state.db = False, connection.alias
