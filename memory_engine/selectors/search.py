"""The one search function: a query becomes one ranked, cited result list.

``knowledge_search`` serves ``POST /api/v1/knowledge/search``, agent push-injection and
the ``search_knowledge`` tool alike (DESIGN.md, *Read side*):

1. Sources from filters: documents when document_ids / document_paths / tags are given,
   or when nothing scopes the search to memories (a bare query searches the project's
   documents, never its memories); memories when memory_store_ids or tags are given.
2. Per source a vector top-k (cosine over pgvector) and a lexical top-k, invalidated
   memories excluded, scope filters inside each ranked query, every row carrying its
   cosine. All four lists come from one SQL statement (CTEs). k is max(limit,
   SEARCH_VECTOR_DEPTH / SEARCH_LEXICAL_DEPTH).
3. ``min_similarity`` drops vector candidates before fusion (no refill).
4. One ranking per channel: memories and chunks merged on the channel's own value.
5. Weighted reciprocal rank fusion, k = SEARCH_RRF_K (SEARCH_VECTOR_WEIGHT /
   SEARCH_LEXICAL_WEIGHT, or the request's), optional recency decay of memory results, cut to ``limit``.

Without a query the read is deterministic: memories oldest first, then chunks in
(document path, chunk_index) order.

Lexical channel (memory_engine.lexical): BM25 from a pg_textsearch ``bm25`` index
(``text <@> to_bm25query(q, index)``) where the database has one; otherwise the tsvector
fallback (any non-stop term matches, the top KNOWLEDGE_BM25_CANDIDATES by ts_rank_cd
re-scored with Okapi BM25). The answer names the backend (``lexical_backend``).

Vector channel: a scope of at most ``SEARCH_EXACT_SCAN_MAX`` rows is ranked by an exact
scan; a larger one by HNSW with pgvector 0.8's iterative index scan, which keeps
scanning until k rows pass the scope filters, so a selective scope is never short.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

from django.db import DatabaseError, connection, transaction
from django.utils import timezone
from psycopg.types.json import Jsonb

from memory_engine.conf import engine_settings
from memory_engine.db import vector_literal
from memory_engine.exceptions import SearchParameterInvalid, UnknownScope, ValidationFailed
from memory_engine.lexical import BM25, INDEXES, TSVECTOR, ensure_lexical_fresh, tsvector_expression
from memory_engine.models import Chunk, Document, Memory, MemoryContent, MemoryStore, Project
from memory_engine.providers.embeddings import EmbeddingError, require_embedding_provider

logger = logging.getLogger("memory_engine.search")

MAX_LIMIT = 100
#: pgvector's upper bound for hnsw.ef_search.
MAX_EF_SEARCH = 1000
#: Longer queries are cut for the lexical channel (the embedder truncates on its own).
MAX_LEXICAL_QUERY_CHARS = 4000

DOCUMENT = "document"
MEMORY = "memory"


class Degraded:
    """Reasons a search answered with less than both channels."""

    EMBEDDING_UNAVAILABLE = "embedding_unavailable"
    LEXICAL_UNAVAILABLE = "lexical_unavailable"


@dataclass
class SearchHit:
    """One ranked result; ``score`` is fused (comparable only inside one answer)."""

    source: str
    id: str
    text: str
    score: float
    similarity_score: float | None
    ranks: dict[str, int | None]
    tags: dict[str, Any] = field(default_factory=dict)
    document_id: str | None = None
    document_path: str | None = None
    document_title: str | None = None
    page: int | None = None
    chunk_index: int | None = None
    memory_store_id: str | None = None
    memory_store_name: str | None = None
    created_at: datetime | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SearchResult:
    """What ``knowledge_search`` answers: ranked hits and why anything was left out."""

    results: list[SearchHit]
    degraded: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    #: bm25 (pg_textsearch) or tsvector (the fallback); None when the lexical channel did not run.
    lexical_backend: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"results": [hit.as_dict() for hit in self.results], "degraded": list(self.degraded),
                "lexical_backend": self.lexical_backend}


@dataclass
class _Scope:
    """The resolved sources of one search."""

    project_id: str
    store_ids: list[str] | None  # None: memories are not searched
    search_documents: bool
    document_ids: list[str] | None
    path_patterns: list[str] | None
    tags: dict[str, Any] | None

    def params(self) -> dict[str, Any]:
        return {
            "project": self.project_id,
            "store_ids": self.store_ids or [],
            "doc_ids": self.document_ids or [],
            "path_patterns": self.path_patterns or [],
            "tags": Jsonb(self.tags) if self.tags else None,
        }


# --------------------------------------------------------------------------- validation


def _check_number(name: str, value: Any, code: str, *, low: float | None, high: float | None,
                   integer: bool = False, low_open: bool = False) -> None:
    bad = isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not isinstance(value, int))
    if not bad and isinstance(value, float) and not math.isfinite(value):
        bad = True
    if not bad:
        bad = (low is not None and (value <= low if low_open else value < low)) or (high is not None and value > high)
    if bad:
        bounds = {"min": low, "max": high, "exclusive_min": low_open}
        raise SearchParameterInvalid(f"`{name}` is out of range.", code=code,
                                     details={name: value if isinstance(value, (int, float, str)) else repr(value),
                                              **bounds})


def validate_search_knobs(*, limit: Any, rrf_k: Any, min_similarity: Any, recency_half_life_days: Any,
                          vector_weight: Any = None, lexical_weight: Any = None) -> None:
    """400 with a specific code for each knob out of range."""
    for name, weight in (("vector_weight", vector_weight), ("lexical_weight", lexical_weight)):
        if weight is not None:
            _check_number(name, weight, "WEIGHT_INVALID", low=0, high=100)
    _check_number("limit", limit, "LIMIT_INVALID", low=1, high=MAX_LIMIT, integer=True)
    _check_number("rrf_k", rrf_k, "RRF_K_INVALID", low=0, high=None, low_open=True)
    if min_similarity is not None:
        _check_number("min_similarity", min_similarity, "MIN_SIMILARITY_INVALID", low=-1, high=1)
    _check_number("recency_half_life_days", recency_half_life_days, "HALF_LIFE_INVALID", low=0, high=None)


def _string_list(name: str, value: Any) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, (list, tuple, set)) or not all(
        isinstance(v, str) for v in value
    ):
        raise ValidationFailed(f"`{name}` must be a list of strings.", details={"field": name})
    return list(dict.fromkeys(value))


def _like_prefix(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def resolve_scope(
    *,
    project: Project,
    query: str | None,
    memory_store_ids: list[str] | None,
    document_ids: list[str] | None,
    document_paths: list[str] | None,
    tags: dict[str, Any] | None,
) -> _Scope:
    """Which sources to search; unknown or foreign ids -> UNKNOWN_SCOPE naming them."""
    store_ids = _string_list("memory_store_ids", memory_store_ids)
    doc_ids = _string_list("document_ids", document_ids)
    paths = _string_list("document_paths", document_paths)
    if tags is not None and not isinstance(tags, dict):
        raise ValidationFailed("`tags` must be a JSON object.", details={"field": "tags"})
    unknown: dict[str, list[str]] = {}
    if store_ids:
        found = set(MemoryStore.objects.filter(project=project, pk__in=store_ids).values_list("pk", flat=True))
        missing = [i for i in store_ids if i not in found]
        if missing:
            unknown["memory_store_ids"] = missing
    if doc_ids:
        found = set(Document.objects.filter(project=project, pk__in=doc_ids).values_list("pk", flat=True))
        missing = [i for i in doc_ids if i not in found]
        if missing:
            unknown["document_ids"] = missing
    if unknown:
        names = ", ".join(i for ids in unknown.values() for i in ids)
        raise UnknownScope(f"Not found in your project: {names}.", details=unknown)

    tags = tags or None
    memories = bool(store_ids) or tags is not None
    if tags is not None and not store_ids:
        store_ids = list(MemoryStore.objects.filter(project=project).values_list("pk", flat=True))
    documents = bool(doc_ids) or bool(paths) or tags is not None or (query is not None and not memories)
    return _Scope(
        project_id=project.pk,
        store_ids=store_ids if memories else None,
        search_documents=documents,
        document_ids=doc_ids or None,
        path_patterns=[_like_prefix(p) for p in paths] if paths else None,
        tags=tags,
    )


# --------------------------------------------------------------------------- SQL pieces

MEM = Memory._meta.db_table
CONTENT = MemoryContent._meta.db_table
STORE = MemoryStore._meta.db_table
CHUNK = Chunk._meta.db_table
DOC = Document._meta.db_table
#: source -> its lexical index names (memory_engine.lexical builds them).
BM25_INDEX = {MEMORY: INDEXES[CONTENT][0], DOCUMENT: INDEXES[CHUNK][0]}
GIN_INDEX = {MEMORY: INDEXES[CONTENT][1], DOCUMENT: INDEXES[CHUNK][1]}


def _memory_where(scope: _Scope) -> str:
    where = "m.store_id = ANY(%(store_ids)s) AND m.invalidated_at IS NULL"
    if scope.tags is not None:
        where += " AND (m.tags @> %(tags)s OR s.tags @> %(tags)s)"
    return where


def _document_where(scope: _Scope) -> str:
    where = "d.project_id = %(project)s"
    alternatives = []
    if scope.document_ids:
        alternatives.append("d.id = ANY(%(doc_ids)s)")
    if scope.path_patterns:
        alternatives.append("d.path LIKE ANY(%(path_patterns)s)")
    if alternatives:
        where += " AND (" + " OR ".join(alternatives) + ")"
    if scope.tags is not None:
        where += " AND d.tags @> %(tags)s"
    return where


def _bm25_query(source: str) -> str:
    """The pg_textsearch score of ``x.text`` (negative BM25: lower is better)."""
    index = BM25_INDEX[source]
    return f"(x.text <@> to_bm25query(%(qtext)s, '{index}'))"


def _fallback_term_ctes(config: str) -> list[str]:
    """tsvector fallback: query terms (the config drops stop words), their document
    frequencies from the GIN indexes' ANALYZE statistics, and the OR-query that selects
    candidates (terms in more than KNOWLEDGE_BM25_MAX_DF of the rows are left out of it:
    they would select most of a large table; BM25 still scores them)."""
    tsv = tsvector_expression(config, "%(qtext)s")
    return [
        f"qterms AS (SELECT DISTINCT l AS term FROM unnest(tsvector_to_array({tsv})) AS l)",
        f"""lex_stats AS (
        SELECT s.tablename::text AS tab, u.e, u.f FROM pg_stats s,
            unnest(s.most_common_elems::text::text[],
                   s.most_common_elem_freqs[1:cardinality(s.most_common_elems::text::text[])]) AS u(e, f)
        WHERE s.schemaname = current_schema() AND s.tablename IN ('{GIN_INDEX[MEMORY]}', '{GIN_INDEX[DOCUMENT]}'))""",
        """tsq AS (
        SELECT coalesce(nullif(string_agg(quote_literal(term), ' | ') FILTER (WHERE df <= %(bm25_max_df)s), ''),
                        string_agg(quote_literal(term), ' | '), '')::tsquery AS q
        FROM (SELECT t.term, coalesce(max(st.f), 0) AS df FROM qterms t
              LEFT JOIN lex_stats st ON st.e = t.term GROUP BY t.term) terms)""",
    ]


def _vector_cte(source: str, scope: _Scope, exact: bool) -> str:
    """Top-k by cosine distance: through the HNSW index (iterative scan: it keeps going
    until k rows pass the scope), or (exact) a scan of the scope that computes each
    distance once (``OFFSET 0`` keeps the subquery, and so the index, out of the ORDER BY)."""
    if source == MEMORY:
        inner = f"""
        SELECT m.id AS id, x.embedding <=> %(qvec)s::vector AS dist
        FROM {CONTENT} x
        JOIN {MEM} m ON m.content_id = x.id
        JOIN {STORE} s ON s.id = m.store_id
        WHERE x.store_id = ANY(%(store_ids)s) AND x.embedding IS NOT NULL AND {_memory_where(scope)}"""
    else:
        inner = f"""
        SELECT x.id AS id, x.embedding <=> %(qvec)s::vector AS dist
        FROM {CHUNK} x
        JOIN {DOC} d ON d.id = x.document_id
        WHERE x.embedding IS NOT NULL AND {_document_where(scope)}"""
    if exact:
        return f"SELECT id, dist FROM ({inner} OFFSET 0) e ORDER BY dist, id LIMIT %(vec_k)s"
    return f"{inner}\n        ORDER BY x.embedding <=> %(qvec)s::vector LIMIT %(vec_k)s"


def _source_body(source: str, scope: _Scope, match: str) -> tuple[str, str]:
    """(primary key, FROM ... WHERE ...) of one source's lexical query, scope filters inside."""
    if source == MEMORY:
        return "m.id", f"""FROM {CONTENT} x
        JOIN {MEM} m ON m.content_id = x.id
        JOIN {STORE} s ON s.id = m.store_id
        WHERE {match} AND x.store_id = ANY(%(store_ids)s) AND {_memory_where(scope)}"""
    return "x.id", f"""FROM {CHUNK} x
        JOIN {DOC} d ON d.id = x.document_id
        WHERE {match} AND {_document_where(scope)}"""


