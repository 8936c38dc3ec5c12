"""The engine's tables on a Citus cluster (docs/scaling.md, "A distributed PostgreSQL"):
``manage.py memory_engine_distribute`` and system check memory_engine.E030.

:func:`plan` reads the migrated schema of the coordinator's database and returns the ordered
statements that place it: every table of the engine with ``project_id`` (but the API keys)
distributed by it, co-located with the stores; the API keys, the engine's shared tables and every
table a placed table references (``auth_user``) reference tables; the settings the engine needs
on every node set on the database (Citus passes ``ALTER DATABASE … SET`` to the workers). The
foreign keys from or to a table being placed are set aside first and added back last, because
Citus distributes no table a local table references. Tables already placed as planned are left
alone, so a second run plans nothing but the settings it finds different; a table placed the
other way is an error, never moved.

Tables that reference a new reference table and are not the engine's (Django's groups and admin
log, a host's own models with a foreign key to ``auth_user``) are made Citus local tables by
Citus itself: they stay on the coordinator, as before. Citus gives such a table a new identity
sequence, which starts again at 1 (the next content type or permission a later ``migrate``
creates would take an id already used), so the plan ends by moving every Citus local or
reference table's sequence past its rows' largest value.

:func:`apply` runs a plan in one transaction: it places everything or nothing. The sequences are
caught up after it commits, in a transaction of their own (inside the placing transaction a
catch-up does not last: the tables Citus makes local there come out of it with the new
sequence), and a second run does it when that one fails.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, transaction

from memory_engine.conf import engine_settings

__all__ = ["ANCHOR", "LOCAL", "PREFIX", "REFERENCE", "DistributionError", "Plan", "Statement", "apply", "citus_state",
           "database_settings", "plan", "referenced_first"]

#: The engine's tables (its app label's prefix).
PREFIX = "memory_engine_"
#: Every distributed table is co-located with this one: a project's rows of all of them on one node.
ANCHOR = "memory_engine_memorystore"
#: Tables with ``project_id`` that are reference tables all the same: an API key is looked up by
#: its prefix before its project is known (authentication), on whichever node.
REFERENCE = frozenset({"memory_engine_apikey"})
#: The engine's one table that stays a plain table on the coordinator: when this server last
#: rebuilt each bm25 index (memory_engine.lexical), which no other table references.
LOCAL = frozenset({"memory_engine_lexical_index_state"})
#: The column every distributed table is distributed by.
COLUMN = "project_id"


class DistributionError(Exception):
    """The database cannot be distributed as it is (the message says what to do)."""


@dataclass(frozen=True)
class Statement:
    sql: str
    #: why it is there, printed as a comment with ``--dry-run``
    why: str


@dataclass
class Plan:
    database: str
    distributed: list[str] = field(default_factory=list)
    reference: list[str] = field(default_factory=list)
    #: table -> what it already is (``distributed`` / ``reference``), left alone
    placed: dict[str, str] = field(default_factory=dict)
    #: the database settings to set (name -> value), those missing or different
    settings: dict[str, str] = field(default_factory=dict)
    #: ``table.column`` of Citus local and reference tables whose sequence is behind their rows
    sequences: list[str] = field(default_factory=list)
    statements: list[Statement] = field(default_factory=list)
    #: run once ``statements`` are committed: the sequences of the tables Citus made local
    afterwards: list[Statement] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.statements and not self.afterwards


def database_settings() -> dict[str, str]:
    """What every node's sessions of the database need: ``SET LOCAL`` passed on to the workers
    (the ledger's erasure switch, memory_engine.db.allow_ledger_erasure), triggers on distributed
    tables (the engine's reach only the project's co-located shards, on the node that holds them;
    a later migration that creates one needs it too), and the HNSW settings the search and the
    write funnel set per transaction with ``set_config``, which Citus does not pass on: a shard's
    vector scan reads the database's. And a custom plan for every execution of a prepared
    statement (``plan_cache_mode``): a generic plan of a statement on a distributed table, such as
    the change feed's triggers run on the shard's node for each row, keeps about 55 KB of the
    node's session memory per execution until the session ends (a worker's backend reached 17 GB
    loading 300,000 memories, docs/scaling.md, *Large transactions*); custom plans keep none."""
    return {
        "citus.propagate_set_commands": "local",
        "citus.enable_unsafe_triggers": "on",
        "plan_cache_mode": "force_custom_plan",
        "hnsw.ef_search": str(int(engine_settings.HNSW_EF_SEARCH)),
        "hnsw.iterative_scan": str(engine_settings.HNSW_ITERATIVE_SCAN),
        "hnsw.max_scan_tuples": str(int(engine_settings.HNSW_MAX_SCAN_TUPLES)),
    }


def citus_state(cursor: Any) -> dict[str, str] | None:
    """Each Citus table of the database by its type (``distributed``, ``reference``, ``local``
    for a Citus local table); None when the citus extension is not installed."""
    cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'")
    if cursor.fetchone() is None:
        return None
    cursor.execute("SELECT table_name::text, citus_table_type FROM citus_tables")
    return dict(cursor.fetchall())


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _tables(cursor: Any) -> dict[str, bool]:
    """The ordinary tables of the current schema, each with whether it has ``project_id``."""
    cursor.execute("""
        SELECT c.relname, EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = %s
                                  AND NOT a.attisdropped)
        FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p')
        ORDER BY 1""", [COLUMN])
    return dict(cursor.fetchall())


def _foreign_keys(cursor: Any) -> list[tuple[str, str, str, str]]:
    """(table, constraint, referenced table, definition) of every foreign key of the current schema."""
    cursor.execute("""
        SELECT c.conrelid::regclass::text, c.conname, c.confrelid::regclass::text, pg_get_constraintdef(c.oid)
        FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid
        WHERE c.contype = 'f' AND t.relnamespace = current_schema()::regnamespace ORDER BY 1, 2""")
    return [(table.strip('"'), name, target.strip('"'), definition)
            for table, name, target, definition in cursor.fetchall()]


def _current_settings(cursor: Any) -> dict[str, str]:
    cursor.execute("""SELECT unnest(setconfig) FROM pg_db_role_setting
                      WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
                        AND setrole = 0""")
    return dict(row[0].split("=", 1) for row in cursor.fetchall())


#: Each column of a Citus local or reference table that takes its default from a sequence, with
#: the sequence (an identity column's or a serial's).
_SEQUENCES = """
    SELECT t.table_name::text, a.attname::text, pg_get_serial_sequence(t.table_name::text, a.attname)
    FROM citus_tables t JOIN pg_attribute a ON a.attrelid = t.table_name AND a.attnum > 0 AND NOT a.attisdropped
    WHERE t.citus_table_type IN ('local', 'reference')
      AND pg_get_serial_sequence(t.table_name::text, a.attname) IS NOT NULL
    ORDER BY 1, 2"""

#: Moves each sequence of :data:`_SEQUENCES` past the largest value its column holds (never back).
_SEQUENCES_CAUGHT_UP = f"""DO $$
DECLARE
    found record;
    largest bigint;
