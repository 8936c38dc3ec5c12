"""The distributed scratch schema of the ``citus`` group and bench/citus_inventory.py (issue 73):
memory_engine's real migrations applied to a cluster's coordinator (:func:`migrate`), then every
shared table made a reference table and every tenant table a table distributed by
``project_id``, co-located (:func:`distribute`).

Each refusal Citus makes is met, recorded (its own message), and removed in the scratch database
the way the schema would have to change (a primary key or unique constraint rebuilt with
``project_id`` first, a foreign key made composite or dropped, a trigger dropped and created again
under ``citus.enable_unsafe_triggers``), and the table tried again, until Citus takes it or refuses
something this module does not know how to change. The models and migrations are not changed: the
scratch database goes with the cluster.

``memory_engine_apikey`` carries ``project_id`` but is a reference table (:data:`REFERENCE`): a key
is looked up by its prefix before its project is known (docs/scaling.md).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_engine.distribution import referenced_first

from .cluster import CitusCluster

ROOT = Path(__file__).resolve().parents[2]


DATABASE = "memory_engine_citus"
#: Tables that stay plain tables on the coordinator: django-q2's queue, sessions, migrations (no
#: foreign key ties them to the tenant tables; nothing on a worker needs them).
COORDINATOR_ONLY = re.compile(r"^(django_q_|django_session$|django_migrations$)")
#: Tables with ``project_id`` that are reference tables all the same: an API key is looked up by
#: its prefix before the project is known (authentication), on every node.
REFERENCE = frozenset({"memory_engine_apikey"})
MAX_ATTEMPTS = 8


@dataclass
class Key:
    name: str
    columns: list[str]
    kind: str  # primary key / unique constraint / unique index
    definition: str


@dataclass
class ForeignKey:
    name: str
    columns: list[str]
    target: str
    target_columns: list[str]


@dataclass
class Table:
    name: str
    has_project: bool
    keys: list[Key] = field(default_factory=list)
    foreign_keys: list[ForeignKey] = field(default_factory=list)
    #: name, function, the other tables (and functions) its function names, CREATE TRIGGER statement
    triggers: list[tuple[str, str, list[str], str]] = field(default_factory=list)
    bm25: list[str] = field(default_factory=list)
    #: what Citus refused, in order, each with the change made to go on
    refusals: list[tuple[str, str]] = field(default_factory=list)
    outcome: str = ""

    def keys_without_project(self) -> list[Key]:
        return [key for key in self.keys if "project_id" not in key.columns]


def database_url(cluster: CitusCluster, database: str = DATABASE) -> str:
    """The coordinator's ``database`` as a DATABASE_URL (example_project.settings reads it)."""
    return f"postgres://postgres@127.0.0.1:{cluster.coordinator.port}/{database}"


def migrate(cluster: CitusCluster, database: str = DATABASE) -> float:
    """The app's real migrations on the coordinator's ``database``, through manage.py; the seconds taken."""
    cluster.create_database(database)
    env = dict(os.environ, DATABASE_URL=database_url(cluster, database), DB_POOL_MAX_SIZE="0",
               DJANGO_SETTINGS_MODULE="example_project.settings")
    started = time.monotonic()
    subprocess.run([sys.executable, str(ROOT / "manage.py"), "migrate", "-v", "0"], env=env, check=True, cwd=ROOT)
    return time.monotonic() - started