def _lexical_ctes(source: str, scope: _Scope, with_vector: bool, short: str, backend: str,
                  config: str) -> list[str]:
    """The lexical top-k of one source (``{short}_lex``: id, lex, dist); higher lex is better.

    bm25: pg_textsearch's index scan in score order, the scope filtered inside the same
    query, so LIMIT is met whenever enough rows match. tsvector: rows matching any term,
    the top KNOWLEDGE_BM25_CANDIDATES by ts_rank_cd re-scored with Okapi BM25.
    """
    dist = "x.embedding <=> %(qvec)s::vector" if with_vector else "NULL::float8"
    if backend == BM25:
        score = _bm25_query(source)
        pk, body = _source_body(source, scope, f"{score} < 0")
        return [f"{short}_lex AS (SELECT {pk} AS id, -{score} AS lex, {dist} AS dist {body} "
                f"ORDER BY {score} LIMIT %(lex_k)s)"]
    tsv = tsvector_expression(config, "x.text")
    pk, body = _source_body(source, scope, f"{tsv} @@ (SELECT q FROM tsq)")
    return [
        f"{short}_pre AS (SELECT {pk} AS id, {tsv} AS v, {dist} AS dist {body} "
        f"ORDER BY ts_rank_cd({tsv}, (SELECT q FROM tsq), 1) DESC, {pk} LIMIT %(bm25_candidates)s)",
        f"""{short}_idf AS (
        SELECT t.term, ln(1 + (1 - coalesce(st.f, fl.f)) / coalesce(st.f, fl.f)) AS idf
        FROM qterms t
        CROSS JOIN (SELECT coalesce(min(f), 0.001) / 2 AS f FROM lex_stats WHERE tab = '{GIN_INDEX[source]}') fl
        LEFT JOIN lex_stats st ON st.tab = '{GIN_INDEX[source]}' AND st.e = t.term)""",
        f"""{short}_lex AS (
        SELECT p.id, sum(i.idf * (array_length(u.positions, 1) * (%(bm25_k1)s + 1))
                   / (array_length(u.positions, 1) + %(bm25_k1)s * (1 - %(bm25_b)s + %(bm25_b)s * length(p.v)
                      / (SELECT greatest(avg(length(v)), 1) FROM {short}_pre)))) AS lex,
               min(p.dist) AS dist
        FROM {short}_pre p CROSS JOIN LATERAL unnest(p.v) u JOIN {short}_idf i ON i.term = u.lexeme
        GROUP BY p.id ORDER BY lex DESC, p.id LIMIT %(lex_k)s)""",
    ]


