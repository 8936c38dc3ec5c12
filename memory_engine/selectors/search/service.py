"""``knowledge_search``: validate, resolve the scope, embed the query, run one statement, fuse.

The SQL is built by memory_engine.selectors.search.sql, its rows are read as records
(memory_engine.selectors.search.rows) and ranked by memory_engine.selectors.search.fusion;
this module decides what runs: which channels, exact scan or HNSW, and what degrades when the
embedder or the lexical channel fails.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from django.db import DatabaseError, transaction
from django.utils import timezone

from memory_engine.conf import engine_settings
from memory_engine.db import result_columns, vector_literal
from memory_engine.exceptions import QueryRequired
from memory_engine.instruction_guard import drop_instructions
from memory_engine.lexical import ensure_lexical_fresh
from memory_engine.models import Project, ReplayRun
from memory_engine.models.memories import Tier
from memory_engine.providers.embeddings import (
    EmbeddingError,
    refresh_embedding_provider,
    require_embedding_provider,
)
from memory_engine.providers.rerank import RerankError, get_rerank_provider, rerank_top_n
from memory_engine.ranking_knobs import RankingKnobs, ranking_knobs
from memory_engine.relevance import relevance_model
from memory_engine.replicas import current_read_alias, read_connection

from . import boosts, stages
from .fusion import fuse, with_context
from .graph import graph_entities
from .request import SearchRequest
from .results import DOCUMENT, MEMORY, USER_FOR_AGENT, Degraded, SearchHit, SearchResult
from .rows import CandidateRow, ContextRow, DisplayRow, fetch_records
from .scope import Scope, resolve_scope
from .sql import (
    HNSW_SCAN_SQL,
    build_search_sql,
    context_sql,
    hit_entities_sql,
    ordered_read_sql,
    scope_sizes_sql,
    stored_findings_sql,
    stored_vectors_sql,
)
from .validation import boolean_option, clean_query, validate_channels, validate_search_knobs

logger = logging.getLogger("memory_engine.search")

#: pgvector's upper bound for hnsw.ef_search.
MAX_EF_SEARCH = 1000
#: Longer queries are cut for the lexical channel (the embedder truncates on its own).
MAX_LEXICAL_QUERY_CHARS = 4000


def knowledge_search(request: SearchRequest) -> SearchResult:
    """Search the project's memories and documents; see the package docstring for the algorithm.

    Raises a SearchParameterInvalid subclass (400: LimitInvalid, RRFKInvalid,
    MinSimilarityInvalid, MinRelevanceInvalid, HalfLifeInvalid, WeightInvalid) for knobs out of range, UnknownScope
    (400) for ids outside the project, EmbeddingNotConfigured (503) when a query needs a vector
    and no provider is configured. A failing embedder or lexical channel degrades.
    ``request.channels`` switches a channel off (the evaluation harness measures each alone).

    ``facet`` keeps memories of that facet and the cross-cutting ones (FacetInvalid, 400).
    ``actor`` recalls for an agent's turn: the subject's user store, the agent's own store and
    the named stores in one statement, each memory weighted by its tier (``fusion.tier_weight``);
    a bad subject raises SubjectInvalid (400).
    ``generation`` (a replay run id) searches that staged generation's chunks instead of the
    live ones; callers check the principal may (memory_engine.api.search: staff sessions).

    Memory hits whose text, tags or store name read as instructions to an AI are dropped
    here, the one place every model-facing read passes (memory_engine.instruction_guard);
    ``guard_path`` names the caller in the drop log and counter (search, context, tools).

    After the fusion: the authority prior (SEARCH_AUTHORITY_WEIGHT) and the bounded boosts
    (SEARCH_BOOSTS: recency by class; SEARCH_CORROBORATION_*: evidence links), clamped
    multipliers (``boosts``); then
    (``stages``, each measured on its own in docs/benchmarks.md): the rerank
    provider's order for the fused top (RERANK; on failure the fused order stands,
    ``rerank_unavailable``), one chunk per document (``dedupe_documents``, default
    SEARCH_DEDUPE_DOCUMENTS), MMR (``mmr``, default SEARCH_MMR), each hit's relevance
    (memory_engine.relevance), the ``min_relevance`` filter, the cut to ``limit``, and the evidence
    grade (EVIDENCE_STRONG_RELEVANCE). With ``generation``, the knobs of the config that
    staged it (its ``search`` object, memory_engine.ranking_knobs) replace the settings';
    ``dedupe_documents`` and ``mmr`` given here override both.

    ``access_tags`` (a key with grants, docs/security.md): only documents and stores carrying
    one of these tags are searched, filtered inside each ranked query; None: no restriction.

    ``provenance`` / ``lineage`` keep only memories, and chunks of versions, of those values
    (docs/memory.md, *Provenance and lineage*); None: any.

    ``entity_ids`` keeps only memories and chunks that mention one of these entities
    (docs/entities.md), inside each ranked query; alone, it searches every store and document in reach.
    An id the caller cannot see (no memory or chunk in its reach mentions it) is UNKNOWN_SCOPE.
    Every hit carries the ``entity_ids`` its memory or chunk mentions.

    ``kinds`` (entity kinds: person, organization, place, product, date, other; not a memory's
    own ``kind``) keeps only memories and chunks that mention an entity of one of them (a valid
    edge), inside each ranked query; with ``entity_ids``, both hold; alone, it searches every
    store and document in reach, like ``entity_ids``. Another value is VALIDATION_ERROR (400).

    ``min_relevance`` keeps only hits whose relevance reaches it, before the cut (the order is
    the ranking's); None keeps every hit. Each hit's ``relevant`` is judged at ``min_relevance``,
    else at SEARCH_MIN_RELEVANCE. Push injection and the search_knowledge tool pass the agent's.
    """
    began = time.perf_counter()
    request, knobs = _checked(request)
    scope = resolve_scope(request)
    if not scope.sources:
        return SearchResult(results=[])
    withheld = [0]  # the hits the instruction guard kept out (SearchResult.withheld)
    if request.query is None:  # a listing: nothing to judge (relevance None, every hit relevant)
        hits = _with_entities(_guarded(_ordered_read(scope, request.limit), request.guard_path, scope.project_id,
                                       withheld), scope.project_id)
        return SearchResult(results=hits, evidence=_evidence(hits), withheld=withheld[0])

    timings: dict[str, float] = {}
    degraded: list[str] = []
    query = _embedded_query(request.query, request.channels, degraded, timings)
    backend = _lexical_backend(degraded) if "lexical" in request.channels else None
    rows, backend = _candidates_of(scope, query, request.limit, degraded, backend=backend)
    hits = _ranked(request, knobs, scope, rows, query, degraded, timings, withheld)
    # Everything but the query embedding and the rerank call: scope checks, SQL, fusion, stages.
    timings["search_ms"] = ((time.perf_counter() - began) * 1000 - timings.get("embedding_ms", 0.0)
                            - timings.get("rerank_ms", 0.0))
    return SearchResult(results=hits, degraded=degraded, timings=timings, lexical_backend=backend,
                        evidence=_evidence(hits), withheld=withheld[0])


def _checked(request: SearchRequest) -> tuple[SearchRequest, RankingKnobs]:
    """The request with its query cleaned and its ranking knobs as the search runs with them;
    a knob out of range, a bad option or a request with nothing to search is refused."""
    validate_channels(request.channels)
    dedupe = None if request.dedupe_documents is None else boolean_option("dedupe_documents",
                                                                          request.dedupe_documents, False)
    mmr = None if request.mmr is None else boolean_option("mmr", request.mmr, False)
    # A generation searches with its config's knobs, live search with the settings'; the
    # request's own values override both.
    knobs = ranking_knobs(_generation_knobs(request.project, request.generation), dedupe_documents=dedupe, mmr=mmr,
                          rrf_k=request.rrf_k, vector_weight=request.vector_weight,
                          lexical_weight=request.lexical_weight)
    validate_search_knobs(limit=request.limit, rrf_k=knobs.rrf_k, min_similarity=request.min_similarity,
                          recency_half_life_days=request.recency_half_life_days, vector_weight=request.vector_weight,
                          lexical_weight=request.lexical_weight, min_relevance=request.min_relevance)
    request = replace(request, query=clean_query(request.query))
    if request.query is None and not request.names_a_source:
        raise QueryRequired()  # nothing to search and nothing to list
    return request, knobs


@dataclass
class _Query:
    """The query text and its vector (None: the vector channel is off or failed), with the
    embedding model it comes from."""

    text: str
    vector: list[float] | None = None
    embedder: str | None = None


def _embedded_query(text: str, channels: tuple[str, ...], degraded: list[str],
                    timings: dict[str, float]) -> _Query:
    """The query with its vector when the vector channel runs; a failing embedder or a zero
    vector degrades (``degraded`` says why)."""
    query = _Query(text)
    if "vector" not in channels:
        return query
    provider = require_embedding_provider()
    query.embedder = provider.model_name
    started = time.perf_counter()
    try:
        query.vector = provider.embed_query(text)
    except EmbeddingError as exc:
        logger.warning("query embedding failed; searching lexically only: %s", exc)
        degraded.append(Degraded.EMBED_UNAVAILABLE)
    timings["embedding_ms"] = (time.perf_counter() - started) * 1000
    if query.vector is not None and not any(query.vector):
        query.vector = None  # a zero vector has no direction: every cosine would be NaN
        degraded.append(Degraded.DENSE_UNAVAILABLE)
    if query.vector is None and "lexical" in channels:
        degraded.append(Degraded.LEXICAL_ONLY)
    return query


def _candidates_of(scope: Scope, query: _Query, limit: int, degraded: list[str], *,
                   backend: str | None) -> tuple[list[CandidateRow], str | None]:
    """:func:`_candidates`, once more with the query embedded again when the embedding model was
    switched under this search (``query`` then holds the new vector and model)."""
    noted = list(degraded)
    try:
        return _candidates(scope, query.text, query.vector, limit, degraded, backend=backend)
    except DatabaseError as exc:
        if query.vector is None or not any(reason in str(exc) for reason in SWITCH_ERRORS):
            raise
    # The embedding model was switched after this query was embedded, or this search met the
    # switch's locks (docs/embeddings.md): embed again with the model now active, search once more.
    logger.info("the embedding model changed during a search; embedding the query again")
    degraded[:] = noted
    current = refresh_embedding_provider()
    query.vector = current.embed_query(query.text) if current is not None else None
    query.embedder = current.model_name if current is not None else None
    return _candidates(scope, query.text, query.vector, limit, degraded, backend=backend)


def _ranked(request: SearchRequest, knobs: RankingKnobs, scope: Scope, rows: list[CandidateRow], query: _Query,
            degraded: list[str], timings: dict[str, float], withheld: list[int]) -> list[SearchHit]:
    """The candidates fused over all of them, guarded, boosted, through the stages after the fusion,
    judged and cut to ``limit``: a dropped hit leaves room for the next one. Each stage's time goes to
    ``timings`` (the Server-Timing header; bench/search.py --stages)."""
    started = time.perf_counter()
    weights = {"vector": knobs.vector_weight, "lexical": knobs.lexical_weight,
               "graph": engine_settings.SEARCH_GRAPH_WEIGHT}
    hits = fuse(rows, rrf_k=knobs.rrf_k, half_life=request.recency_half_life_days, limit=len(rows),
                min_similarity=request.min_similarity, weights=weights)
    project_id = request.project.pk
    started = _lap(timings, "fusion_ms", started)
    hits = _with_context(scope, hits, {row.id for row in rows if row.turn}, query, request.limit)
    started = _lap(timings, "context_ms", started)
    hits = _guarded(hits, request.guard_path, project_id, withheld)
    started = _lap(timings, "guard_ms", started)
    # The authority prior and the bounded boosts: clamped multipliers on the fused score.
    corroboration = None
    if boosts.corroboration_on(knobs):
        corroboration = boosts.corroboration_counts(hits)
        started = _lap(timings, "corroboration_ms", started)
    hits = boosts.apply_boosts(hits, {row.key: row.event_at for row in rows}, knobs=knobs,
                               half_life_days=engine_settings.SEARCH_BOOST_HALF_LIFE_DAYS, now=timezone.now(),
                               corroboration=corroboration)
    _lap(timings, "boosts_ms", started)
    if knobs.rerank:
        hits = _reranked(query.text, hits, degraded, timings)
    started = time.perf_counter()
    if knobs.dedupe_documents:
        hits = stages.dedupe_documents(hits)
        started = _lap(timings, "dedupe_ms", started)
    if knobs.mmr:
        pool = engine_settings.SEARCH_MMR_POOL
        hits = stages.mmr(hits, _stored_vectors(hits[:pool], project_id), lambda_=engine_settings.SEARCH_MMR_LAMBDA,
                          pool=pool)
        _lap(timings, "mmr_ms", started)
    # Relevance over the whole answer (its features are relative to its best), then the filter
    # and the cut: the ranking is left as it is.
    min_relevance = request.min_relevance
    threshold = engine_settings.SEARCH_MIN_RELEVANCE if min_relevance is None else min_relevance
    stages.judge_relevance(hits, relevance_model(query.embedder) if query.vector is not None else None,
                           threshold=threshold)
    if min_relevance is not None:
        hits = [hit for hit in hits if hit.relevant]
    return _with_entities(hits[:request.limit], project_id)


def _with_context(scope: Scope, hits: list[SearchHit], turn_ids: set[str], query: _Query,
                  limit: int) -> list[SearchHit]:
    """The fused hits with the neighbouring turns of the top ``limit`` hits that are conversation
    turns (``turn_ids``): SEARCH_CONTEXT_TURNS before and after each, in the scope, read by one
    more statement when there is such a hit; fusion.with_context scores them."""
    turns, weight = engine_settings.SEARCH_CONTEXT_TURNS, engine_settings.SEARCH_CONTEXT_WEIGHT
    origins = [hit.id for hit in hits[:limit] if hit.source == MEMORY and hit.id in turn_ids]
    if turns <= 0 or weight <= 0 or not origins:
        return hits
    params = {**scope.params(), "context_of": origins, "context_turns": turns,
              "qvec": vector_literal(query.vector) if query.vector is not None else None}
    with read_connection().cursor() as cursor:
        cursor.execute(context_sql(scope, vector=query.vector is not None), params)
        rows = fetch_records(cursor, ContextRow)
    return with_context(hits, rows, weight=weight, pool=limit,
                        gap=timedelta(minutes=float(engine_settings.SEARCH_CONTEXT_GAP_MINUTES)))


# The statements after the ranking read the hits by id and by the project: redundant on one
# PostgreSQL, on a distributed one that routes them to one node (docs/scaling.md).
def _with_entities(hits: list[SearchHit], project_id: Any) -> list[SearchHit]:
    """Each hit's ``entity_ids``: the entities its memory or chunk mentions (valid edges; one
    statement for the answer). The caller sees each of them, through the hit itself."""
    ids = {source: [h.id for h in hits if h.source == source] for source in (MEMORY, DOCUMENT)}
    if not any(ids.values()):
        return hits
    with read_connection().cursor() as cursor:
        cursor.execute(hit_entities_sql(), {"memory_ids": ids[MEMORY], "chunk_ids": ids[DOCUMENT],
                                            "project": project_id})
        found = {(source, id_): entities for source, id_, entities in cursor.fetchall()}
    for hit in hits:
        hit.entity_ids = found.get((hit.source, hit.id), [])
    return hits


def _lap(timings: dict[str, float], name: str, started: float) -> float:
    """Record the milliseconds since ``started`` under ``name``; the new start."""
    now = time.perf_counter()
    timings[name] = (now - started) * 1000
    return now


def _generation_knobs(project: Project, generation: str | None) -> dict[str, Any]:
    """The ranking knobs of the config that staged ``generation`` (none for live search; an
    unknown id is refused by the scope)."""
    if generation is None:
        return {}
    knobs = ReplayRun.objects.filter(project=project, pk=generation, config__project=project).values_list(
        "config__search", flat=True).first()
    return knobs if isinstance(knobs, dict) else {}


def _evidence(hits: list[SearchHit]) -> str:
    return stages.grade_evidence(hits, strong=engine_settings.EVIDENCE_STRONG_RELEVANCE)


def _reranked(query: str, hits: list[SearchHit], degraded: list[str], timings: dict[str, float]) -> list[SearchHit]:
    """The rerank provider's order of the fused top (RERANK), or the fused order when none is
    configured or it fails (``rerank_unavailable``)."""
    provider = get_rerank_provider()
    if provider is None or not hits:
        return hits
    started = time.perf_counter()
    try:
        return stages.rerank_hits(query, hits, provider, top_n=rerank_top_n())
    except RerankError as exc:
        logger.warning("rerank failed; keeping the fused order: %s", exc)
        degraded.append(Degraded.RERANK_UNAVAILABLE)
        return hits
    finally:
        timings["rerank_ms"] = (time.perf_counter() - started) * 1000


def _stored_vectors(hits: list[SearchHit], project_id: Any) -> dict[tuple[str, str], list[float]]:
    """(source, id) -> stored vector of the hits that have one (MMR's similarities)."""
    ids = {source: [h.id for h in hits if h.source == source] for source in (MEMORY, DOCUMENT)}
    if not any(ids.values()):
        return {}
    with read_connection().cursor() as cursor:
        cursor.execute(stored_vectors_sql(), {"memory_ids": ids[MEMORY], "chunk_ids": ids[DOCUMENT],
                                              "project": project_id})
        return {(source, id_): json.loads(vector) for source, id_, vector in cursor.fetchall()}


def _guarded(hits: list[SearchHit], path: str, project_id: Any, withheld: list[int] | None = None) -> list[SearchHit]:
    """The hits without memories and chunks that read as instructions (they stay stored), judged on
    the findings stored with them at write or ingestion (one statement reads them); a hit without
    a finding of the guard's current version is judged now (memory_engine.instruction_guard). A
    drop is counted under the memory's store tier (user_for_agent counts as user; "" for a chunk)
    and, with ``withheld``, added to its one number."""
    if not hits:
        return hits
    stored = _stored_findings(hits, project_id)
    kept = drop_instructions(hits, path=path, stored=lambda hit: stored.get((hit.source, hit.id), [(None, ())]),
                             fields=lambda hit: (
        (hit.id, _store_tier(hit.tier), (hit.text, hit.title, hit.tags)) if hit.source == MEMORY
        else (hit.id, "", (hit.text,))))
    if withheld is not None:
        withheld[0] += len(hits) - len(kept)
    return kept


def _stored_findings(hits: list[SearchHit],
                     project_id: Any) -> dict[tuple[str, str], list[tuple[Any, tuple[Any, ...]]]]:
    """(source, id) -> the guard findings stored with a hit and what each covers: its content
    row's (the text) and its memory's (title, tags, metadata), or its chunk's."""
    ids = {source: [h.id for h in hits if h.source == source] for source in (MEMORY, DOCUMENT)}
    text = {(h.source, h.id): h.text for h in hits}
    with read_connection().cursor() as cursor:
        cursor.execute(stored_findings_sql(), {"memory_ids": ids[MEMORY], "chunk_ids": ids[DOCUMENT],
                                               "project": project_id})
        rows = cursor.fetchall()
    return {(source, id_): [(_json(guard), (text[(source, id_)],))] + (
        [(_json(own), (title, _json(tags), _json(metadata)))] if source == MEMORY else [])
        for source, id_, guard, own, title, tags, metadata in rows}


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _store_tier(tier: str | None) -> str:
    return Tier.USER.value if tier == USER_FOR_AGENT else (tier or "")


def _lexical_backend(degraded: list[str]) -> str | None:
    """The backend the lexical channel uses now, after the restart guard (memory_engine.lexical)."""
    try:
        return ensure_lexical_fresh().backend
    except DatabaseError as exc:
        logger.warning("lexical index state unreadable; answering from vectors only: %s", exc)
        degraded.append(Degraded.LEXICAL_UNAVAILABLE)
        return None


#: What a search may meet while the embedding model is switched: it retries once.
SWITCH_ERRORS = ("different vector dimensions", "different halfvec dimensions", "deadlock detected")


def _candidates(scope: Scope, query: str, qvec: list[float] | None, limit: int, degraded: list[str], *,
                backend: str | None) -> tuple[list[CandidateRow], str | None]:
    """The candidates of both channels and the lexical backend that answered (None: it did not).

    A lexical statement that fails is retried without the lexical channel when there is a
    query vector (``degraded`` says so); without one, the failure is the caller's.
    """
    vec_k = max(limit, engine_settings.SEARCH_VECTOR_DEPTH)
    params = {
        **scope.params(),
        "qvec": vector_literal(qvec) if qvec is not None else None,
        "qtext": query[:MAX_LEXICAL_QUERY_CHARS],
        "bm25_candidates": max(engine_settings.KNOWLEDGE_BM25_CANDIDATES, limit),
        "bm25_k1": engine_settings.KNOWLEDGE_BM25_K1,
        "bm25_b": engine_settings.KNOWLEDGE_BM25_B,
        "bm25_max_df": engine_settings.KNOWLEDGE_BM25_MAX_DF,
        "vec_k": vec_k,
        "lex_k": max(limit, engine_settings.SEARCH_LEXICAL_DEPTH),
        "graph_k": max(limit, engine_settings.SEARCH_GRAPH_DEPTH),
    }
    config = engine_settings.KNOWLEDGE_TEXT_SEARCH_CONFIG
    cap = engine_settings.SEARCH_EXACT_SCAN_MAX
    with transaction.atomic(using=current_read_alias()), read_connection().cursor() as cursor:
        if engine_settings.SEARCH_GRAPH_WEIGHT > 0 and MEMORY in scope.sources:
            # the graph channel: the memories that mention the query's entities (and neighbours)
            scope.graph_entities, scope.graph_weights = graph_entities(
                cursor, scope, query, hops=engine_settings.SEARCH_GRAPH_HOPS,
                neighbours=engine_settings.SEARCH_GRAPH_NEIGHBOURS)
            params.update(graph_entities=scope.graph_entities, graph_weights=scope.graph_weights)
        exact = {MEMORY: True, DOCUMENT: True}
        if qvec is not None or backend is not None:
            sizes = _scope_sizes(cursor, scope, cap + 1)
            exact = {source: sizes.get(source, 0) <= cap for source in exact}
            if qvec is not None and not all(exact.values()):
                _set_hnsw_scan(cursor, vec_k)

        def run(lexical: str | None) -> list[CandidateRow]:
            sql = build_search_sql(scope, vector=qvec is not None, lexical=lexical, exact=exact, config=config)
            cursor.execute(sql, params)
            return fetch_records(cursor, CandidateRow)

        if backend is None:
            return (run(None) if qvec is not None or scope.graph_entities else []), None
        try:
            with transaction.atomic(using=current_read_alias()):
                return run(backend), backend
        except (DatabaseError, ValueError) as exc:
            if qvec is None:
                raise
            logger.warning("lexical channel failed; answering from vectors only: %s", exc)
            degraded.append(Degraded.LEXICAL_UNAVAILABLE)
            return run(None), None


def _scope_sizes(cursor: Any, scope: Scope, cap: int) -> dict[str, int]:
    """Rows each source's scope holds (source -> count), counted up to ``cap``."""
    sql = scope_sizes_sql(scope)
    if sql is None:
        return {}
    cursor.execute(sql, {**scope.params(), "cap": cap})
    return dict(zip(result_columns(cursor) or [], cursor.fetchone(), strict=True))


def _set_hnsw_scan(cursor: Any, k: int) -> None:
    """pgvector 0.8 iterative scan for this transaction: a filtered HNSW scan fetches more
    candidates until ``k`` rows pass the scope (or HNSW_MAX_SCAN_TUPLES were visited)."""
    cursor.execute(HNSW_SCAN_SQL, {
        "ef_search": min(MAX_EF_SEARCH, max(engine_settings.HNSW_EF_SEARCH, k)),
        "iterative_scan": engine_settings.HNSW_ITERATIVE_SCAN,
        "max_scan_tuples": engine_settings.HNSW_MAX_SCAN_TUPLES,
    })


def _ordered_read(scope: Scope, limit: int) -> list[SearchHit]:
    """No query: memories oldest first, then chunks by document path and chunk_index."""
    with read_connection().cursor() as cursor:
        cursor.execute(ordered_read_sql(scope), {**scope.params(), "k": limit})
        return [row.hit() for row in fetch_records(cursor, DisplayRow)]
