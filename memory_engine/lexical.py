"""The lexical channel's indexes: a pg_textsearch ``bm25`` index where the database has it,
a tsvector GIN index otherwise (hosts on a managed PostgreSQL without the extension).

Both index ``text`` of memory contents and document chunks with the text search config of
``KNOWLEDGE_TEXT_SEARCH_CONFIG`` as it was when they were built (migration 0004, or
``manage.py memory_engine_rebuild_lexical``); the system checks compare the two.

pg_textsearch before 1.3 keeps part of its index (the memtable and the corpus statistics)
in shared memory only: after a server restart a 1.0.0 index answers nothing, or answers
with ``N = 1``, until rebuilt (docs/retrieval.md, *Restarts*). :func:`ensure_lexical_fresh`
rebuilds such indexes once per server start, before the first search, under an advisory
lock so that concurrent processes do it once.
"""

from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction

from memory_engine.conf import engine_settings
from memory_engine.replicas import read_connection, reading_replica

logger = logging.getLogger("memory_engine.lexical")

BM25 = "bm25"
TSVECTOR = "tsvector"

#: table -> (bm25 index, tsvector GIN index)
INDEXES = {
    "memory_engine_memorycontent": ("me_content_text_bm25", "me_content_text_gin"),
    "memory_engine_chunk": ("me_chunk_text_bm25", "me_chunk_text_gin"),
}
#: A staged generation's chunks (docs/documents.md, replay) have a bm25 index of their own, and the
#: live chunks' index leaves them out: BM25 statistics (document count, lengths, term frequencies)
#: are per index, so staging a corpus never moves a live score.
STAGED_CHUNK_BM25 = "me_chunk_staged_text_bm25"
#: bm25 index -> (table, the rows it holds: a predicate on the chunk's generation, or None)
BM25_PARTS: dict[str, tuple[str, str | None]] = {
    "me_content_text_bm25": ("memory_engine_memorycontent", None),
    "me_chunk_text_bm25": ("memory_engine_chunk", "generation_id IS NULL"),
    STAGED_CHUNK_BM25: ("memory_engine_chunk", "generation_id IS NOT NULL"),
}
BM25_INDEXES = tuple(BM25_PARTS)
GIN_INDEXES = tuple(gin for _bm25, gin in INDEXES.values())
#: One row per bm25 index: when it was last rebuilt, for which server start, how long it took.
STATE_TABLE = "memory_engine_lexical_index_state"
#: pg_textsearch from this version keeps its statistics across restarts (WAL-logged memtable).
DURABLE_FROM = (1, 3)
#: pg_advisory_lock key of the rebuild ("memory_engine lexical" in ASCII, folded to 63 bits).
REBUILD_LOCK = 0x6D656D6C6578


@dataclass
class LexicalStatus:
    """What the database offers the lexical channel right now."""

    backend: str
    reason: str
    extension_version: str | None
    index_configs: dict[str, str] = field(default_factory=dict)
    server_started: datetime | None = None
    #: bm25 indexes not rebuilt since the server started (pg_textsearch < 1.3 only).
    stale: list[str] = field(default_factory=list)


def version_tuple(version: str | None) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version or "")[:3])


def valid_config_name(name: str) -> str:
    """A text search config name, safe to inline in DDL (it names a regconfig, nothing else)."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?", name or ""):
        raise ValueError(f"KNOWLEDGE_TEXT_SEARCH_CONFIG {name!r} is not a text search config name")
    return name


def tsvector_expression(config: str, column: str = "text") -> str:
    """The GIN index expression; queries must repeat it exactly for the planner to use the index."""
    return f"to_tsvector('{valid_config_name(config)}'::regconfig, {column})"


_STATUS_SQL = f"""
SELECT pg_postmaster_start_time(),
       (SELECT extversion FROM pg_extension WHERE extname = 'pg_textsearch'),
       (SELECT coalesce(json_object_agg(c.relname, coalesce(
            (SELECT substring(o FROM '^text_config=(.*)$') FROM unnest(c.reloptions) o WHERE o LIKE 'text_config=%%'),
            substring(pg_get_indexdef(c.oid) FROM 'to_tsvector\\(''([^'']+)''')
        )), '{{}}') FROM pg_class c
        WHERE c.relkind = 'i' AND c.relname = ANY(%s)
          AND c.relnamespace = current_schema()::regnamespace),
       (SELECT coalesce(json_object_agg(index_name, server_started), '{{}}') FROM {STATE_TABLE})