def build_search_sql(scope: _Scope, *, vector: bool, lexical: str | None, exact: dict[str, bool],
                     config: str = "english") -> str:
    """One statement: up to four candidate lists, ranked per channel, with display fields.

    ``lexical`` is the backend (bm25 | tsvector) or None to leave the channel out.
    """
    sources = ([MEMORY] if scope.store_ids is not None else []) + ([DOCUMENT] if scope.search_documents else [])
    ctes: list[str] = []
    vec_parts: list[str] = []
    lex_parts: list[str] = []
    if lexical == TSVECTOR:
        ctes.extend(_fallback_term_ctes(config))
    for source in sources:
        short = "m" if source == MEMORY else "c"
        if vector:
            ctes.append(f"{short}_vec AS ({_vector_cte(source, scope, exact[source])})")
            vec_parts.append(f"SELECT '{source}'::text AS src, id, dist FROM {short}_vec")
        if lexical:
            ctes.extend(_lexical_ctes(source, scope, vector, short, lexical, config))
            lex_parts.append(f"SELECT '{source}'::text AS src, id, lex, dist FROM {short}_lex")
    parts = [f"SELECT src, id, dist, true AS v, NULL::float8 AS lex FROM ({p}) a" for p in vec_parts]
    parts += [f"SELECT src, id, dist, false AS v, lex FROM ({p}) b" for p in lex_parts]
    ctes.append(f"""cand AS (
        SELECT src, id, min(dist) AS dist, bool_or(v) AS v, max(lex) AS lex
        FROM ({' UNION ALL '.join(parts)}) u GROUP BY src, id)""")
    return "WITH " + ",\n".join(ctes) + f"""
    SELECT cand.src, cand.id, cand.dist, cand.v, cand.lex,
           coalesce(mc.text, ch.text), coalesce(mm.tags, d.tags),
           d.id, d.path, d.title, ch.page, ch.chunk_index, ms.id, ms.name, mm.created_at
    FROM cand
    LEFT JOIN {MEM} mm ON cand.src = '{MEMORY}' AND mm.id = cand.id
    LEFT JOIN {CONTENT} mc ON mc.id = mm.content_id
    LEFT JOIN {STORE} ms ON ms.id = mm.store_id
    LEFT JOIN {CHUNK} ch ON cand.src = '{DOCUMENT}' AND ch.id = cand.id
    LEFT JOIN {DOC} d ON d.id = ch.document_id"""


