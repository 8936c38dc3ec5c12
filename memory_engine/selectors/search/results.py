"""What a search answers: ranked hits, the reasons a channel was left out, and the sources' names."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, cast

from memory_engine.conf import SEARCH_KNOBS, engine_settings
from memory_engine.text import text_preview

#: The largest ``limit`` a search accepts (its declared range: memory_engine.conf.SEARCH_KNOBS).
MAX_LIMIT = int(cast(float, SEARCH_KNOBS["limit"].high))

#: The two sources a hit comes from (``SearchHit.source``).
DOCUMENT = "document"
MEMORY = "memory"

#: A memory hit's tier when it is a user-tier memory written by or for the recalling agent
#: (otherwise its store's tier: user, agent or institutional). It weighs as the user tier.
USER_FOR_AGENT = "user_for_agent"


class Degraded:
    """Reasons an answer is less than the deployment offers: one vocabulary for every search
    answer (REST, context, tools) and the write answer (docs/retrieval.md, *Degrading*)."""

    #: The embedder failed (timeout, 5xx, wrong dimensions): the query (or the written text)
    #: has no vector.
    EMBED_UNAVAILABLE = "embed_unavailable"
    #: The vector channel could not rank: the query has a vector without a direction (all zeros).
    DENSE_UNAVAILABLE = "dense_unavailable"
    #: The answer was ranked by the lexical channel alone (follows either reason above).
    LEXICAL_ONLY = "lexical_only"
    #: The lexical channel failed (its index state or statement): the answer is vectors only.
    LEXICAL_UNAVAILABLE = "lexical_unavailable"
    #: The rerank provider failed or timed out: the fused order stands.
    RERANK_UNAVAILABLE = "rerank_unavailable"

    ALL = (EMBED_UNAVAILABLE, DENSE_UNAVAILABLE, LEXICAL_ONLY, LEXICAL_UNAVAILABLE, RERANK_UNAVAILABLE)


@dataclass
class SearchHit:
    """One ranked result; ``score`` is fused (comparable only inside one answer)."""

    source: str
    id: str
    text: str
    score: float
    similarity_score: float | None
    ranks: dict[str, int | None]
    #: The lexical channel's score (BM25, higher is better); None when that channel did not find it.
    lexical_score: float | None = None
    tags: dict[str, Any] = field(default_factory=dict)
    document_id: str | None = None
    document_path: str | None = None
    document_title: str | None = None
    page: int | None = None
    chunk_index: int | None = None
    memory_store_id: str | None = None
    memory_store_name: str | None = None
    created_at: datetime | None = None
    #: A memory's tier (user, user_for_agent, agent, institutional); None for a chunk.
    tier: str | None = None
    #: A memory's title ("" when it has none); None for a chunk.
    title: str | None = None
    #: Where it comes from (docs/memory.md, *Provenance and lineage*): a memory's own, a chunk's
    #: version's (``source_class``); None for a chunk older than versions.
    provenance: str | None = None
    lineage: str | None = None
    #: The text, or its head when longer than INLINE_THRESHOLD_BYTES (then ``has_full_body``:
    #: the whole is at GET /memories/{id}/open or the open_memory tool). Filled on creation.
    content_preview: str = ""
    has_full_body: bool = False
    #: The source's authority prior in [0, 1]: a chunk's from its version's capture fields, a
    #: memory's confidence (selectors.search.boosts); ranked as ``relevance × (1 + w × authority)``.
    authority: float = 0.0
    #: How surely the hit bears on the query, in [0, 1] (memory_engine.relevance); None for a read
    #: without a query, or without a query vector (the model needs the cosine).
    relevance: float | None = None
    #: ``relevance`` at or above the threshold the search judged with (its ``min_relevance``, else
    #: SEARCH_MIN_RELEVANCE); true where there is no relevance to judge. Injection hands only these on.
    relevant: bool = True
    #: The rerank provider's score (RERANK), None when no provider reranked the hit; a feature of
    #: the relevance model, not part of the answer.
    rerank_score: float | None = None
    #: The entities the memory or chunk mentions (docs/entities.md); filled once the answer is cut.
    entity_ids: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.content_preview, self.has_full_body = text_preview(self.text, engine_settings.INLINE_THRESHOLD_BYTES)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        del out["rerank_score"]
        return out


@dataclass
class SearchResult:
    """What ``knowledge_search`` answers: ranked hits and why anything was left out."""

    results: list[SearchHit]
    degraded: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    #: bm25 (pg_textsearch) or tsvector (the fallback); None when the lexical channel did not run.
    lexical_backend: str | None = None
    #: none (no relevant hit) | weak | strong (the first relevant hit is a close match): what an
    #: agent may rest an answer on (selectors.search.stages.grade_evidence).
    evidence: str = "none"
    #: the candidates (memories and document chunks) the instruction guard kept out: they read as
    #: instructions to an AI (they stay stored; docs/security.md)
    withheld: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"results": [hit.as_dict() for hit in self.results], "degraded": list(self.degraded),
                "lexical_backend": self.lexical_backend, "evidence": self.evidence, "withheld": self.withheld}