def read_catalog(cursor: Any) -> dict[str, Table]:
    cursor.execute("""
        SELECT c.relname, EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'project_id'
                                  AND NOT a.attisdropped)
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relkind = 'r' ORDER BY 1""")
    tables = {name: Table(name, has_project) for name, has_project in cursor.fetchall()}
    cursor.execute("""
        SELECT t.relname, i.relname, con.contype,
               ARRAY(SELECT a.attname::text FROM unnest(x.indkey) k JOIN pg_attribute a
                     ON a.attrelid = x.indrelid AND a.attnum = k), pg_get_indexdef(x.indexrelid)
        FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
        LEFT JOIN pg_constraint con ON con.conindid = x.indexrelid AND con.contype IN ('p', 'u')
        WHERE x.indisunique AND t.relname = ANY(%s)""", [list(tables)])
    for table, index, contype, columns, definition in cursor.fetchall():
        kind = {"p": "primary key", "u": "unique constraint"}.get(contype or "", "unique index")
        tables[table].keys.append(Key(index, columns, kind, definition))
    cursor.execute("""
        SELECT t.relname, con.conname, r.relname,
               ARRAY(SELECT a.attname::text FROM unnest(con.conkey) k JOIN pg_attribute a
                     ON a.attrelid = con.conrelid AND a.attnum = k),
               ARRAY(SELECT a.attname::text FROM unnest(con.confkey) k JOIN pg_attribute a
                     ON a.attrelid = con.confrelid AND a.attnum = k)
        FROM pg_constraint con JOIN pg_class t ON t.oid = con.conrelid JOIN pg_class r ON r.oid = con.confrelid
        WHERE con.contype = 'f' AND t.relname = ANY(%s)""", [list(tables)])
    for table, name, target, columns, target_columns in cursor.fetchall():
        tables[table].foreign_keys.append(ForeignKey(name, columns, target, target_columns))
    cursor.execute("""
        SELECT c.relname, tg.tgname, p.proname, p.prosrc, pg_get_triggerdef(tg.oid)
        FROM pg_trigger tg JOIN pg_class c ON c.oid = tg.tgrelid JOIN pg_proc p ON p.oid = tg.tgfoid
        WHERE NOT tg.tgisinternal AND c.relname = ANY(%s)""", [list(tables)])
    for table, trigger, function, source, definition in cursor.fetchall():
        read = sorted({name for name in re.findall(r"\bmemory_engine_\w+", source) if name in tables} - {table})
        called = sorted(set(re.findall(r"\b(memory_engine_\w+)\s*\(", source)) - set(tables))
        tables[table].triggers.append((trigger, function, read + [f"{name}()" for name in called], definition))
    cursor.execute("""
        SELECT t.relname, i.relname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
        JOIN pg_class t ON t.oid = x.indrelid JOIN pg_am am ON am.oid = i.relam WHERE am.amname = 'bm25'""")
    for table, index in cursor.fetchall():
        tables[table].bm25.append(index)
    return tables


def roles(tables: dict[str, Table]) -> tuple[list[str], list[str], list[str]]:
    """Reference tables (no project_id, tied to the tenant tables by foreign keys, and :data:`REFERENCE`),
    distributed tables (with project_id) and coordinator-only tables, each list in foreign-key order
    (referenced first)."""
    distributed = [name for name, table in tables.items() if table.has_project and name not in REFERENCE]
    coordinator = [name for name in tables if COORDINATOR_ONLY.match(name) and name not in distributed]
    reference = [name for name in tables if name not in distributed and name not in coordinator]
    return ordered(reference, tables), ordered(distributed, tables), coordinator


def ordered(names: list[str], tables: dict[str, Table]) -> list[str]:
    """``names`` with every table after the tables it references (cycles broken by name order),
    as memory_engine_distribute orders them."""
    foreign_keys = [(table.name, key.name, key.target, "") for table in tables.values() for key in table.foreign_keys]
    return referenced_first(set(names), foreign_keys)


def citus_error(exc: Exception) -> str:
    diag = getattr(exc, "diag", None)
    message = getattr(diag, "message_primary", None) or str(exc).splitlines()[0]
    detail = getattr(diag, "message_detail", None)
    return f"{message}" + (f" ({detail})" if detail else "")


def run(cursor: Any, sql: str) -> str | None:
    """Execute ``sql`` (autocommit); the error's message, or None."""
    try:
        cursor.execute(sql)
    except Exception as exc:  # noqa: BLE001 (psycopg's errors: recorded, not raised)
        return citus_error(exc)
    return None