def _scope_sizes(cursor: Any, scope: _Scope, cap: int) -> dict[str, int]:
    """Rows each vector channel would rank, counted up to ``cap`` (index-only scans)."""
    parts = []
    if scope.store_ids is not None:
        parts.append(f"""(SELECT count(*) FROM (SELECT 1 FROM {MEM} m JOIN {STORE} s ON s.id = m.store_id
                      WHERE {_memory_where(scope)} LIMIT %(cap)s) a) AS memory""")
    if scope.search_documents:
        parts.append(f"""(SELECT count(*) FROM (SELECT 1 FROM {CHUNK} x JOIN {DOC} d ON d.id = x.document_id
                      WHERE {_document_where(scope)} LIMIT %(cap)s) b) AS document""")
    if not parts:
        return {}
    cursor.execute("SELECT " + ", ".join(parts), {**scope.params(), "cap": cap})
    row = cursor.fetchone()
    names = ([MEMORY] if scope.store_ids is not None else []) + ([DOCUMENT] if scope.search_documents else [])
    return dict(zip(names, row, strict=True))


# --------------------------------------------------------------------------- the function


def knowledge_search(
    *,
    project: Project,
    query: str | None = None,
    memory_store_ids: list[str] | None = None,
    document_ids: list[str] | None = None,
    document_paths: list[str] | None = None,
    tags: dict[str, Any] | None = None,
    min_similarity: float | None = None,
    rrf_k: float | None = None,
    recency_half_life_days: float = 0,
    limit: int = 10,
    vector_weight: float | None = None,
    lexical_weight: float | None = None,
    channels: tuple[str, ...] = ("vector", "lexical"),
) -> SearchResult:
    """Search the project's memories and documents; see the module docstring for the algorithm.

    Raises SearchParameterInvalid (400) for knobs out of range, UnknownScope (400) for
    ids outside the project, EmbeddingNotConfigured (503) when a query needs a vector
    and no provider is configured. A failing embedder or lexical channel degrades.
    ``channels`` switches a channel off (the evaluation harness measures each alone).
    """
    began = time.perf_counter()
    if not channels or not set(channels) <= {"vector", "lexical"}:
        raise ValidationFailed("`channels` must name vector and/or lexical.", details={"channels": list(channels)})
    rrf_k = engine_settings.SEARCH_RRF_K if rrf_k is None else rrf_k
    validate_search_knobs(limit=limit, rrf_k=rrf_k, min_similarity=min_similarity,
                          recency_half_life_days=recency_half_life_days, vector_weight=vector_weight,
                          lexical_weight=lexical_weight)
    weights = {
        "vector": float(engine_settings.SEARCH_VECTOR_WEIGHT if vector_weight is None else vector_weight),
        "lexical": float(engine_settings.SEARCH_LEXICAL_WEIGHT if lexical_weight is None else lexical_weight),
    }
    if query is not None and not isinstance(query, str):
        raise ValidationFailed("`query` must be a string.", details={"field": "query"})
    if query is not None:
        query = query.replace("\x00", " ").strip() or None
    scope = resolve_scope(project=project, query=query, memory_store_ids=memory_store_ids,
                          document_ids=document_ids, document_paths=document_paths, tags=tags)
    if scope.store_ids is None and not scope.search_documents:
        return SearchResult(results=[])
    if query is None:
        return SearchResult(results=_ordered_read(scope, limit))

    timings: dict[str, float] = {}
    degraded: list[str] = []
    qvec: list[float] | None = None
    if "vector" in channels:
        provider = require_embedding_provider()
        started = time.perf_counter()
        try:
            qvec = provider.embed_query(query)
        except EmbeddingError as exc:
            logger.warning("query embedding failed; searching lexically only: %s", exc)
            degraded.append(Degraded.EMBEDDING_UNAVAILABLE)
        timings["embedding_ms"] = (time.perf_counter() - started) * 1000
        if qvec is not None and not any(qvec):
            qvec = None  # a zero vector has no direction: every cosine would be NaN

    backend = _lexical_backend(degraded) if "lexical" in channels else None
    rows, backend = _run(scope, query, qvec, limit, degraded, backend=backend)
    hits = _fuse(rows, rrf_k=rrf_k, half_life=recency_half_life_days, limit=limit, min_similarity=min_similarity,
                 weights=weights)
    # Everything but the query embedding: scope checks, SQL, fusion.
    timings["search_ms"] = (time.perf_counter() - began) * 1000 - timings.get("embedding_ms", 0.0)
    return SearchResult(results=hits, degraded=degraded, timings=timings, lexical_backend=backend)


