"""The one search function: a query becomes one ranked, cited result list.

``knowledge_search(SearchRequest(project=…, query=…, …))`` serves ``POST /api/v1/knowledge/search``,
agent push-injection, the ``search_knowledge`` tool and the admin playground alike (DESIGN.md, *Read side*):

1. Sources from filters (``scope``): documents when document_ids / document_paths / tags are
   given, or when nothing scopes the search to memories (a bare query searches the project's
   documents, never its memories); memories when memory_store_ids or tags are given.
2. Per source a vector top-k (cosine over pgvector) and a lexical top-k, invalidated
   memories excluded, scope filters inside each ranked query, every row carrying its
   cosine. All four lists come from one SQL statement (CTEs, built by ``sql``). k is
   max(limit, SEARCH_VECTOR_DEPTH / SEARCH_LEXICAL_DEPTH).
3. ``min_similarity`` drops vector candidates before fusion (no refill).
4. One ranking per channel: memories and chunks merged on the channel's own value (``fusion``).
5. Weighted reciprocal rank fusion, k = SEARCH_RRF_K (SEARCH_VECTOR_WEIGHT /
   SEARCH_LEXICAL_WEIGHT, or the request's); a memory's score times its tier's weight (recency
   half-life of its store or tier, else the request's; TIER_PRECEDENCE), cut to ``limit``.

Memories are live ones only (``LIVE_MEMORY_SQL``: valid, not expired); with a ``facet``, that
facet's and the cross-cutting ones. With an ``Actor`` (an agent's turn, optionally for one
end user) the memory scope fans out over the tiers: the subject's user store, the agent's own
store and the stores named (knowledge_config), in the same one statement.

Without a query the read is deterministic: memories oldest first, then chunks in
(document path, chunk_index) order.

Lexical channel (memory_engine.lexical): BM25 from a pg_textsearch ``bm25`` index
(``text <@> to_bm25query(q, index)``) where the database has one; otherwise the tsvector
fallback (any non-stop term matches, the top KNOWLEDGE_BM25_CANDIDATES by ts_rank_cd
re-scored with Okapi BM25). The answer names the backend (``lexical_backend``).

Vector channel: a scope of at most ``SEARCH_EXACT_SCAN_MAX`` rows is ranked by an exact
scan; a larger one by HNSW with pgvector 0.8's iterative index scan, which keeps
scanning until k rows pass the scope filters, so a selective scope is never short. In a
scope that small, memories are read from their memory rows (content rows by key) and bm25
scores them row by row: a plan that holds when the statistics have not seen a new store.

After the fusion, ``boosts``: the authority prior (SEARCH_AUTHORITY_WEIGHT) and the bounded
boosts (SEARCH_BOOSTS), clamped multipliers; then ``stages`` (each a plain function, measured
one by one): rerank (RERANK),
one chunk per document (SEARCH_DEDUPE_DOCUMENTS), MMR (SEARCH_MMR), the cut, and the
evidence grade (none | weak | strong, EVIDENCE_LEXICAL_FLOOR).

Modules: ``request`` (``SearchRequest``, what a caller asks), ``service`` (``knowledge_search``: what
runs, what degrades), ``validation`` and ``scope`` (the request checked and resolved), ``sql`` (the
statements), ``rows`` (their rows as named records), ``fusion`` (the ranking), ``boosts`` and
``stages`` (after it), ``results`` (what the caller gets).
"""

from .request import Actor, SearchRequest
from .results import DOCUMENT, MAX_LIMIT, MEMORY, USER_FOR_AGENT, Degraded, SearchHit, SearchResult
from .scope import Scope, resolve_scope
from .service import knowledge_search
from .sql import build_search_sql
from .stages import EVIDENCE_GRADES
from .validation import validate_search_knobs

__all__ = [
    "DOCUMENT",
    "EVIDENCE_GRADES",
    "MAX_LIMIT",
    "MEMORY",
    "USER_FOR_AGENT",
    "Actor",
    "Degraded",
    "Scope",
    "SearchHit",
    "SearchRequest",
    "SearchResult",
    "build_search_sql",
    "knowledge_search",
    "resolve_scope",
    "validate_search_knobs",
]
