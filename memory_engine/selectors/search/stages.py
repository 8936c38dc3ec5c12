"""Ranking stages after the fusion, each a small plain function over the fused hits so it can be
measured on its own (bench/eval_retrieval.py ``--variant``, docs/benchmarks.md):

- :func:`rerank_hits`: the rerank provider's order for the top ``RERANK["TOP_N"]`` (on failure
  the fused order stands and the caller says ``rerank_unavailable``);
- :func:`dedupe_documents`: one best chunk per document;
- :func:`mmr`: maximal marginal relevance over the stored vectors;
- :func:`grade_evidence`: none | weak | strong, what the answer rests on.

The authority prior and the bounded boosts (memory_engine.selectors.search.boosts) multiply
the fused score before these stages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from memory_engine.providers.rerank import RerankProvider

from .results import DOCUMENT, SearchHit

Vector = Sequence[float]

#: Evidence grades (SearchResult.evidence).
NONE, WEAK, STRONG = "none", "weak", "strong"
EVIDENCE_GRADES = (NONE, WEAK, STRONG)
#: How many of the first hits the evidence grade looks at.
EVIDENCE_DEPTH = 3


def dedupe_documents(hits: list[SearchHit]) -> list[SearchHit]:
    """The hits with only the best (first) chunk of each document; memories are all kept."""
    seen: set[str | None] = set()
    kept = []
    for hit in hits:
        if hit.source == DOCUMENT:
            if hit.document_id in seen:
                continue
            seen.add(hit.document_id)
        kept.append(hit)
    return kept


def mmr(hits: list[SearchHit], vectors: Mapping[tuple[str, str], Vector], *, lambda_: float,
        pool: int) -> list[SearchHit]:
    """The first ``pool`` hits reordered by maximal marginal relevance, the rest after them.

    Relevance is the fused score over the pool's best (so 1.0 for the first hit); the penalty
    is the highest cosine to a hit already picked: ``λ·relevance − (1 − λ)·max cosine``. A hit
    of the pool without a stored vector cannot be compared: it follows the picked ones in its
    fused order, never dropped.
    """
    head, tail = hits[:pool], hits[pool:]
    with_vector = [h for h in head if (h.source, h.id) in vectors]
    without = [h for h in head if (h.source, h.id) not in vectors]
    if not with_vector:
        return hits
    matrix = np.asarray([vectors[(h.source, h.id)] for h in with_vector], dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    matrix = matrix / np.where(norms == 0, 1.0, norms)
    cosines = matrix @ matrix.T
    scores = np.asarray([h.score for h in with_vector], dtype=np.float64)
    relevance = scores / (scores.max() or 1.0)
    penalty = np.zeros(len(with_vector))  # highest cosine to a picked hit (none picked yet: 0)
    left = np.ones(len(with_vector), dtype=bool)
    order: list[int] = []
    for _ in range(len(with_vector)):
        gain = np.where(left, lambda_ * relevance - (1.0 - lambda_) * penalty, -np.inf)
        chosen = int(np.argmax(gain))  # argmax keeps the first of equals: the fused order breaks ties
        order.append(chosen)
        left[chosen] = False
        penalty = np.maximum(penalty, cosines[chosen])
    return [with_vector[i] for i in order] + without + tail


def grade_evidence(hits: list[SearchHit], *, lexical_floor: float) -> str:
    """``none`` without hits; ``strong`` when one of the first EVIDENCE_DEPTH hits was found by
    the lexical channel with a score of at least ``lexical_floor`` (the vector channel alone never
    makes evidence strong: a nearest neighbour exists for any question); ``weak`` otherwise."""
    if not hits:
        return NONE
    for hit in hits[:EVIDENCE_DEPTH]:
        if hit.lexical_score is not None and hit.lexical_score >= lexical_floor:
            return STRONG
    return WEAK


def rerank_hits(query: str, hits: list[SearchHit], provider: RerankProvider, *, top_n: int) -> list[SearchHit]:
    """The first ``top_n`` hits in the provider's order (ties: the fused order), the rest after them.

    Raises RerankError when the provider fails; the caller keeps the fused order then.
    """
    head, tail = hits[:top_n], hits[top_n:]
    scores = provider.score(query, [hit.text for hit in head])
    order = sorted(range(len(head)), key=lambda i: (-scores[i], i))
    return [head[i] for i in order] + tail