def _lexical_backend(degraded: list[str]) -> str | None:
    """The backend the lexical channel uses now, after the restart guard (lexical.py)."""
    try:
        return ensure_lexical_fresh().backend
    except DatabaseError as exc:
        logger.warning("lexical index state unreadable; answering from vectors only: %s", exc)
        degraded.append(Degraded.LEXICAL_UNAVAILABLE)
        return None


def _run(scope: _Scope, query: str, qvec: list[float] | None, limit: int, degraded: list[str], *,
         backend: str | None) -> tuple[list[tuple[Any, ...]], str | None]:
    vec_k = max(limit, int(engine_settings.SEARCH_VECTOR_DEPTH))
    params = {
        **scope.params(),
        "qvec": vector_literal(qvec) if qvec is not None else None,
        "qtext": query[:MAX_LEXICAL_QUERY_CHARS],
        "bm25_candidates": max(int(engine_settings.KNOWLEDGE_BM25_CANDIDATES), limit),
        "bm25_k1": float(engine_settings.KNOWLEDGE_BM25_K1),
        "bm25_b": float(engine_settings.KNOWLEDGE_BM25_B),
        "bm25_max_df": float(engine_settings.KNOWLEDGE_BM25_MAX_DF),
        "vec_k": vec_k,
        "lex_k": max(limit, int(engine_settings.SEARCH_LEXICAL_DEPTH)),
    }
    config = str(engine_settings.KNOWLEDGE_TEXT_SEARCH_CONFIG)
    cap = int(engine_settings.SEARCH_EXACT_SCAN_MAX)
    with transaction.atomic(), connection.cursor() as cursor:
        exact = {MEMORY: True, DOCUMENT: True}
        if qvec is not None:
            sizes = _scope_sizes(cursor, scope, cap + 1)
            exact = {source: sizes.get(source, 0) <= cap for source in exact}
            if not all(exact.values()):
                _set_hnsw_scan(cursor, vec_k)
        sql = partial(build_search_sql, scope, vector=qvec is not None, exact=exact, config=config)
        if backend is None:
            if qvec is None:
                return [], None
            cursor.execute(sql(lexical=None), params)
            return cursor.fetchall(), None
        try:
            with transaction.atomic():
                cursor.execute(sql(lexical=backend), params)
                return cursor.fetchall(), backend
        except (DatabaseError, ValueError) as exc:
            if qvec is None:
                raise
            logger.warning("lexical channel failed; answering from vectors only: %s", exc)
            degraded.append(Degraded.LEXICAL_UNAVAILABLE)
            cursor.execute(sql(lexical=None), params)
            return cursor.fetchall(), None


