"""The write funnel: the one function every memory write goes through.

hash -> reuse the content row or embed once (best-effort) -> nearest live memories of the
same store and facet -> skip (reinforcing the kept memory) / supersede / create -> one
assertion, with the near matches below the supersede threshold as ``potential_duplicates``.

No model call happens inside the store lock: the embedder runs before it, so a slow
or failing embedder never holds other writers back, and a failure only means the
content row is stored without a vector (repaired by the next write of the text or by
``manage.py memory_engine_reembed --missing``).
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from django.db import DatabaseError, DataError, connection
from django.utils import timezone

from memory_engine.conf import engine_settings, reloads_with_settings
from memory_engine.db import (
    Params,
    StatementTransaction,
    advisory_xact_lock,
    in_order,
    insert_sql,
    lost_prepared_statement,
    one_round_trip,
    prepared,
    result_columns,
    statement_transaction,
    stop_preparing,
    update_sql,
    vector_literal,
)
from memory_engine.details import changed_details
from memory_engine.exceptions import (
    AboutRequired,
    ConfidenceInvalid,
    ContentEmpty,
    ContentInvalid,
    ContentTooLong,
    ExpiresAtInvalid,
    InstructionRejected,
    QuotaExceeded,
    ThresholdsInvalid,
    ValidationFailed,
)
from memory_engine.facets import validate_facet
from memory_engine.ids import new_id
from memory_engine.instruction_guard import first_verdict, record_block
from memory_engine.models import (
    Agent,
    Lineage,
    Memory,
    MemoryAssertion,
    MemoryContent,
    MemoryRevision,
    MemoryStore,
    Provenance,
)
from memory_engine.models.memories import LIVE_MEMORY_SQL, Kind, Mechanism, Outcome, SourceType, Tier
from memory_engine.models.retention import RetentionClass
from memory_engine.providers.embeddings import EmbeddingError, get_embedding_provider, refresh_embedding_provider
from memory_engine.text import contains_nul

from .judge import get_judge
from .memory_schema import check_kind

logger = logging.getLogger("memory_engine.write")


class Reason:
    """Why the funnel decided what it did (``MemoryAssertion.decision_reason``)."""

    DUPLICATE = "duplicate"
    CHANGED_DETAIL = "changed_detail"
    SIMILAR = "similar"
    ABOUT_KEY = "about_key"
    JUDGE = "judge"
    BELOW_THRESHOLD = "below_threshold"


@dataclass
class WriteResult:
    """What the funnel did: ``action`` is created, superseded or skipped."""

    action: str
    memory: Memory
    assertion: MemoryAssertion
    similarity: float | None = None
    decision_reason: str = ""
    changed_details: list[dict[str, Any]] = field(default_factory=list)
    replaced: Memory | None = None
    #: live memories of the same store and facet near the text, below the supersede threshold:
    #: ``[{"memory_id", "similarity"}]``, best first
    potential_duplicates: list[dict[str, Any]] = field(default_factory=list)
    #: a skip that reinforced the kept memory (False within REINFORCE_INTERVAL_SECONDS)
    reinforced: bool = False


@dataclass(frozen=True)
class About:
    """A structured key naming what a memory is about, e.g. preference/contact_channel."""

    kind: str
    key: str

    @classmethod
    def parse(cls, value: Any) -> About | None:
        if value in (None, {}, ""):
            return None
        if isinstance(value, About):
            return value
        if not isinstance(value, dict) or not isinstance(value.get("kind"), str) or not isinstance(
            value.get("key"), str
        ) or not value["kind"].strip() or not value["key"].strip():
            raise ValidationFailed(
                "`about` must be an object with non-empty string `kind` and `key`.",
                details={"about": value if isinstance(value, (dict, str)) else repr(value)},
            )
        return cls(kind=value["kind"].strip()[:100], key=value["key"].strip()[:200])

    def as_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "key": self.key}


def normalize_text(text: str) -> str:
    """Trimmed, whitespace-collapsed text: the identity of a memory's content."""
    return " ".join(text.split())


def content_hash(text: str) -> str:
    return hashlib.sha256(normalize_text(text).encode("utf-8")).hexdigest()


def validate_content(text: Any) -> str:
    if not isinstance(text, str):
        raise ValidationFailed("`content` must be a string.", details={"field": "content"})
    if contains_nul(text):
        raise ContentInvalid("`content` must not contain NUL characters.", details={"field": "content"})
    normalized = normalize_text(text)
    if not normalized:
        raise ContentEmpty()
    limit = engine_settings.MAX_MEMORY_CHARS
    if len(normalized) > limit:
        raise ContentTooLong(
            f"Memory content is {len(normalized)} characters; the maximum is {limit}. "
            "Store long texts as documents instead.",
            details={"length": len(normalized), "max": limit},
        )
    return normalized