"""


def lexical_status() -> LexicalStatus:
    """Server start, extension version, index configs and rebuild state (two cheap queries), of
    the server this request reads from (a read replica's own, memory_engine.replicas)."""
    with read_connection().cursor() as cursor:
        if not _state_table_exists(cursor):
            return LexicalStatus(backend=TSVECTOR, reason="the database is not migrated", extension_version=None)
        cursor.execute(_STATUS_SQL, [list(BM25_INDEXES + GIN_INDEXES)])
        started, version, configs, state = cursor.fetchone()
    configs = json.loads(configs) if isinstance(configs, str) else configs
    state = json.loads(state) if isinstance(state, str) else state
    has_bm25 = all(name in configs for name in BM25_INDEXES)
    forced = engine_settings.KNOWLEDGE_LEXICAL_BACKEND
    if has_bm25 and forced != TSVECTOR:
        backend, reason = BM25, f"pg_textsearch {version}"
    elif forced == TSVECTOR:
        backend, reason = TSVECTOR, "KNOWLEDGE_LEXICAL_BACKEND is 'tsvector'"
    elif version is None:
        backend = TSVECTOR
        reason = ("the server offers pg_textsearch but it is not installed in this database (CREATE EXTENSION "
                  "needs a privileged role and shared_preload_libraries)" if _extension_available()
                  else "the server does not offer pg_textsearch")
    else:
        backend, reason = TSVECTOR, f"pg_textsearch {version} is installed but the bm25 indexes are missing"
    stale: list[str] = []
    if has_bm25 and version_tuple(version) < DURABLE_FROM:
        stale = [name for name in BM25_INDEXES if not _same_start(state.get(name), started)]
    return LexicalStatus(backend=backend, reason=reason, extension_version=version, index_configs=configs,
                         server_started=started, stale=stale)


def _extension_available() -> bool:
    """Whether the server could install pg_textsearch (reads the extension directory: not per search)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_textsearch')")
        return bool(cursor.fetchone()[0])


def _same_start(recorded: Any, started: datetime) -> bool:
    if recorded is None:
        return False
    if isinstance(recorded, str):
        recorded = datetime.fromisoformat(recorded)
    return abs((recorded - started).total_seconds()) < 1e-3


def _state_table_exists(cursor: Any) -> bool:
    cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [STATE_TABLE])
    return bool(cursor.fetchone()[0])


# --------------------------------------------------------------------------- the restart guard


def ensure_lexical_fresh(status: LexicalStatus | None = None) -> LexicalStatus:
    """Rebuild the bm25 indexes once per server start when pg_textsearch loses them (< 1.3).

    Cheap when nothing is stale (the status query only). Concurrent processes serialize on
    a session advisory lock; the second one finds the state row current and does nothing.
    """
    status = status or lexical_status()
    if not status.stale or reading_replica():  # a replica rebuilds nothing (memory_engine.replicas)
        return status
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s)", [REBUILD_LOCK])
        try:
            fresh = lexical_status()
            if fresh.stale:
                with transaction.atomic():
                    rebuild_bm25_indexes(fresh.stale, server_started=fresh.server_started)
                fresh = lexical_status()
            return fresh
        finally:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [REBUILD_LOCK])


def rebuild_stale_after_migrate(sender: Any, using: str = DEFAULT_DB_ALIAS, **kwargs: Any) -> None:
    """post_migrate receiver: `migrate` right after a server start (``make run``) does the
    rebuild, so the first search does not wait for it."""
    if using == DEFAULT_DB_ALIAS:
        ensure_lexical_fresh()


def rebuild_bm25_indexes(names: list[str] | tuple[str, ...], *, server_started: datetime | None) -> dict[str, float]:
    """REINDEX each named bm25 index and record it for this server start; seconds per index."""
    seconds: dict[str, float] = {}
    with connection.cursor() as cursor:
        for name in names:
            table, predicate = BM25_PARTS[name]
            began = time.perf_counter()
            cursor.execute(f'REINDEX INDEX "{name}"')
            seconds[name] = time.perf_counter() - began
            cursor.execute(f"SELECT count(*) FROM {table} WHERE {predicate or 'true'}")  # noqa: S608 (constant names)
            rows = cursor.fetchone()[0]
            cursor.execute(
                f"""INSERT INTO {STATE_TABLE} (index_name, server_started, rebuilt_at, seconds, rows)
                    VALUES (%s, %s, now(), %s, %s)
                    ON CONFLICT (index_name) DO UPDATE SET server_started = EXCLUDED.server_started,
                        rebuilt_at = EXCLUDED.rebuilt_at, seconds = EXCLUDED.seconds, rows = EXCLUDED.rows""",
                [name, server_started, seconds[name], rows],
            )
            logger.info("rebuilt lexical index %s (%s rows) in %.2f s", name, rows, seconds[name])
    return seconds


# --------------------------------------------------------------------------- building the indexes


CREATE_STATE_TABLE = f"""
CREATE TABLE IF NOT EXISTS {STATE_TABLE} (
    index_name text PRIMARY KEY,
    server_started timestamptz,
    rebuilt_at timestamptz NOT NULL DEFAULT now(),
    seconds double precision NOT NULL DEFAULT 0,
    rows bigint NOT NULL DEFAULT 0
)"""


def try_create_extension(cursor: Any, using: str = DEFAULT_DB_ALIAS) -> str | None:
    """``CREATE EXTENSION IF NOT EXISTS pg_textsearch`` where the server allows it; its version or None.

    A managed server may not offer the extension, not preload it, or not let this role
    create it: each is a reason to use the fallback, never a failed migration.
    """
    cursor.execute("SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_textsearch')")
    if not cursor.fetchone()[0]:
        return None
    try:
        with transaction.atomic(using=using):
            cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_textsearch")
            # The access method only works when preloaded: prove it on a throwaway table.
            cursor.execute("CREATE TEMP TABLE me_bm25_probe (t text) ON COMMIT DROP")
            cursor.execute("CREATE INDEX ON me_bm25_probe USING bm25 (t) WITH (text_config = 'simple')")
            cursor.execute("DROP TABLE me_bm25_probe")
    except Exception as exc:  # noqa: BLE001 - any refusal means: fall back
        logger.warning("pg_textsearch is not usable here, the lexical channel falls back to tsvector: %s", exc)
        return None
    cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'pg_textsearch'")
    row = cursor.fetchone()
    return row[0] if row else None


def build_lexical_indexes(*, config: str | None = None, backend: str | None = None,
                          using: str = DEFAULT_DB_ALIAS) -> str:
    """(Re)create the lexical indexes of both tables with ``config``; returns the backend built.

    ``backend`` None: bm25 when pg_textsearch is usable, else tsvector. The other
    backend's indexes are dropped, so each table carries one lexical index.
    """
    config = valid_config_name(config or engine_settings.KNOWLEDGE_TEXT_SEARCH_CONFIG)
    with connections[using].cursor() as cursor:
        cursor.execute(CREATE_STATE_TABLE)
        cursor.execute("SELECT %s::regconfig", [config])  # an unknown config fails here, clearly
        if backend is None:
            backend = BM25 if try_create_extension(cursor, using) else TSVECTOR
        for name in BM25_INDEXES + GIN_INDEXES:
            cursor.execute(f'DROP INDEX IF EXISTS "{name}"')
        built: list[str] = []
        if backend == BM25:
            staged = _has_generations(cursor)  # before migration 0008 chunks have no generation
            for name, (table, predicate) in BM25_PARTS.items():
                if predicate and not staged:
                    if name == STAGED_CHUNK_BM25:
                        continue
                    predicate = None
                # pg_textsearch 1.0 refuses expression indexes: index the plain column.
                where = f" WHERE {predicate}" if predicate else ""
                cursor.execute(f"CREATE INDEX \"{name}\" ON {table} USING bm25 (text) "
                               f"WITH (text_config = '{config}'){where}")
                built.append(name)
        else:
            for table, (_bm25, gin) in INDEXES.items():
                cursor.execute(f'CREATE INDEX "{gin}" ON {table} USING gin ({tsvector_expression(config)})')
        cursor.execute(f"DELETE FROM {STATE_TABLE}")
        if built:
            cursor.execute(f"INSERT INTO {STATE_TABLE} (index_name, server_started) "
                           f"SELECT unnest(%s::text[]), pg_postmaster_start_time()", [built])
        cursor.execute(f"ANALYZE {', '.join(INDEXES)}")
    return backend


def _has_generations(cursor: Any) -> bool:
    cursor.execute("SELECT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() "
                   "AND table_name = 'memory_engine_chunk' AND column_name = 'generation_id')")
    return bool(cursor.fetchone()[0])


def drop_lexical_indexes(using: str = DEFAULT_DB_ALIAS) -> None:
    with connections[using].cursor() as cursor:
        for name in BM25_INDEXES + GIN_INDEXES:
            cursor.execute(f'DROP INDEX IF EXISTS "{name}"')
        cursor.execute(f"DROP TABLE IF EXISTS {STATE_TABLE}")