def _set_hnsw_scan(cursor: Any, k: int) -> None:
    """pgvector 0.8 iterative scan for this transaction: a filtered HNSW scan fetches more
    candidates until ``k`` rows pass the scope (or HNSW_MAX_SCAN_TUPLES were visited)."""
    ef = min(MAX_EF_SEARCH, max(int(engine_settings.HNSW_EF_SEARCH), k))
    cursor.execute(
        "SELECT set_config('hnsw.ef_search', %s, true), set_config('hnsw.iterative_scan', %s, true),"
        " set_config('hnsw.max_scan_tuples', %s, true)",
        [str(ef), str(engine_settings.HNSW_ITERATIVE_SCAN), str(int(engine_settings.HNSW_MAX_SCAN_TUPLES))],
    )


def _channel_ranks(rows: list[tuple[Any, ...]], min_similarity: float | None) -> tuple[dict, dict]:
    """One ranking per channel, memories and chunks merged on the channel's own value."""
    vector = [r for r in rows if r[3] and (min_similarity is None or 1.0 - r[2] >= min_similarity)]
    vector.sort(key=lambda r: (r[2], r[1]))
    lexical = [r for r in rows if r[4] is not None]
    lexical.sort(key=lambda r: (-r[4], r[1]))
    return ({(r[0], r[1]): i for i, r in enumerate(vector, 1)},
            {(r[0], r[1]): i for i, r in enumerate(lexical, 1)})