BEGIN
    FOR found IN {" ".join(_SEQUENCES.split())} LOOP
        EXECUTE format('SELECT max(%I) FROM %s', found.attname, found.table_name) INTO largest;
        IF largest > COALESCE(pg_sequence_last_value(found.pg_get_serial_sequence::regclass), 0) THEN
            PERFORM setval(found.pg_get_serial_sequence, largest);
        END IF;
    END LOOP;
END $$"""


def _sequences_behind(cursor: Any) -> list[str]:
    """``table.column`` of each Citus local or reference table whose sequence would give a value
    its column already holds."""
    cursor.execute(_SEQUENCES)
    behind = []
    for table, column, sequence in cursor.fetchall():
        cursor.execute(f"SELECT max({_quoted(column)}) > COALESCE(pg_sequence_last_value(%s::regclass), 0) "
                       f"FROM {table}", [sequence])  # a regclass's text: quoted as needed
        if cursor.fetchone()[0]:
            behind.append(f"{table}.{column}")
    return behind


def _referenced_closure(start: set[str], foreign_keys: list[tuple[str, str, str, str]]) -> set[str]:
    """Every table ``start`` references, directly or through others."""
    found: set[str] = set()
    frontier = set(start)
    while frontier:
        frontier = {target for table, _name, target, _d in foreign_keys if table in frontier} - found - start
        found |= frontier
    return found


def referenced_first(names: set[str], foreign_keys: list[tuple[str, str, str, str]]) -> list[str]:
    """``names`` with every table after those it references (cycles by name order)."""
    done: list[str] = []
    visiting: set[str] = set()

    def visit(name: str) -> None:
        if name in done or name in visiting:
            return
        visiting.add(name)
        for table, _name, target, _definition in foreign_keys:
            if table == name and target in names and target != name:
                visit(target)
        visiting.discard(name)
        done.append(name)

    for name in sorted(names):
        visit(name)
    return done


def plan(cursor: Any) -> Plan:
    """The statements that place the engine's tables of ``cursor``'s database (the coordinator's);
    :class:`DistributionError` when Citus is missing or a table is placed another way."""
    cursor.execute("SELECT current_database()")
    result = Plan(database=cursor.fetchone()[0])
    placed = citus_state(cursor)
    if placed is None:
        raise DistributionError(
            f"The citus extension is not installed in database {result.database}: run CREATE EXTENSION citus "
            "there and add the workers (citus_add_node) first (docs/scaling.md).")
    tables = _tables(cursor)
    if ANCHOR not in tables:
        raise DistributionError(f"Database {result.database} has no {ANCHOR}: run `manage.py migrate` first.")
    foreign_keys = _foreign_keys(cursor)
    engine = {name for name in tables if name.startswith(PREFIX)}
    distributed = {name for name in engine if tables[name] and name not in REFERENCE}
    reference = engine - distributed - LOCAL
    reference |= _referenced_closure(distributed | reference, foreign_keys) - distributed
    for name in sorted(distributed | reference):
        wanted = "distributed" if name in distributed else "reference"
        kind = placed.get(name)
        if kind == wanted:
            result.placed[name] = kind
        elif kind in ("distributed", "reference"):
            raise DistributionError(
                f"{name} is already a {kind} table; the engine needs it {wanted}. Run "
                f"SELECT undistribute_table('{name}') on the coordinator, then this command again.")
    result.reference = [name for name in referenced_first(reference, foreign_keys) if name not in result.placed]
    result.distributed = [name for name in referenced_first(distributed, foreign_keys) if name not in result.placed]
    if ANCHOR in result.distributed:  # the anchor first: every other table is co-located with it
        result.distributed.remove(ANCHOR)
        result.distributed.insert(0, ANCHOR)
    current = _current_settings(cursor)
    result.settings = {name: value for name, value in database_settings().items() if current.get(name) != value}
    result.statements = [
        Statement(f"ALTER DATABASE {_quoted(result.database)} SET {name} = {_literal(value)}",
                  f"{name} for every session of the database, on every node (Citus passes it on to the workers)")
        for name, value in result.settings.items()]
    result.statements += _placement_statements(result, foreign_keys)
    result.sequences = _sequences_behind(cursor)
    if result.statements or result.sequences:
        result.afterwards.append(Statement(
            " ".join(_SEQUENCES_CAUGHT_UP.split()),
            "each Citus local or reference table's sequence past its rows (a table Citus makes local gets a new "
            "identity sequence, which starts again at 1)"))
    return result


def _placement_statements(result: Plan, foreign_keys: list[tuple[str, str, str, str]]) -> list[Statement]:
    moving = set(result.reference) | set(result.distributed)
    if not moving:
        return []
    aside = [key for key in foreign_keys if key[0] in moving or key[2] in moving]
    statements = [Statement("SET LOCAL citus.enable_unsafe_triggers = on",
                            "the engine's triggers go with their tables (they touch only the row's own shards)"),
                  Statement("SET LOCAL citus.multi_shard_modify_mode = 'sequential'",
                            "one connection per node: reference and distributed tables in one transaction")]
    statements += [Statement(f"ALTER TABLE {_quoted(table)} DROP CONSTRAINT {_quoted(name)}",
                             f"set aside: {table} -> {target} (added back below)")
                   for table, name, target, _definition in aside]
    statements += [Statement(f"SELECT create_reference_table({_literal(name)})",
                             "a copy on every node: shared by every project, or referenced by a project's rows")
                   for name in result.reference]
    for name in result.distributed:
        colocate = "'none'" if name == ANCHOR else _literal(ANCHOR)
        statements.append(Statement(
            f"SELECT create_distributed_table({_literal(name)}, {_literal(COLUMN)}, colocate_with => {colocate})",
            "a project's rows on one node" if name == ANCHOR else f"co-located with {ANCHOR}"))
    statements += [Statement(f"ALTER TABLE {_quoted(table)} ADD CONSTRAINT {_quoted(name)} {definition}",
                             f"added back: {table} -> {target}")
                   for table, name, target, definition in aside]
    return statements


def apply(found: Plan, progress: Callable[[int, Statement, float], None] | None = None) -> None:
    """Run ``found``'s statements on Django's default connection in one transaction;
    ``progress(index, statement, seconds)`` after each."""
    with transaction.atomic(), connection.cursor() as cursor:
        for index, statement in enumerate(found.statements, 1):
            started = time.perf_counter()
            cursor.execute(statement.sql)
            if progress is not None:
                progress(index, statement, time.perf_counter() - started)
    for index, statement in enumerate(found.afterwards, len(found.statements) + 1):
        started = time.perf_counter()
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement.sql)
        if progress is not None:
            progress(index, statement, time.perf_counter() - started)