def citus_kind(cursor: Any, table: str) -> str:
    cursor.execute("SELECT citus_table_type FROM citus_tables WHERE table_name = %s::regclass", [table])
    row = cursor.fetchone()
    return row[0] if row else "local"


def rebuild_keys(cursor: Any, table: Table) -> str:
    """Every primary key and unique constraint or index of ``table`` without project_id rebuilt with
    project_id first (the foreign keys onto them are already set aside)."""
    done = []
    for key in table.keys_without_project():
        columns = ", ".join(["project_id", *key.columns])
        if key.kind == "unique index":
            cursor.execute(f'DROP INDEX "{key.name}"')
            cursor.execute(re.sub(r"USING (\w+) \(", r"USING \1 (project_id, ", key.definition, count=1))
        else:
            cursor.execute(f'ALTER TABLE "{table.name}" DROP CONSTRAINT "{key.name}"')
            kind = "PRIMARY KEY" if key.kind == "primary key" else "UNIQUE"
            cursor.execute(f'ALTER TABLE "{table.name}" ADD CONSTRAINT "{key.name}" {kind} ({columns})')
        key.columns = ["project_id", *key.columns]
        done.append(f"{key.kind} {key.name} -> ({columns})")
    return "; ".join(done)


def drop_triggers(cursor: Any, table: Table) -> str:
    for trigger, _function, _read, _definition in table.triggers:
        cursor.execute(f'DROP TRIGGER "{trigger}" ON "{table.name}"')
    return "dropped " + ", ".join(trigger for trigger, *_rest in table.triggers)


#: Citus's refusals this script knows how to remove, and what it changes for each.
KEY_REFUSAL = "cannot have UNIQUE, EXCLUDE, or PRIMARY KEY constraints that do not include the partition column"
TRIGGER_REFUSAL = re.compile(r"because it has triggers", re.IGNORECASE)


def place(cursor: Any, table: Table, placed: dict[str, str], call: str) -> None:
    """Try ``call`` until Citus takes the table, removing each refusal it knows; record them all."""
    for _attempt in range(MAX_ATTEMPTS):
        error = run(cursor, call)
        if error is None:
            table.outcome = "accepted" + (" after the changes" if table.refusals else " as it is")
            placed[table.name] = citus_kind(cursor, table.name)
            return
        if KEY_REFUSAL in error and table.keys_without_project():
            change = rebuild_keys(cursor, table)
        elif TRIGGER_REFUSAL.search(error) and table.triggers:
            change = drop_triggers(cursor, table)
        else:
            table.refusals.append((error, "(no change known: stopped)"))
            break
        table.refusals.append((error, change))
    table.outcome = "refused"
    placed[table.name] = citus_kind(cursor, table.name)


def set_aside_foreign_keys(cursor: Any, tables: dict[str, Table]) -> list[tuple[str, str, str]]:
    """Drop every foreign key from or to a tenant table (Citus distributes no table that a local
    table references, nor one that references a local table); return (table, name, definition)."""
    tenant = [name for name, table in tables.items() if table.has_project]
    cursor.execute("""SELECT c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid) FROM pg_constraint c
                      WHERE c.contype = 'f' AND (c.conrelid::regclass::text = ANY(%s)
                                                 OR c.confrelid::regclass::text = ANY(%s))
                      ORDER BY 1, 2""", [tenant, tenant])
    foreign_keys = cursor.fetchall()
    for table, name, _definition in foreign_keys:
        cursor.execute(f'ALTER TABLE "{table}" DROP CONSTRAINT "{name}"')
    return foreign_keys