def _json(value: Any) -> dict[str, Any]:
    """jsonb from a raw cursor arrives as text (Django registers a text loader for psycopg)."""
    if isinstance(value, str):
        return json.loads(value)
    return value or {}


def _fuse(rows: list[tuple[Any, ...]], *, rrf_k: float, half_life: float, limit: int,
          min_similarity: float | None, weights: dict[str, float]) -> list[SearchHit]:
    now = timezone.now()
    vector_ranks, lexical_ranks = _channel_ranks(rows, min_similarity)
    hits = []
    for (src, pk, dist, _v, _lex, text, tags, doc_id, path, title, page, chunk_index,
         store_id, store_name, created_at) in rows:
        vrank, lrank = vector_ranks.get((src, pk)), lexical_ranks.get((src, pk))
        if vrank is None and lrank is None:
            continue  # a vector candidate below min_similarity
        score = sum(weights[channel] / (rrf_k + rank)
                    for channel, rank in (("vector", vrank), ("lexical", lrank)) if rank is not None)
        if half_life and src == MEMORY and created_at is not None:
            age_days = max(0.0, (now - created_at).total_seconds() / 86400.0)
            score *= 0.5 ** (age_days / half_life)
        hits.append(SearchHit(
            source=src, id=pk, text=text, score=score,
            similarity_score=None if dist is None or math.isnan(float(dist)) else 1.0 - float(dist),
            ranks={"vector": vrank, "lexical": lrank}, tags=_json(tags),
            document_id=doc_id, document_path=path, document_title=title, page=page,
            chunk_index=chunk_index, memory_store_id=store_id, memory_store_name=store_name,
            created_at=created_at,
        ))
    hits.sort(key=lambda h: (-h.score, h.ranks["vector"] or 1 << 30, h.ranks["lexical"] or 1 << 30, h.id))
    return hits[:limit]