def validate_thresholds(duplicate: Any, supersede: Any) -> None:
    """Each threshold in [0, 1] (or None); supersede <= duplicate when both are set."""
    for name, value in (("duplicate_threshold", duplicate), ("supersede_threshold", supersede)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
            raise ThresholdsInvalid(
                f"{name} must be a number between 0 and 1.", details={name: value}
            )
    if duplicate is not None and supersede is not None and supersede > duplicate:
        raise ThresholdsInvalid(
            "supersede_threshold must not exceed duplicate_threshold.",
            details={"duplicate_threshold": duplicate, "supersede_threshold": supersede},
        )


#: Longest ``kind`` and ``title`` (the model's columns).
MAX_KIND_CHARS = 100
MAX_TITLE_CHARS = 500
#: Reinforcement never makes a memory certain.
MAX_REINFORCED_CONFIDENCE = 0.99
#: How many near matches a write answers as ``potential_duplicates``.
MAX_POTENTIAL_DUPLICATES = 5
#: Neighbours read in the one nearest-memories statement: the top match, the potential
#: duplicates, and room for a few matches above the supersede threshold that are neither.
NEIGHBOURS = 10


def validate_kind(value: Any) -> str | None:
    """A non-empty string of at most 100 characters, or None (unstated)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value.strip()) > MAX_KIND_CHARS:
        raise ValidationFailed(f"`kind` must be a non-empty string of at most {MAX_KIND_CHARS} characters.",
                               details={"field": "kind"})
    return value.strip()


def validate_text_field(value: Any, *, name: str, limit: int | None = None) -> str | None:
    """``title`` / ``summary``: a string (at most ``limit`` characters), or None (unstated)."""
    if value is None:
        return None
    if not isinstance(value, str) or contains_nul(value) or (limit is not None and len(value) > limit):
        bound = f" of at most {limit} characters" if limit is not None else ""
        raise ValidationFailed(f"`{name}` must be a string{bound} without NUL characters.",
                               details={"field": name})
    return value.strip()


def validate_confidence(value: Any) -> float | None:
    """A number in [0, 1], or None (unstated); else 400 CONFIDENCE_INVALID."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0.0 <= value <= 1.0:
        raise ConfidenceInvalid(details={"confidence": value if isinstance(value, (int, float, str)) else repr(value)})
    return float(value)


def validate_expires_at(value: Any, now: datetime) -> datetime | None:
    """An aware datetime after ``now``, or None (unstated); else 400 EXPIRES_AT_INVALID."""
    if value is None:
        return None
    if not isinstance(value, datetime) or timezone.is_naive(value) or value <= now:
        raise ExpiresAtInvalid(details={"expires_at": str(value)})
    return value


def ephemeral_expiry(retention_class: str, expires_at: datetime | None, now: datetime) -> datetime | None:
    """VALIDATION_ERROR for an unknown retention class; an ephemeral memory written without
    ``expires_at`` lives MEMORY_EPHEMERAL_TTL_SECONDS (docs/retention.md)."""
    if retention_class not in RetentionClass.values:
        raise ValidationFailed(f"`retention_class` must be one of {', '.join(RetentionClass.values)}.",
                               details={"field": "retention_class", "accepted": list(RetentionClass.values)})
    if retention_class == RetentionClass.EPHEMERAL and expires_at is None:
        return now + timedelta(seconds=engine_settings.MEMORY_EPHEMERAL_TTL_SECONDS)
    return expires_at


def resolve_expiry(store: MemoryStore, expires_at: datetime | None, now: datetime) -> datetime | None:
    """The writer's expiry, else now + the store's ``ttl_default``; capped at now + ``ttl_max``."""
    if expires_at is None and store.ttl_default:
        expires_at = now + timedelta(seconds=store.ttl_default)
    return cap_expiry(store, expires_at, now)


def cap_expiry(store: MemoryStore, expires_at: datetime | None, now: datetime) -> datetime | None:
    if not store.ttl_max:
        return expires_at
    cap = now + timedelta(seconds=store.ttl_max)
    return cap if expires_at is None or expires_at > cap else expires_at


def resolve_thresholds(
    store: MemoryStore, duplicate: float | None, supersede: float | None
) -> tuple[float, float]:
    """Request -> store -> settings default, then validated as a pair."""
    dup = duplicate if duplicate is not None else store.duplicate_threshold
    sup = supersede if supersede is not None else store.supersede_threshold
    dup = dup if dup is not None else engine_settings.DUPLICATE_THRESHOLD
    sup = sup if sup is not None else engine_settings.SUPERSEDE_THRESHOLD
    validate_thresholds(dup, sup)
    return float(dup), float(sup)


def lock_store(store_id: str) -> None:
    """Serialize decisions on one store until the end of the transaction."""
    advisory_xact_lock(f"memory_engine.store:{store_id}")


#: The HNSW settings of the dedup shortlist, transaction-local (``set_config(..., true)``).
HNSW_SETTINGS_SQL = (
    "set_config('hnsw.ef_search', %(ef_search)s::text, true),"
    " set_config('hnsw.iterative_scan', %(iterative_scan)s, true),"
    " set_config('hnsw.max_scan_tuples', %(max_scan_tuples)s::text, true)"
)


def _hnsw_settings() -> dict[str, Any]:
    return {"ef_search": engine_settings.HNSW_EF_SEARCH, "iterative_scan": engine_settings.HNSW_ITERATIVE_SCAN,
            "max_scan_tuples": engine_settings.HNSW_MAX_SCAN_TUPLES}


#: lock_store, and the shortlist's HNSW settings for the rest of the transaction (an exact scan
#: ignores them): the first statement of a write's content upsert (_resolve_content).
LOCK_FOR_WRITE_SQL = f"SELECT pg_advisory_xact_lock(hashtextextended(%(lock_key)s, 0)), {HNSW_SETTINGS_SQL}"


def _lock_for_write_params(store_id: str) -> dict[str, Any]:
    return {"lock_key": f"memory_engine.store:{store_id}", **_hnsw_settings()}


def lock_store_for_write(store_id: str) -> None:
    """LOCK_FOR_WRITE_SQL on its own (the write funnel sends it with its content upsert)."""
    with connection.cursor() as cursor:
        cursor.execute(LOCK_FOR_WRITE_SQL, _lock_for_write_params(store_id))


# store id -> (use exact scan, monotonic time checked); an answer made stale by the store or
# the table growing costs a little speed for up to SCAN_MODE_TTL, never correctness (an exact
# scan is the reference, HNSW is what larger stores get anyway). Dropped when
# DEDUP_EXACT_SCAN_MAX (or any other setting) changes.
_scan_mode_cache: dict[str, tuple[bool, float]] = {}
reloads_with_settings(_scan_mode_cache.clear)
SCAN_MODE_TTL = 300.0


#: The content table's rows at which a store's exact-scan limit is DEDUP_EXACT_SCAN_MAX.
EXACT_SCAN_REFERENCE_ROWS = 100_000
#: No table lowers the limit below this many content rows (nor DEDUP_EXACT_SCAN_MAX, if lower):
#: under 3 ms at any share of the table in bench/scan_mode.py, and no faster with HNSW.
EXACT_SCAN_ALWAYS = 2000


def exact_scan_limit(table_rows: float) -> int:
    """The most content rows a store may hold and still get the exact dedup shortlist, in a
    content table of ``table_rows`` rows (0 or less: unknown, before its first ANALYZE).

    DEDUP_EXACT_SCAN_MAX at EXACT_SCAN_REFERENCE_ROWS, scaled by the square root of the table's
    size: the exact scan costs a time per row of the store, the store-filtered HNSW scan one that
    grows as the store's share of the table shrinks, so the two cost the same where the store's
    rows squared are proportional to the table's (docs/benchmarks.md, "Dedup shortlist: exact
    scan or HNSW"). Never below EXACT_SCAN_ALWAYS."""
    limit = engine_settings.DEDUP_EXACT_SCAN_MAX
    if table_rows <= 0:
        return limit
    return max(min(EXACT_SCAN_ALWAYS, limit), round(limit * math.sqrt(table_rows / EXACT_SCAN_REFERENCE_ROWS)))


def _use_exact_scan(cursor: Any, store_id: str) -> bool:
    """Whether the store's dedup shortlist is an exact scan (else HNSW): its content rows, counted
    up to exact_scan_limit + 1 of the table's rows (the planner's estimate)."""
    cached = _scan_mode_cache.get(store_id)
    now = time.monotonic()
    if cached and now - cached[1] < SCAN_MODE_TTL:
        return cached[0]
    cursor.execute("SELECT reltuples FROM pg_class WHERE oid = 'memory_engine_memorycontent'::regclass")
    limit = exact_scan_limit(cursor.fetchone()[0])
    cursor.execute(
        "SELECT count(*) FROM (SELECT 1 FROM memory_engine_memorycontent WHERE store_id = %s LIMIT %s) s",
        [store_id, limit + 1],
    )
    exact = cursor.fetchone()[0] <= limit
    _scan_mode_cache[store_id] = (exact, now)
    return exact


@dataclass
class Candidates:
    """What the decision reads from the store, in one statement (dedup_candidates); each memory
    comes with its content's text (the vector stays in PostgreSQL)."""

    #: the oldest live memory of the facet with the write's ``about``, and its cosine to the text
    about: tuple[Memory, float | None] | None = None
    #: the oldest live memory of the facet holding exactly this content row
    same_text: Memory | None = None
    #: nearest live memories of the facet: [(memory id, cosine)], best first
    neighbours: list[tuple[str, float]] = field(default_factory=list)
    #: the first of ``neighbours`` as a model instance (the only one a decision reads)
    nearest: Memory | None = None


def _cosine(value: Any) -> float | None:
    # a NULL or NaN cosine: a missing or zero vector (cosine undefined)
    return None if value is None or math.isnan(value) else float(value)


#: The content columns read with each candidate (``c``), as the candidate's attributes.
CANDIDATE_CONTENT_SQL = ("c.content_hash AS content_hash, c.text AS content_text,"
                         " c.embedding_model AS content_model, c.created_at AS content_created_at")


@dataclass
class CandidatesQuery:
    """dedup_candidates' statement, built (candidates_query) before it is sent."""

    sql: str
    params: dict[str, Any]
    #: it reads the same-text memory / the nearest memories
    same: bool
    near: bool

    def covers(self, *, new_content: bool, neighbours: bool) -> bool:
        """Whether it reads what a decision needs once the content upsert has told whether the
        row is new (no memory holds it: no same-text memory to read) and holds a vector."""
        return (self.same or new_content) and (self.near or not neighbours)


def facet_filter(facet: str | None) -> str:
    """The memories of ``facet`` (the ``%(facet)s`` parameter), or without one (None). Not
    ``IS NOT DISTINCT FROM %(facet)s``: bound on the server (``OPTIONS["server_side_binding"]``)
    the planner cannot read that as ``IS NULL`` and estimates it at one row, then reads every
    memory of the table in a join (250 ms per write at 100,000 memories, docs/benchmarks.md,
    "Server-side binding")."""
    return "m.facet IS NULL" if facet is None else "m.facet = %(facet)s"


#: The candidates statement's parameters that shape its plan: the store (its share of the table),
#: the limits. A prepared candidates statement holds them as literals (memory_engine.db.prepared).
CANDIDATES_PLAN_PARAMS = ("store", "limit", "contents")


def candidates_query(store: MemoryStore, *, content_id: str | None = None, digest: str = "", facet: str | None,
                     about: About | None, neighbours: bool, limit: int = NEIGHBOURS,
                     new_content: bool = False) -> CandidatesQuery | None:
    """The statement of dedup_candidates (None: no branch to send). The content row is named by
    ``content_id``, or else by the store and ``digest``: then the statement can go in the same
    query as the upsert that makes the row (_resolve_content), and finds it there."""
    if content_id is not None:
        row = "id = %(content)s"
        content = "%(content)s"
    else:
        row = "store_id = %(store)s AND content_hash = %(hash)s"
        content = f"(SELECT id FROM memory_engine_memorycontent WHERE {row})"
    # A scalar subquery is evaluated once, as a parameter, so the HNSW index can order by it
    # (a joined CTE column would force a full sort).
    query = f"(SELECT embedding FROM memory_engine_memorycontent WHERE {row})"
    facet_sql = facet_filter(facet)
    # The about and same-text matches are live by the application's clock (Memory.objects.live()),
    # the shortlist by the transaction's (LIVE_MEMORY_SQL), as they were when they were separate
    # statements.
    live_now = f"{facet_sql} AND m.invalidated_at IS NULL AND (m.expires_at IS NULL OR m.expires_at > %(now)s)"
    columns = f"m.*, {CANDIDATE_CONTENT_SQL}"
    joined = "memory_engine_memory m JOIN memory_engine_memorycontent c ON c.id = m.content_id"
    branches = []
    if about is not None:
        branches.append(
            f"""(SELECT 'about' AS role, 1 - (c.embedding <=> {query}) AS cosine, {columns} FROM {joined}
            WHERE m.store_id = %(store)s AND {live_now} AND m.about_kind = %(about_kind)s
            AND m.about_key = %(about_key)s ORDER BY m.created_at, m.id LIMIT 1)""")
    if not new_content:
        # The content row is the store's: no store filter, which the planner could prefer to the
        # content's index while its statistics have not seen the store (estimated at one row).
        branches.append(
            f"""(SELECT 'same' AS role, NULL::float8 AS cosine, {columns} FROM {joined}
            WHERE m.content_id = {content} AND {live_now} ORDER BY m.created_at, m.id LIMIT 1)""")
    exact = False
    if neighbours:
        with connection.cursor() as cursor:
            exact = _use_exact_scan(cursor, store.pk)
        if exact:
            branches.extend(_exact_near_branches(columns))
        else:
            # HNSW: the store filters the content rows, which the index scan filters as it goes;
            # memories are read by key (a memory's content row is always in its store). Filtering
            # both tables would let the planner join the two by the store alone when its
            # statistics have not seen the store yet (a new store in an analyzed table: estimated
            # at one row), then compare every memory with every content row.
            branches.append(f"""(SELECT 'near' AS role, 1 - (c.embedding <=> {query}) AS cosine, {columns} FROM {joined}
                WHERE c.store_id = %(store)s AND {facet_sql} AND {LIVE_MEMORY_SQL} AND c.embedding IS NOT NULL
                ORDER BY c.embedding <=> {query} LIMIT %(limit)s)""")
    if not branches:
        return None
    statement = "\nUNION ALL\n".join(branches)
    if exact:
        statement = f"{_exact_shortlist_ctes(query, facet_sql)}\n{statement}"
    params = {"store": store.pk, "facet": facet, "limit": limit, "now": timezone.now(),
              "contents": limit * NEAREST_CONTENTS_PER_NEIGHBOUR,
              "about_kind": about.kind if about else None, "about_key": about.key if about else None}
    params.update({"content": content_id} if content_id is not None else {"hash": digest})
    return CandidatesQuery(statement, params, same=not new_content, near=neighbours)


def dedup_candidates(store: MemoryStore, content_id: str, *, facet: str | None, about: About | None,
                     neighbours: bool, limit: int = NEIGHBOURS, new_content: bool = False) -> Candidates:
    """The ``about`` match (when ``about`` is given), the same-text memory (unless the content
    row is ``new_content``, which no memory holds yet) and (``neighbours``) the top ``limit``
    nearest, among the store's live memories of the same facet (no facet: only memories without
    one), in one statement (candidates_query): branches of a UNION ALL, each planned on its own.
    A branch that cannot match is left out rather than sent: planning is most of what a small
    store's statement costs (``EXPLAIN (SUMMARY)``, 2026-12-01: 1.04 ms of planning with every
    branch against 0.21 ms of execution; 0.84 ms without the two unused ones).

    The query vector is read from the content row inside PostgreSQL, so no vector
    travels over the wire. Small stores are scanned exactly (_exact_shortlist_ctes: the HNSW
    index could miss rows when other stores crowd it); large ones use HNSW with the settings
    a write's store lock set (LOCK_FOR_WRITE_SQL: a raised ef_search and the iterative scan), so the
    store, facet and liveness filters still fill the top ``limit``.
    """
    query = candidates_query(store, content_id=content_id, facet=facet, about=about, neighbours=neighbours,
                             limit=limit, new_content=new_content)
    if query is None:
        return Candidates()
    with connection.cursor() as cursor:
        cursor.execute(query.sql, query.params)
        return read_candidates(result_columns(cursor) or [], cursor.fetchall())


def read_candidates(names: list[str], rows: list[tuple[Any, ...]]) -> Candidates:
    """Candidates from the rows of a candidates_query statement (``names``: its columns)."""
    found = Candidates()
    near: list[tuple[float, Any]] = []
    scanned: list[tuple[float, Any]] = []
    for row in rows:
        role, cosine = row[0], _cosine(row[1])
        if role == "about":
            found.about = (_candidate(names, row), cosine)
        elif role == "same":
            found.same_text = _candidate(names, row)
        elif cosine is not None:
            (scanned if role == "scan" else near).append((cosine, row))
    if scanned:
        # the nearest content rows held too few live memories of the facet: the scan of all the
        # store's memories ran, and its rows include the others
        near = scanned
    # sorted again because a relaxed iterative scan may return its rows slightly out of order
    near.sort(key=lambda pair: pair[0], reverse=True)
    memory_id = names.index("id")
    found.neighbours = [(row[memory_id], cosine) for cosine, row in near]
    if near:
        found.nearest = _candidate(names, near[0][1])
    return found


#: An exact shortlist first reads this many times ``limit`` of the store's nearest content rows.
NEAREST_CONTENTS_PER_NEIGHBOUR = 4


def _exact_shortlist_ctes(query: str, facet_sql: str) -> str:
    """The ``WITH`` of dedup_candidates' statement for the exact shortlist of a small store (up
    to DEDUP_EXACT_SCAN_MAX content rows): (distance, memory id) rows, nearest first.

    ``near``: the live memories of the facet held by the store's ``%(contents)s`` content rows
    nearest the text (``nearest_content``). The store filters the content rows alone, each
    compared once; their memories are read by key. ``scan``: all the store's live memories of
    the facet, each reading its content row by key, the answer when the nearest rows hold fewer
    than ``limit`` such memories while the store has more rows (a rare facet, many retired
    memories); it costs one key read per memory, and _exact_near_branches reads it only then (a
    CTE left unread is never run, so a parallel plan of it starts no worker).

    ``+ 0`` keeps the planner off the HNSW index, which could miss rows when other stores crowd
    it. Neither filters both tables by the store: on a store its statistics have not seen yet
    (estimated at one row) the planner would join the two by the store alone and compare every
    memory with every content row.
    """
    return f"""WITH nearest_content AS MATERIALIZED (
    SELECT id, (embedding <=> {query}) + 0 AS distance FROM memory_engine_memorycontent
    WHERE store_id = %(store)s AND embedding IS NOT NULL ORDER BY distance LIMIT %(contents)s),
near AS MATERIALIZED (
    SELECT n.distance, m.id FROM nearest_content n JOIN memory_engine_memory m ON m.content_id = n.id
    WHERE {facet_sql} AND {LIVE_MEMORY_SQL} ORDER BY n.distance LIMIT %(limit)s),
scan AS MATERIALIZED (
    SELECT (c.embedding <=> {query}) + 0 AS distance, m.id
    FROM memory_engine_memory m JOIN memory_engine_memorycontent c ON c.id = m.content_id
    WHERE m.store_id = %(store)s AND {facet_sql} AND {LIVE_MEMORY_SQL} AND c.embedding IS NOT NULL
    ORDER BY distance LIMIT %(limit)s)"""


def _exact_near_branches(columns: str) -> list[str]:
    """The exact shortlist's two branches of dedup_candidates' statement (_exact_shortlist_ctes):
    ``near``, and ``scan`` only when ``near`` fell short; each memory row and its content's
    columns read by key."""
    rows = ("memory_engine_memory m ON m.id = n.id JOIN memory_engine_memorycontent c ON c.id = m.content_id")
    return [
        f"(SELECT 'near' AS role, 1 - n.distance AS cosine, {columns} FROM near n JOIN {rows})",
        f"""(SELECT 'scan' AS role, 1 - n.distance AS cosine, {columns} FROM scan n JOIN {rows}
            WHERE (SELECT count(*) FROM near) < %(limit)s AND (SELECT count(*) FROM nearest_content) = %(contents)s)""",
    ]


#: Memory's fields by column (a row of ``m.*`` to Memory.from_db).
_MEMORY_FIELDS = {f.column: f for f in Memory._meta.concrete_fields}


def _candidate(names: list[str], row: tuple[Any, ...]) -> Memory:
    """A memory from one row of dedup_candidates (``role, cosine, m.*, content columns``), its
    values converted as a query would (JSON from text), with its content row attached."""
    values = dict(zip(names, row, strict=True))
    # from_db expects values in the model's field order, not the table's column order
    fields = [f for f in _MEMORY_FIELDS.values() if f.column in values]
    memory = Memory.from_db(
        connection.alias, [f.attname for f in fields],
        [f.from_db_value(values[f.column], None, connection) if hasattr(f, "from_db_value") else values[f.column]
         for f in fields],
    )
    memory.content = _content_row(
        [memory.content_id, memory.store_id, values["content_hash"], values["content_text"],
         values["content_model"], values["content_created_at"]],
    )
    return memory


def nearest_live_memories(store: MemoryStore, content_id: str, *, facet: str | None,
                          limit: int = NEIGHBOURS) -> list[tuple[str, float]]:
    """Top ``limit`` (memory id, cosine), best first, among the store's live memories of the
    same facet, against a content row's vector (dedup_candidates' shortlist on its own, with
    the HNSW settings set for the transaction)."""
    if not _use_exact_scan_cached(store.pk):
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT {HNSW_SETTINGS_SQL}", _hnsw_settings())
    return dedup_candidates(store, content_id, facet=facet, about=None, neighbours=True, limit=limit).neighbours


def _use_exact_scan_cached(store_id: str) -> bool:
    with connection.cursor() as cursor:
        return _use_exact_scan(cursor, store_id)


def embed_best_effort(text: str) -> tuple[list[float] | None, str]:
    """Embed one text; on any failure return (None, reason) instead of raising."""
    return embed_many_best_effort([text])[0]


def embed_many_best_effort(texts: Sequence[str]) -> list[tuple[list[float] | None, str]]:
    """:func:`embed_best_effort` for many texts, in one provider call (the provider splits it into
    its own batches). When that call fails, each text is embedded alone, so a text the provider
    refuses costs only its own vector."""
    provider = get_embedding_provider()
    if provider is None:
        return [(None, "embedding_not_configured") for _ in texts]
    try:
        vectors = provider.embed_documents(list(texts))
    except EmbeddingError as exc:
        if len(texts) > 1:
            logger.warning("embedding %d texts in one call failed; embedding them one by one: %s", len(texts), exc)
            return [embed_best_effort(text) for text in texts]
        logger.warning("embedding failed; storing without a vector: %s", exc)
        return [(None, "embedding_failed")]
    # A zero vector (e.g. a text of control characters only) has no direction: its cosine is NaN.
    return [(vector, "") if any(vector) else (None, "embedding_empty") for vector in vectors]


#: Tiers whose writes pass the instruction guard: what they hold reaches other users' turns.
GUARDED_TIERS = frozenset({Tier.AGENT, Tier.INSTITUTIONAL})


def guard_instructions(store: MemoryStore, *values: Any) -> None:
    """Refuse a write into an agent or institutional store whose strings read as instructions
    to an AI (400 INSTRUCTION_REJECTED, the guard's reason in ``details``: rule, family, score,
    view); counted under path=write and logged with the store id, never the text. User-tier
    writes are stored as given and filtered on every read."""
    if store.tier not in GUARDED_TIERS:
        return
    verdict = first_verdict(*values, gate="write")
    if verdict is not None:
        record_block(store.pk, path="write", rule=str(verdict.family), tier=store.tier, verdict=verdict)
        raise InstructionRejected(details=verdict.details())


def check_memory_quota(store: MemoryStore) -> None:
    project = store.project
    limit = project.max_memories if project.max_memories is not None else engine_settings.MAX_MEMORIES_PER_PROJECT
    if limit is None:
        return
    used = Memory.objects.live().filter(store__project_id=project.pk).count()
    if used >= limit:
        raise QuotaExceeded(
            f"Project {project.name} holds {used} valid memories; its quota is {limit}.",
            details={"used": used, "limit": limit},
        )


def _changed_details(old_text: str, new_text: str) -> list[dict[str, Any]]:
    if not engine_settings.CHANGED_DETAIL_GATE:
        return []
    return [change.as_dict() for change in changed_details(old_text, new_text)]


class Prepared(NamedTuple):
    """_prepare_vector's answer."""

    #: the text's vector, None when its content row holds one already (or the embedder failed)
    vector: list[float] | None
    #: what the assertion should record (an embedder failure)
    notes: dict[str, Any]
    #: the content row as seen before the write: None (no row), else whether it holds a vector
    stored: bool | None


def _prepare_vector(store: MemoryStore, text: str, digest: str) -> Prepared:
    """Embed the text unless its content row already holds a vector (outside any transaction)."""
    with connection.cursor() as cursor:
        # raw SQL: the ORM spent more time building the query than PostgreSQL answering it
        cursor.execute(
            "SELECT embedding IS NOT NULL FROM memory_engine_memorycontent WHERE store_id = %s AND content_hash = %s",
            [store.pk, digest],
        )
        row = cursor.fetchone()
    stored = None if row is None else row[0]
    if stored:
        return Prepared(None, {}, stored)
    vector, failure = embed_best_effort(text)
    return Prepared(vector, {"embedding": failure} if failure else {}, stored)


CONTENT_FIELDS = ["id", "store_id", "content_hash", "text", "embedding_model", "created_at"]


class ResolvedContent(NamedTuple):
    """_resolve_content's answer."""

    #: the content row, its vector deferred (it stays in PostgreSQL)
    row: MemoryContent
    has_vector: bool
    #: made by this statement: no memory holds it yet
    inserted: bool
    #: what the ``candidates`` statement sent with the upsert found
    found: Candidates | None = None


#: The content upsert (_resolve_content). A hit updates the row only to fill a missing vector:
#: rewriting it would add a row version, and with it an entry in every index (the HNSW graph's
#: insert is the slow one). The store lock is held, so a row this statement does not insert or
#: update is committed and visible to its second branch.
CONTENT_UPSERT_SQL = f"""WITH upsert AS (
    INSERT INTO memory_engine_memorycontent (id, store_id, content_hash, text, embedding, embedding_model, created_at)
    VALUES (%(id)s, %(store)s, %(hash)s, %(text)s, %(vector)s::vector, %(model)s, now())
    ON CONFLICT (store_id, content_hash) DO UPDATE SET
        embedding = EXCLUDED.embedding, embedding_model = EXCLUDED.embedding_model
    WHERE memory_engine_memorycontent.embedding IS NULL AND EXCLUDED.embedding IS NOT NULL
    RETURNING {", ".join(CONTENT_FIELDS)}, embedding IS NOT NULL
)
SELECT * FROM upsert
UNION ALL
SELECT {", ".join(CONTENT_FIELDS)}, embedding IS NOT NULL FROM memory_engine_memorycontent
WHERE store_id = %(store)s AND content_hash = %(hash)s AND NOT EXISTS (SELECT 1 FROM upsert)"""


def _resolve_content(store: MemoryStore, text: str, digest: str, vector: list[float] | None, *,
                     lock_first: bool = False, candidates: CandidatesQuery | None = None,
                     within: StatementTransaction | None = None, prepare: bool = False) -> ResolvedContent:
    """Find or make the content row in one statement, filling its vector if it had none.

    ``lock_first``: take the store lock for the write first (LOCK_FOR_WRITE_SQL), so the upsert
    runs once the lock is held; otherwise the caller holds it already. ``candidates``: a
    candidates_query statement naming the row by its hash, run after the upsert. ``within``: the
    transaction these statements open (its BEGIN goes with them). ``prepare``: run the upsert and
    the candidates statement as statements prepared on the connection (memory_engine.db.prepared;
    the caller runs its transaction again when one was lost). All in one round trip where the
    connection allows it (memory_engine.db.in_order).
    """
    provider = get_embedding_provider()
    model_name = provider.model_name if (provider and vector is not None) else ""
    content_id = new_id("mc")
    upsert_params = {"id": content_id, "store": store.pk, "hash": digest, "text": text, "model": model_name,
                     "vector": vector_literal(vector) if vector is not None else None}
    preparing: list[tuple[str, Params]] = []
    upsert: tuple[str, Params] = (CONTENT_UPSERT_SQL, upsert_params)
    if prepare:
        preparing, upsert = prepared(CONTENT_UPSERT_SQL, upsert_params)
    statements: list[tuple[str, Params]] = [upsert]
    if lock_first:
        statements.insert(0, (LOCK_FOR_WRITE_SQL, _lock_for_write_params(store.pk)))
    if candidates is not None:
        if prepare:
            more, execute = prepared(candidates.sql, candidates.params, inline=CANDIDATES_PLAN_PARAMS)
            preparing.extend(more)
            statements.append(execute)
        else:
            statements.append((candidates.sql, candidates.params))
    if within is not None:
        statements = within.opening(statements)
    statements = preparing + statements
    with connection.cursor() as cursor:
        results = []
        for _ in in_order(cursor, statements):
            names = result_columns(cursor)
            if names is not None:  # the statements that return rows (not a BEGIN)
                results.append((names, cursor.fetchall()))
    row = results[1 if lock_first else 0][1][0]
    found = read_candidates(*results[-1]) if candidates is not None else None
    return ResolvedContent(_content_row(row[:6]), bool(row[6]), row[0] == content_id, found)


#: What a content insert meets when the embedding model was switched after the text was embedded.
MODEL_SWITCH_ERRORS = ("dimensions, not", "different vector dimensions", "different halfvec dimensions")


def model_switched(exc: DataError) -> bool:
    """Whether a content insert failed because the embedding model (its dimension) was switched
    between the embedder call and the insert (docs/embeddings.md)."""
    return any(reason in str(exc) for reason in MODEL_SWITCH_ERRORS)


def _content_row(row: Any) -> MemoryContent:
    """A content row from CONTENT_FIELDS' values, its vector deferred (it stays in PostgreSQL)."""
    # from_db expects values in the model's field order
    values = dict(zip(CONTENT_FIELDS, row, strict=True))
    names = [f.attname for f in MemoryContent._meta.concrete_fields if f.attname in values]
    return MemoryContent.from_db(connection.alias, names, [values[name] for name in names])


@dataclass
class Decision:
    """What the funnel decided for one write, before anything is stored."""

    action: str = Outcome.CREATED
    reason: str = Reason.BELOW_THRESHOLD
    match: Memory | None = None
    similarity: float | None = None
    changes: list[dict[str, Any]] = field(default_factory=list)


def _decide(*, found: Candidates, has_vector: bool, content_row: MemoryContent, text: str, about: About | None,
            thresholds: tuple[float, float], judge: Any,
            notes: dict[str, Any]) -> tuple[Decision, list[tuple[str, float]]]:
    """Skip, supersede or create (see docs/write-funnel.md) from what the candidates statement
    ``found`` among the store's live memories of the same facet; runs under the store lock.
    Returns the decision and the nearest neighbours (for ``potential_duplicates``). ``notes``
    collects what the assertion should record.
    """
    dup_t, sup_t = thresholds
    neighbours = found.neighbours
    if about is not None and found.about is not None:
        about_match, about_cosine = found.about
        if about_match.content_id == content_row.pk:
            return Decision(Outcome.SKIPPED, Reason.DUPLICATE, about_match, 1.0), neighbours
        return Decision(Outcome.SUPERSEDED, Reason.ABOUT_KEY, about_match, about_cosine), neighbours
    if found.same_text is not None:
        return Decision(Outcome.SKIPPED, Reason.DUPLICATE, found.same_text, 1.0), neighbours
    if not has_vector:
        notes.setdefault("embedding", "missing")
        return Decision(), neighbours
    if found.nearest is None:
        return Decision(), neighbours
    # Not re-filtered on liveness: the statement that found it already was (and Python's clock
    # is not PostgreSQL's transaction clock).
    match, similarity = found.nearest, neighbours[0][1]
    decision = Decision(match=match, similarity=similarity)
    if about is not None and match.about_key is not None:
        # the match is explicitly about something else: a different fact
        notes["about_mismatch"] = {"kind": match.about_kind, "key": match.about_key}
        decision.reason = Reason.ABOUT_KEY
    elif similarity >= dup_t:
        decision.changes = _changed_details(match.content.text, text)
        if decision.changes:
            decision.action, decision.reason = Outcome.SUPERSEDED, Reason.CHANGED_DETAIL
        else:
            decision.action, decision.reason = Outcome.SKIPPED, Reason.DUPLICATE
    elif similarity >= sup_t:
        decision.action, decision.reason = Outcome.SUPERSEDED, Reason.SIMILAR
    elif judge is not None:
        verdict = judge(match.content.text, text, similarity)
        if verdict is not None:
            notes["judge"] = verdict.as_dict()
            if verdict.same_fact is True:
                decision.action, decision.reason = Outcome.SUPERSEDED, Reason.JUDGE
            elif verdict.same_fact is False:
                decision.reason = Reason.JUDGE
            else:
                notes["judge"]["fallback"] = "cosine"
    return decision, neighbours


def reinforced_confidence(old: float, new: float) -> float:
    """1 - (1 - old)(1 - new), capped at 0.99; never lower than ``old``."""
    return max(old, min(MAX_REINFORCED_CONFIDENCE, 1.0 - (1.0 - old) * (1.0 - new)))


def _later_expiry(store: MemoryStore, old: datetime | None, new: datetime | None, now: datetime) -> datetime | None:
    """The later of two expiries (None: never), capped at now + the store's ``ttl_max``."""
    later = None if old is None or new is None else max(old, new)
    return cap_expiry(store, later, now)


def _reinforce(memory: Memory, *, store: MemoryStore, content_row: MemoryContent, confidence: float | None,
               expires_at: datetime | None, now: datetime,
               notes: dict[str, Any]) -> tuple[bool, list[tuple[str, list[Any]]]]:
    """A write landed on ``memory`` (a skip): keep the newer wording, and reinforce it at most
    once per REINFORCE_INTERVAL_SECONDS. Returns whether it reinforced, and the writes that do
    it (a revision's INSERT, the memory's UPDATE), for the write's last round trip; ``memory``
    shows the new values already."""
    writes: list[tuple[str, list[Any]]] = []
    updates: dict[str, Any] = {}
    if memory.content_id != content_row.pk:
        # restated in other words: the newer wording is kept, the previous one is a revision
        revision = MemoryRevision(memory=memory, content_id=memory.content_id, created_at=now)
        writes.append(insert_sql(revision))
        notes["revision_id"] = revision.pk
        updates["content"] = content_row
    last = memory.reinforced_at or memory.created_at
    reinforced = (now - last).total_seconds() >= engine_settings.REINFORCE_INTERVAL_SECONDS
    if reinforced:
        updates.update(
            confidence=confidence if confidence is not None
            else reinforced_confidence(memory.confidence, engine_settings.DEFAULT_CONFIDENCE),
            expires_at=_later_expiry(store, memory.expires_at, expires_at, now),
            evidence_count=memory.evidence_count + 1,
            reinforced_at=now,
        )
    if updates:
        writes.append(update_sql(memory, updates))
        for name, value in updates.items():
            setattr(memory, name, value)
    return reinforced, writes


def _potential_duplicates(neighbours: list[tuple[str, float]], *, exclude: set[str],
                          supersede_threshold: float) -> list[dict[str, Any]]:
    """Neighbours in [SURFACE_DUPLICATES_ABOVE, supersede threshold), best first, at most 5."""
    low = engine_settings.SURFACE_DUPLICATES_ABOVE
    return [{"memory_id": memory_id, "similarity": similarity} for memory_id, similarity in neighbours
            if memory_id not in exclude and low <= similarity < supersede_threshold][:MAX_POTENTIAL_DUPLICATES]


def memory_write(
    *,
    store: MemoryStore,
    content: str,
    principal: str,
    mechanism: str = Mechanism.API,
    tags: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
    source_type: str = SourceType.MANUAL,
    duplicate_threshold: float | None = None,
    supersede_threshold: float | None = None,
    about: About | dict[str, Any] | None = None,
    generation_id: str | None = None,
    rule_id: str | None = None,
    judge: Any = None,
    conversation_id: str | None = None,
    kind: str | None = None,
    title: str | None = None,
    summary: str | None = None,
    confidence: float | None = None,
    facet: str | None = None,
    expires_at: datetime | None = None,
    agent: Agent | None = None,
    retention_class: str = RetentionClass.DURABLE,
    provenance: str = Provenance.UNKNOWN,
    lineage: str = Lineage.NATIVE,
) -> WriteResult:
    """Write one fact into a store: skip (reinforcing the kept memory), supersede or create, and
    record one assertion.

    A ``conversation_id`` is kept in the memory's metadata and makes it a ``conversation`` memory.
    ``kind`` defaults to a string ``tags["kind"]``, else ``fact``; ``confidence`` to
    DEFAULT_CONFIDENCE; ``provenance`` and ``lineage`` (docs/memory.md) are recorded on a created
    memory; ``expires_at`` to now + the store's ``ttl_default`` (always capped at its
    ``ttl_max``). A superseding memory inherits the retired one's kind, title and summary unless
    given. Dedup compares only live memories of the same ``facet``. ``agent`` is recorded on
    created memories (the agent that wrote it or for which it was written).

    Raises ContentEmpty / ContentTooLong / ValidationFailed / ConfidenceInvalid / FacetInvalid /
    ExpiresAtInvalid / KindUnknown / ThresholdsInvalid / AboutRequired / InstructionRejected /
    QuotaExceeded before anything is written (no assertion, as for every refusal).
    InstructionRejected: in an agent or institutional store, the text, title, summary or a string
    in tags/metadata/about reads as instructions to an AI (memory_engine.instruction_guard); the
    guard has no switch. Stores with ``judge_enabled`` consult the same-fact judge
    (memory_engine.services.judge) between JUDGE_FLOOR and the supersede threshold; ``judge`` may
    pass another callable ``(old, new, similarity) -> verdict``.
    """
    text = validate_content(content)
    tags = dict(tags or {})
    metadata = dict(metadata or {})
    if conversation_id:
        metadata["conversation_id"], source_type = conversation_id, SourceType.CONVERSATION
    if kind is None and isinstance(tags.get("kind"), str) and tags["kind"].strip():
        kind = tags["kind"]  # the kind's place before it had a field
    kind = validate_kind(kind)
    title = validate_text_field(title, name="title", limit=MAX_TITLE_CHARS)
    summary = validate_text_field(summary, name="summary")
    stated_confidence = validate_confidence(confidence)
    facet = validate_facet(facet)
    expires_at = validate_expires_at(expires_at, timezone.now())
    expires_at = ephemeral_expiry(retention_class, expires_at, timezone.now())
    about = About.parse(about)
    dup_t, sup_t = resolve_thresholds(store, duplicate_threshold, supersede_threshold)
    if kind is not None:
        check_kind(store.project_id, kind)
    required = store.require_about_for_kinds or []
    if about is None and (kind or Kind.FACT) in required:
        raise AboutRequired(
            f"Store {store.name} requires `about: {{kind, key}}` for memories of kind {kind or Kind.FACT!r}.",
            details={"kind": kind or Kind.FACT, "require_about_for_kinds": required},
        )
    guard_instructions(store, text, tags, metadata, about.as_dict() if about else None, title, summary)
    if judge is None and store.judge_enabled:
        judge = get_judge()
    request = _Write(
        text=text, digest=content_hash(text), tags=tags, metadata=metadata, source_type=source_type,
        about=about, kind=kind, title=title, summary=summary, confidence=stated_confidence, facet=facet,
        expires_at=expires_at, agent=agent, retention_class=retention_class, thresholds=(dup_t, sup_t),
        judge=judge, principal=principal, mechanism=mechanism, generation_id=generation_id, rule_id=rule_id,
        provenance=Provenance(provenance), lineage=Lineage(lineage),
    )
    vector, notes, stored = _prepare_vector(store, text, request.digest)
    try:
        result = _record_prepared(store, request, vector, notes, stored=stored)
    except DataError as exc:
        if vector is None or not model_switched(exc):
            raise
        # The embedding model was switched since the embedder call, and the write's transaction
        # (a savepoint inside a caller's) rolled back: embed with the model now active, outside
        # the lock as always, and write again; when that call fails too, without a vector.
        logger.info("the embedding model changed during a write; embedding the text again")
        refresh_embedding_provider()
        vector, failure = embed_best_effort(text)
        result = _record_prepared(store, request, vector, {"embedding": failure} if failure else {}, stored=stored)
    memory, rounded = result.memory, None if result.similarity is None else round(result.similarity, 4)
    logger.info(
        "memory write outcome=%s reason=%s store=%s memory=%s assertion=%s similarity=%s mechanism=%s",
        result.action, result.decision_reason, store.pk, memory.pk, result.assertion.pk, rounded, mechanism,
        extra={"outcome": result.action, "decision_reason": result.decision_reason, "store_id": store.pk,
               "memory_id": memory.pk, "assertion_id": result.assertion.pk,
               "replaced_memory_id": result.replaced.pk if result.replaced else None, "similarity": rounded,
               "mechanism": str(mechanism), "generation_id": generation_id, "rule_id": rule_id,
               "reinforced": result.reinforced, "potential_duplicates": len(result.potential_duplicates)},
    )
    return result


@dataclass
class _Write:
    """One write's validated inputs (memory_write's arguments), for _record."""

    text: str
    digest: str
    tags: dict[str, Any]
    metadata: dict[str, Any]
    source_type: str
    about: About | None
    kind: str | None
    title: str | None
    summary: str | None
    confidence: float | None
    facet: str | None
    expires_at: datetime | None
    agent: Agent | None
    retention_class: str
    thresholds: tuple[float, float]
    judge: Any
    principal: str
    mechanism: str
    generation_id: str | None
    rule_id: str | None
    provenance: str
    lineage: str


def _record_prepared(store: MemoryStore, request: _Write, vector: list[float] | None, notes: dict[str, Any], *,
                     stored: bool | None) -> WriteResult:
    """_record; when a statement it prepared on the connection was lost (deallocated, or on
    another server session behind a pooling proxy: memory_engine.db.lost_prepared_statement), its
    transaction rolled back, so it runs once more, after this process stops preparing."""
    try:
        return _record(store, request, vector, dict(notes), stored=stored)
    except DatabaseError as exc:
        if not lost_prepared_statement(exc):
            raise
        stop_preparing(exc)
        return _record(store, request, vector, notes, stored=stored)


def _record(store: MemoryStore, request: _Write, vector: list[float] | None, notes: dict[str, Any], *,
            stored: bool | None) -> WriteResult:
    """memory_write's transaction: under the store lock, the content row, the decision, the
    memory and its assertion. ``stored``: the content row as _prepare_vector saw it. Raises
    DataError when ``vector`` no longer fits the content column (model_switched) before anything
    is written; no savepoint guards that statement, since the caller writes again in a new
    transaction."""
    text, digest, about, facet = request.text, request.digest, request.about, request.facet
    tags, metadata, kind, title, summary = request.tags, request.metadata, request.kind, request.title, request.summary
    dup_t, sup_t = request.thresholds
    # The candidates statement goes with the content upsert, its branches chosen by what the
    # row was before the write (a new row has no same-text memory; a row without a vector, no
    # neighbours).
    query = candidates_query(store, digest=digest, facet=facet, about=about,
                             neighbours=vector is not None or stored is True, new_content=stored is None)
    # BEGIN goes with the first statements, COMMIT with the last (inside a caller's atomic()
    # block: a savepoint, as atomic() makes one)
    with statement_transaction() as within:
        content_row, has_vector, inserted, found = _resolve_content(store, text, digest, vector, lock_first=True,
                                                                    candidates=query, within=within, prepare=True)
        now = timezone.now()  # once the store lock is held: the store's writes get it in their order
        if query is None or found is None or not query.covers(new_content=inserted, neighbours=has_vector):
            # nothing was sent (no branch could match before the upsert), or another write of the
            # same text got in first: the statement now, with the branches the row needs
            found = dedup_candidates(store, content_row.pk, facet=facet, about=about, neighbours=has_vector,
                                     new_content=inserted)
        decision, neighbours = _decide(found=found, has_vector=has_vector, content_row=content_row, text=text,
                                       about=about, thresholds=(dup_t, sup_t), judge=request.judge, notes=notes)
        action, reason, match = decision.action, decision.reason, decision.match
        similarity, changes = decision.similarity, decision.changes

        if action == Outcome.CREATED:
            check_memory_quota(store)

        expiry = resolve_expiry(store, request.expires_at, now)
        replaced: Memory | None = None
        reinforced = False
        # The new memory, the replaced one's retirement (or the kept one's reinforcement) and the
        # assertion: one round trip.
        writes: list[tuple[str, list[Any]]] = []
        if action == Outcome.SKIPPED:
            memory = match
            assert memory is not None
            reinforced, reinforcing = _reinforce(memory, store=store, content_row=content_row,
                                                 confidence=request.confidence, expires_at=expiry, now=now,
                                                 notes=notes)
            writes.extend(reinforcing)
            notes["reinforced"] = reinforced
        else:
            if action == Outcome.SUPERSEDED:
                replaced = match
                assert replaced is not None
                tags = {**replaced.tags, **tags}
                metadata = {**replaced.metadata, **metadata}
                if about is None and replaced.about_key:
                    about = About(kind=replaced.about_kind or "", key=replaced.about_key)
                kind = kind if kind is not None else replaced.kind
                title = title if title is not None else replaced.title
                summary = summary if summary is not None else replaced.summary
            memory = Memory(
                store=store,
                content=content_row,
                tags=tags,
                metadata=metadata,
                source_type=request.source_type,
                about_kind=about.kind if about else None,
                about_key=about.key if about else None,
                kind=kind or Kind.FACT,
                title=title or "",
                summary=summary or "",
                confidence=request.confidence if request.confidence is not None
                else engine_settings.DEFAULT_CONFIDENCE,
                facet=facet,
                agent=request.agent,
                expires_at=expiry,
                created_at=now,
                retention_class=request.retention_class,
                provenance=request.provenance,
                lineage=request.lineage,
            )
            writes.append(insert_sql(memory))
            if replaced is not None:
                writes.append(update_sql(replaced, {"invalidated_at": now, "superseded_by": memory}))
                replaced.invalidated_at, replaced.superseded_by = now, memory
        kept_or_retired = [match.pk] if match is not None and action != Outcome.CREATED else []
        potential = _potential_duplicates(neighbours, exclude={memory.pk, *kept_or_retired},
                                          supersede_threshold=sup_t)

        details: dict[str, Any] = dict(notes)
        if changes:
            details["changed_details"] = changes
        if about is not None:
            details["about"] = about.as_dict()
        if potential:
            details["potential_duplicates"] = potential
        details["thresholds"] = {"duplicate": dup_t, "supersede": sup_t}
        assertion = MemoryAssertion(
            store=store,
            memory=memory,
            replaced_memory=replaced,
            content=text,
            outcome=action,
            similarity=similarity,
            decision_reason=reason,
            details=details,
            principal=request.principal,
            mechanism=request.mechanism,
            generation_id=request.generation_id,
            rule_id=request.rule_id,
        )
        writes.append(insert_sql(assertion))
        one_round_trip(within.closing(writes), saved=[memory, assertion] if action != Outcome.SKIPPED else [assertion])
    return WriteResult(
        action=str(action), memory=memory, assertion=assertion, similarity=similarity,
        decision_reason=reason, changed_details=changes, replaced=replaced,
        potential_duplicates=potential, reinforced=reinforced,
    )
