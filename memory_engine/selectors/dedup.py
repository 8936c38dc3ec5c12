"""The dedup candidates: what the write funnel reads from a store before it decides.

One statement (:func:`dedup_candidates`, built by :func:`candidates_query`) reads, among the
store's live memories of the write's facet, the memory with the write's ``about``, the memory
holding exactly its content row, and the nearest memories by cosine (an exact scan in a small
store, HNSW in a large one: :func:`use_exact_scan`). The funnel
(memory_engine.services.memories) sends it with its content upsert, as statements prepared on
the connection; the store lock (memory_engine.services.memories.locks) sets the HNSW settings it
reads (:data:`HNSW_SETTINGS_SQL`). docs/write-funnel.md, "Round trips per write".
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from django.db import connection
from django.utils import timezone

from memory_engine.conf import engine_settings, reloads_with_settings
from memory_engine.db import result_columns
from memory_engine.models import Memory, MemoryContent, MemoryStore
from memory_engine.models.memories import LIVE_MEMORY_SQL, live_memory_sql

__all__ = ["CANDIDATES_PLAN_PARAMS", "CONTENT_FIELDS", "EXACT_SCAN_ALWAYS", "HNSW_SETTINGS_SQL", "NEIGHBOURS",
           "AboutKey", "Candidates", "CandidatesQuery", "candidates_query", "content_row", "dedup_candidates",
           "exact_scan_limit", "facet_filter", "forget_scan_modes", "hnsw_settings", "nearest_live_memories",
           "read_candidates", "use_exact_scan"]

#: Neighbours read in the one nearest-memories statement: the top match, the potential
#: duplicates, and room for a few matches above the supersede threshold that are neither.
NEIGHBOURS = 10


class AboutKey(Protocol):
    """What the candidates read of a write's ``about`` (memory_engine.services.memories.About)."""

    @property
    def kind(self) -> str: ...

    @property
    def key(self) -> str: ...


#: The HNSW settings of the dedup shortlist, transaction-local (``set_config(..., true)``).
HNSW_SETTINGS_SQL = (
    "set_config('hnsw.ef_search', %(ef_search)s::text, true),"
    " set_config('hnsw.iterative_scan', %(iterative_scan)s, true),"
    " set_config('hnsw.max_scan_tuples', %(max_scan_tuples)s::text, true)"
)


def hnsw_settings() -> dict[str, Any]:
    """HNSW_SETTINGS_SQL's parameters, from the settings."""
    return {"ef_search": engine_settings.HNSW_EF_SEARCH, "iterative_scan": engine_settings.HNSW_ITERATIVE_SCAN,
            "max_scan_tuples": engine_settings.HNSW_MAX_SCAN_TUPLES}



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


def forget_scan_modes() -> None:
    """Count every store's content rows again at its next write (use_exact_scan)."""
    _scan_mode_cache.clear()


