"""Plan checks on tables whose statistics have not seen a new store: rows written in SQL (fast,
no embedder), and what EXPLAIN ANALYZE says a statement really did."""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import psycopg
from django.db import connection
from psycopg.pq import Trace

DIMS = 384


def fill(store: Any, count: int, prefix: str, text: str = "Synthetic fact", *, vectors: bool = True) -> None:
    """``count`` memories of ``store``, their texts ``text`` and a number, with random vectors or
    (``vectors=False``) none: rows a rolled-back test leaves no trace of in the HNSW index, whose
    entries outlive the transaction and would slow later tests' filtered scans."""
    vector = f"(SELECT array_agg(random() - 0.5)::vector FROM generate_series(1, {DIMS}) WHERE i > 0)"
    with connection.cursor() as cursor:
        cursor.execute(
            f"""INSERT INTO memory_engine_memorycontent
                    (id, store_id, content_hash, text, embedding, embedding_model, created_at)
                SELECT 'mc_{prefix}' || i, %s, md5('{prefix}' || i), %s || ' ' || i,
                       {vector if vectors else "NULL::vector"},
                       'all-MiniLM-L6-v2', now()
                FROM generate_series(1, %s) i""",
            [store.pk, text, count],
        )
        cursor.execute(
            f"""INSERT INTO memory_engine_memory (id, store_id, content_id, tags, metadata, source_type,
                    created_at, kind, title, summary, confidence, evidence_count, retention_class)
                SELECT 'mem_{prefix}' || substr(id, {len(prefix) + 4}), store_id, id, '{{}}', '{{}}', 'manual',
                       now(), 'fact', '', '', 0.7, 1, 'durable'
                FROM memory_engine_memorycontent WHERE store_id = %s""",
            [store.pk],
        )


@contextmanager
def statements_with(marker: str) -> Iterator[list[tuple[str, Any]]]:
    """The statements (sql, params) run inside the block whose SQL contains ``marker``; a query
    of several statements with named parameters (memory_engine.db.in_order) counts as each of
    them, with all the parameters. An ``EXECUTE`` of a statement prepared on the connection
    (memory_engine.db.prepared) counts when its prepared text contains ``marker``: it is recorded
    as sent, so that EXPLAIN shows the prepared statement's plan."""
    found: list[tuple[str, Any]] = []

    def capture(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        result = execute(sql, params, many, context)  # first: a statement is prepared by its query
        statements = sql.split(";\n") if isinstance(params, Mapping) else [sql]
        found.extend((statement, params) for statement in statements
                     if marker in statement and not statement.startswith("PREPARE ")
                     or _EXECUTE.match(statement) and marker in prepared_text(_EXECUTE.match(statement)[1]))
        return result

    with connection.execute_wrapper(capture):
        yield found


_EXECUTE = re.compile(r"EXECUTE (me_\w+)")


def prepared_text(name: str) -> str:
    """The text of the statement prepared as ``name`` on the connection (its parameters $1, $2, ...)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements WHERE name = %s", [name])
        (query,) = cursor.fetchone()
    # the whole query that prepared it; its statements are joined by ";\n" (memory_engine.db.in_order)
    return query.split(f"PREPARE {name} AS ", 1)[1].split(";\n", 1)[0]


def unprepared(query: str) -> str:
    """A query of statements sent together (memory_engine.db.in_order) as it reads without
    prepared statements: its PREPAREs and DEALLOCATEs left out, each EXECUTE replaced by the
    text it runs (parameters as $1, $2, ...)."""
    statements = []
    for statement in query.split(";\n"):
        if statement.startswith(("PREPARE ", "DEALLOCATE ")):
            continue
        match = _EXECUTE.match(statement)
        statements.append(prepared_text(match[1]) if match else statement)
    return ";\n".join(statements)


@contextmanager
def queries_sent() -> Iterator[list[str]]:
    """The queries the connection sends to the server inside the block, read off libpq's trace
    of the protocol: the SQL of each simple query (several statements, with client-side binding)
    and ``<extended>`` for each statement sent with its parameters apart (server-side binding),
    so psycopg's own BEGIN and COMMIT count too. Each is one round trip."""
    connection.ensure_connection()
    pgconn = connection.connection.pgconn
    with tempfile.TemporaryFile(mode="w+") as trace:
        stream = os.dup(trace.fileno())  # libpq's stream gets a descriptor of its own
        pgconn.trace(stream)
        pgconn.set_trace_flags(Trace.SUPPRESS_TIMESTAMPS | Trace.REGRESS_MODE)
        sent: list[str] = []
        try:
            yield sent
        finally:
            pgconn.untrace()  # flushes the stream, which is not used again
            os.close(stream)
            trace.seek(0)
            sent += [sql if kind == "Query" else "<extended>" for kind, sql in _FRONTEND.findall(trace.read())]


#: A query or a statement's end (Sync) sent by the client, in libpq's trace; the SQL may span lines.
_FRONTEND = re.compile(r'^F\t\d+\t(Query|Sync)(?:\t "(.*?)")?\n(?=[FB]\t|\Z)', re.MULTILINE | re.DOTALL)


def analyze_memory_tables() -> None:
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memory_engine_memorycontent; ANALYZE memory_engine_memory")


def explain_analyze(sql: str, params: Any = None, *, client_side: bool = False) -> dict:
    """The root plan node of ``sql``, run; ``client_side``: its parameters bound into its text
    whatever the connection's OPTIONS say (Django's default for psycopg 3)."""
    connection.ensure_connection()
    with psycopg.ClientCursor(connection.connection) if client_side else connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
        plan = cursor.fetchone()[0]
    plan = json.loads(plan) if isinstance(plan, str) else plan
    return plan[0]["Plan"]


def rows_removed_by_join_filters(plan: dict) -> int:
    """Rows the plan compared and threw away in join filters, over all its nodes."""
    own = plan.get("Rows Removed by Join Filter", 0)
    return own + sum(rows_removed_by_join_filters(child) for child in plan.get("Plans", []))


def scans_by_store(plan: dict, relation: str) -> list[dict]:
    """The plan's scans of ``relation`` that ran with a condition on its store."""
    found = [plan] if (plan.get("Relation Name") == relation and plan.get("Actual Loops", 0)
                       and "store_id" in plan.get("Index Cond", "") + plan.get("Filter", "")) else []
    return found + [node for child in plan.get("Plans", []) for node in scans_by_store(child, relation)]


def rows_removed_by_filters(plan: dict, relation: str) -> int:
    """Rows the plan's scans of ``relation`` read and threw away in their filters."""
    own = plan.get("Rows Removed by Filter", 0) * plan.get("Actual Loops", 0) \
        if plan.get("Relation Name") == relation else 0
    return own + sum(rows_removed_by_filters(child, relation) for child in plan.get("Plans", []))


def rows_read(plan: dict, relation: str) -> int:
    """Rows the plan's scans of ``relation`` read: those they returned and those their filters
    threw away, over all their loops."""
    own = (plan.get("Actual Rows", 0) + plan.get("Rows Removed by Filter", 0)) * plan.get("Actual Loops", 0) \
        if plan.get("Relation Name") == relation else 0
    return int(own) + sum(rows_read(child, relation) for child in plan.get("Plans", []))