def restore_foreign_keys(cursor: Any, foreign_keys: list[tuple[str, str, str]],
                         tables: dict[str, Table]) -> list[tuple[str, str, str, str]]:
    """Each foreign key added back as the migrations define it; where Citus refuses it, as the
    composite ``(project_id, x) -> (project_id, id)``. Rows: table, columns -> target, as is, composite."""
    results = []
    for table, name, definition in foreign_keys:
        match = re.match(r"FOREIGN KEY \((.+?)\) REFERENCES (\S+?)\((.+?)\)(.*)", definition)
        assert match, definition
        columns, target, target_columns, rest = match.groups()
        as_is = run(cursor, f'ALTER TABLE "{table}" ADD CONSTRAINT "{name}" {definition}')
        composite = "-"
        if as_is is not None and tables[table].has_project and tables.get(target) and tables[target].has_project:
            composite = run(cursor, f'ALTER TABLE "{table}" ADD CONSTRAINT "{name}" FOREIGN KEY '
                                    f"(project_id, {columns}) REFERENCES {target}(project_id, {target_columns}){rest}")
            composite = composite or "accepted"
        results.append((table, f"{columns} -> {target}({target_columns})", as_is or "accepted", composite))
    return results


def restore_triggers(cursor: Any, tables: dict[str, Table], *,
                     leave_out: re.Pattern[str] | None = None) -> list[tuple[str, str, str]]:
    """Each trigger dropped to distribute its table created again, as ``citus.enable_unsafe_triggers``
    allows (Citus then runs it on the shards, where what it reads of other tables is not local);
    those whose name ``leave_out`` matches are not (recorded as left out)."""
    cursor.execute("SET citus.enable_unsafe_triggers = on")
    results = []
    for table in tables.values():
        if not table.refusals or not any(TRIGGER_REFUSAL.search(error) for error, _c in table.refusals):
            continue
        for trigger, _function, _read, definition in table.triggers:
            if leave_out is not None and leave_out.search(trigger):
                results.append((table.name, trigger, "left out"))
                continue
            results.append((table.name, trigger, run(cursor, definition) or "accepted"))
    cursor.execute("RESET citus.enable_unsafe_triggers")
    return results



@dataclass
class Distribution:
    """What :func:`distribute` did: the catalog as migrated (each table's refusals and outcome),
    the tables by role, where each went, the foreign keys and triggers added back."""

    tables: dict[str, Table]
    reference: list[str]
    distributed: list[str]
    coordinator: list[str]
    placed: dict[str, str]
    #: the table every distributed table is co-located with
    anchor: str | None
    #: (table, name, definition) of the foreign keys set aside
    foreign_keys: list[tuple[str, str, str]]
    restored: list[tuple[str, str, str, str]]
    triggers: list[tuple[str, str, str]]


def distribute(cursor: Any, *, as_migrated: Callable[[Distribution], None] | None = None,
               leave_out_triggers: re.Pattern[str] | None = None) -> Distribution:
    """The migrated schema of ``cursor``'s database (the coordinator's) made reference and
    distributed tables, refusals removed as they come (:func:`place`); then the foreign keys and
    the triggers added back, but those ``leave_out_triggers`` matches.
    ``as_migrated`` is shown the catalog before anything changes."""
    cursor.execute("SET client_min_messages = warning")
    tables = read_catalog(cursor)
    reference, distributed, coordinator = roles(tables)
    if as_migrated is not None:
        as_migrated(Distribution(tables, reference, distributed, coordinator, {}, None, [], [], []))
    placed: dict[str, str] = {}
    foreign_keys = set_aside_foreign_keys(cursor, tables)
    for name in reference:
        place(cursor, tables[name], placed, f"SELECT create_reference_table('{name}')")
    anchor = None
    for name in distributed:
        colocate = f"'{anchor}'" if anchor else "'none'"
        place(cursor, tables[name], placed,
              f"SELECT create_distributed_table('{name}', 'project_id', colocate_with => {colocate})")
        if anchor is None and placed[name] == "distributed":
            anchor = name
    restored = restore_foreign_keys(cursor, foreign_keys, tables)
    triggers = restore_triggers(cursor, tables, leave_out=leave_out_triggers)
    return Distribution(tables, reference, distributed, coordinator, placed, anchor, foreign_keys, restored,
                        triggers)