def use_exact_scan(cursor: Any, store: MemoryStore) -> bool:
    """Whether the store's dedup shortlist is an exact scan (else HNSW): its content rows, counted
    up to exact_scan_limit + 1 of the table's rows (the planner's estimate); the answer is kept
    for SCAN_MODE_TTL."""
    store_id = store.pk
    cached = _scan_mode_cache.get(store_id)
    now = time.monotonic()
    if cached and now - cached[1] < SCAN_MODE_TTL:
        return cached[0]
    cursor.execute("SELECT reltuples FROM pg_class WHERE oid = 'memory_engine_memorycontent'::regclass")
    limit = exact_scan_limit(cursor.fetchone()[0])
    cursor.execute(
        "SELECT count(*) FROM (SELECT 1 FROM memory_engine_memorycontent WHERE project_id = %s AND store_id = %s"
        " LIMIT %s) s",
        [store.project_id, store_id, limit + 1],
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
    #: the first of ``neighbours`` as a model instance
    nearest: Memory | None = None
    #: live memories of the facet sharing a subject with the write, nearest first, with their cosine
    #: (docs/write-funnel.md, "Subjects"); the neighbours' own subjects are on ``nearest`` and read
    #: through ``neighbour_subjects``
    by_subject: list[tuple[Memory, float]] = field(default_factory=list)
    #: each neighbour's subjects, by memory id
    neighbour_subjects: dict[str, list[str]] = field(default_factory=dict)
    #: the neighbours' rows by memory id, and the statement's columns (for ``neighbour``)
    rows: dict[str, tuple[Any, ...]] = field(default_factory=dict, repr=False)
    names: list[str] = field(default_factory=list, repr=False)

    def neighbour(self, memory_id: str) -> Memory:
        """One of ``neighbours`` as a model instance."""
        if self.nearest is not None and self.nearest.pk == memory_id:
            return self.nearest
        return _candidate(self.names, self.rows[memory_id])


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


#: The candidates statement's parameters that shape its plan: the store (its share of the table)
#: and its project, the limits. A prepared candidates statement holds them as literals
#: (memory_engine.db.prepared).
CANDIDATES_PLAN_PARAMS = ("store", "project", "limit", "contents")


def candidates_query(store: MemoryStore, *, content_id: str | None = None, digest: str = "", facet: str | None,
                     about: AboutKey | None, neighbours: bool, limit: int = NEIGHBOURS,
                     new_content: bool = False, subjects: list[str] | None = None) -> CandidatesQuery | None:
    """The statement of dedup_candidates (None: no branch to send). ``subjects``: the write's
    subject keys, whose sharers it reads with the neighbours. The content row is named by
    ``content_id``, or else by the store and ``digest``: then the statement can go in the same
    query as the upsert that makes the row (memory_engine.services.memories.content.resolve_content),
    and finds it there."""
    if content_id is not None:
        row = "id = %(content)s"
        content = "%(content)s"
    else:
        row = "project_id = %(project)s AND store_id = %(store)s AND content_hash = %(hash)s"
        content = f"(SELECT id FROM memory_engine_memorycontent WHERE {row})"
    # A scalar subquery is evaluated once, as a parameter, so the HNSW index can order by it
    # (a joined CTE column would force a full sort).
    query = f"(SELECT embedding FROM memory_engine_memorycontent WHERE {row})"
    facet_sql = facet_filter(facet)
    # The about and same-text matches are live by the application's clock (Memory.objects.live()),
    # the shortlist by the transaction's (LIVE_MEMORY_SQL), as they were when they were separate
    # statements.
    live_now = f"{facet_sql} AND {live_memory_sql(now='%(now)s')}"
    # Every row read is the store's project's, which each table's filter says: on a distributed
    # PostgreSQL (docs/scaling.md) that routes the statement to the one node holding the project.
    # The column is unindexed: it never takes an index's place.
    tenant = "m.project_id = %(project)s AND c.project_id = %(project)s"
    columns = f"m.*, {CANDIDATE_CONTENT_SQL}"
    joined = "memory_engine_memory m JOIN memory_engine_memorycontent c ON c.id = m.content_id"
    branches = []
    if about is not None:
        branches.append(
            f"""(SELECT 'about' AS role, 1 - (c.embedding <=> {query}) AS cosine, {columns} FROM {joined}
            WHERE m.store_id = %(store)s AND {tenant} AND {live_now} AND m.about_kind = %(about_kind)s
            AND m.about_key = %(about_key)s ORDER BY m.created_at, m.id LIMIT 1)""")
    if not new_content:
        # The content row is the store's: no store filter, which the planner could prefer to the
        # content's index while its statistics have not seen the store (estimated at one row).
        branches.append(
            f"""(SELECT 'same' AS role, NULL::float8 AS cosine, {columns} FROM {joined}
            WHERE m.content_id = {content} AND {tenant} AND {live_now} ORDER BY m.created_at, m.id LIMIT 1)""")
    exact = False
    if neighbours:
        with connection.cursor() as cursor:
            exact = use_exact_scan(cursor, store)
        if exact:
            branches.extend(_exact_near_branches(columns))
        else:
            # HNSW: the store filters the content rows, which the index scan filters as it goes;
            # memories are read by key (a memory's content row is always in its store). Filtering
            # both tables would let the planner join the two by the store alone when its
            # statistics have not seen the store yet (a new store in an analyzed table: estimated
            # at one row), then compare every memory with every content row.
            branches.append(f"""(SELECT 'near' AS role, 1 - (c.embedding <=> {query}) AS cosine, {columns} FROM {joined}
                WHERE c.store_id = %(store)s AND {tenant} AND {facet_sql} AND {LIVE_MEMORY_SQL}
                AND c.embedding IS NOT NULL ORDER BY c.embedding <=> {query} LIMIT %(limit)s)""")
        if subjects:
            # The memories about one of the write's subjects: among many similar records of one
            # kind, the nearest by cosine are usually other subjects' (the GIN index on live
            # memories' subjects finds these whatever their rank). ``+ 0`` keeps the planner off
            # the HNSW index, where other stores' nearer rows could use up the scan before it
            # reaches them (the update would then retire nothing).
            branches.append(f"""(SELECT 'subject' AS role, 1 - (c.embedding <=> {query}) AS cosine, {columns}
                FROM {joined} WHERE m.store_id = %(store)s AND {tenant} AND {facet_sql} AND {LIVE_MEMORY_SQL}
                AND m.subjects && %(subjects)s::text[] AND c.embedding IS NOT NULL
                ORDER BY (c.embedding <=> {query}) + 0 LIMIT %(limit)s)""")
    if not branches:
        return None
    statement = "\nUNION ALL\n".join(branches)
    if exact:
        statement = f"{_exact_shortlist_ctes(query, facet_sql)}\n{statement}"
    params = {"store": store.pk, "project": store.project_id, "facet": facet, "limit": limit, "now": timezone.now(),
              "contents": limit * NEAREST_CONTENTS_PER_NEIGHBOUR,
              "about_kind": about.kind if about else None, "about_key": about.key if about else None,
              "subjects": list(subjects or [])}
    params.update({"content": content_id} if content_id is not None else {"hash": digest})
    return CandidatesQuery(statement, params, same=not new_content, near=neighbours)


def dedup_candidates(store: MemoryStore, content_id: str, *, facet: str | None, about: AboutKey | None,
                     neighbours: bool, limit: int = NEIGHBOURS, new_content: bool = False,
                     subjects: list[str] | None = None) -> Candidates:
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
    a write's store lock set (HNSW_SETTINGS_SQL: a raised ef_search and the iterative scan), so the
    store, facet and liveness filters still fill the top ``limit``.
    """
    query = candidates_query(store, content_id=content_id, facet=facet, about=about, neighbours=neighbours,
                             limit=limit, new_content=new_content, subjects=subjects)
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
        if role == "subject":
            if cosine is not None:
                found.by_subject.append((_candidate(names, row), cosine))
        elif role == "about":
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
    memory_id, subjects = names.index("id"), names.index("subjects")
    found.neighbours = [(row[memory_id], cosine) for cosine, row in near]
    found.neighbour_subjects = {row[memory_id]: list(row[subjects] or []) for _, row in near}
    found.rows, found.names = {row[memory_id]: row for _, row in near}, names
    found.by_subject.sort(key=lambda pair: pair[1], reverse=True)
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
    WHERE project_id = %(project)s AND store_id = %(store)s AND embedding IS NOT NULL
    ORDER BY distance LIMIT %(contents)s),
near AS MATERIALIZED (
    SELECT n.distance, m.id FROM nearest_content n JOIN memory_engine_memory m ON m.content_id = n.id
    WHERE m.project_id = %(project)s AND {facet_sql} AND {LIVE_MEMORY_SQL} ORDER BY n.distance LIMIT %(limit)s),
scan AS MATERIALIZED (
    SELECT (c.embedding <=> {query}) + 0 AS distance, m.id
    FROM memory_engine_memory m JOIN memory_engine_memorycontent c ON c.id = m.content_id
    WHERE m.store_id = %(store)s AND m.project_id = %(project)s AND c.project_id = %(project)s AND {facet_sql}
    AND {LIVE_MEMORY_SQL} AND c.embedding IS NOT NULL ORDER BY distance LIMIT %(limit)s)"""


def _exact_near_branches(columns: str) -> list[str]:
    """The exact shortlist's two branches of dedup_candidates' statement (_exact_shortlist_ctes):
    ``near``, and ``scan`` only when ``near`` fell short; each memory row and its content's
    columns read by key."""
    rows = ("memory_engine_memory m ON m.id = n.id AND m.project_id = %(project)s"
            " JOIN memory_engine_memorycontent c ON c.id = m.content_id AND c.project_id = %(project)s")
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
    memory.content = content_row(
        [memory.content_id, memory.store_id, memory.project_id, values["content_hash"], values["content_text"],
         values["content_model"], values["content_created_at"]],
    )
    return memory


def nearest_live_memories(store: MemoryStore, content_id: str, *, facet: str | None,
                          limit: int = NEIGHBOURS) -> list[tuple[str, float]]:
    """Top ``limit`` (memory id, cosine), best first, among the store's live memories of the
    same facet, against a content row's vector (dedup_candidates' shortlist on its own, with
    the HNSW settings set for the transaction)."""
    with connection.cursor() as cursor:
        if not use_exact_scan(cursor, store):
            cursor.execute(f"SELECT {HNSW_SETTINGS_SQL}", hnsw_settings())
    return dedup_candidates(store, content_id, facet=facet, about=None, neighbours=True, limit=limit).neighbours



CONTENT_FIELDS = ["id", "store_id", "project_id", "content_hash", "text", "embedding_model", "created_at"]


def content_row(row: Any) -> MemoryContent:
    """A content row from CONTENT_FIELDS' values, its vector deferred (it stays in PostgreSQL)."""
    # from_db expects values in the model's field order
    values = dict(zip(CONTENT_FIELDS, row, strict=True))
    names = [f.attname for f in MemoryContent._meta.concrete_fields if f.attname in values]
    return MemoryContent.from_db(connection.alias, names, [values[name] for name in names])