def _ordered_read(scope: _Scope, limit: int) -> list[SearchHit]:
    """No query: memories oldest first, then chunks by document path and chunk_index."""
    parts = []
    if scope.store_ids is not None:
        parts.append(f"""(SELECT 0 AS part, m.id, mc.text, m.tags, NULL::varchar AS doc_id, NULL::varchar AS path,
                NULL::varchar AS title, NULL::int AS page, NULL::int AS chunk_index, s.id AS store_id,
                s.name AS store_name, m.created_at, m.created_at AS k1, NULL::varchar AS k2, 0 AS k3
            FROM {MEM} m JOIN {CONTENT} mc ON mc.id = m.content_id JOIN {STORE} s ON s.id = m.store_id
            WHERE {_memory_where(scope)} ORDER BY m.created_at, m.id LIMIT %(k)s)""")
    if scope.search_documents:
        parts.append(f"""(SELECT 1, x.id, x.text, d.tags, d.id, d.path, d.title, x.page, x.chunk_index,
                NULL, NULL, NULL::timestamptz, NULL::timestamptz, d.path, x.chunk_index
            FROM {CHUNK} x JOIN {DOC} d ON d.id = x.document_id
            WHERE {_document_where(scope)} ORDER BY d.path, x.chunk_index LIMIT %(k)s)""")
    sql = "SELECT * FROM (" + " UNION ALL ".join(parts) + ") u ORDER BY 1, 13, 14, 15, 2 LIMIT %(k)s"
    with connection.cursor() as cursor:
        cursor.execute(sql, {**scope.params(), "k": limit})
        rows = cursor.fetchall()
    return [
        SearchHit(
            source=MEMORY if part == 0 else DOCUMENT, id=pk, text=text, score=0.0, similarity_score=None,
            ranks={"vector": None, "lexical": None}, tags=_json(tags), document_id=doc_id, document_path=path,
            document_title=title, page=page, chunk_index=chunk_index, memory_store_id=store_id,
            memory_store_name=store_name, created_at=created_at,
        )
        for (part, pk, text, tags, doc_id, path, title, page, chunk_index, store_id, store_name, created_at,
             *_keys) in rows
    ]
