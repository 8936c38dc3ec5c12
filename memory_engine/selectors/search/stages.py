"""Ranking stages after the fusion, each a small plain function over the fused hits so it can be
measured on its own (bench/eval_retrieval.py ``--variant``, docs/benchmarks.md):

- :func:`rerank_hits`: the rerank provider's order for the top ``RERANK["TOP_N"]`` (on failure
  the fused order stands and the caller says ``rerank_unavailable``);
- :func:`dedupe_documents`: one best chunk per document;
- :func:`mmr`: maximal marginal relevance over the stored vectors;
- :func:`judge_relevance`: each hit's relevance (memory_engine.relevance) and whether it passes
  the threshold;
- :func:`grade_evidence`: none | weak | strong, what the answer rests on, from the same relevance.

The authority prior and the bounded boosts (memory_engine.selectors.search.boosts) multiply
the fused score before these stages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from memory_engine.providers.rerank import RerankProvider
from memory_engine.relevance import RelevanceModel

from .results import DOCUMENT, SearchHit

Vector = Sequence[float]

#: Evidence grades (SearchResult.evidence).
NONE, WEAK, STRONG = "none", "weak", "strong"
EVIDENCE_GRADES = (NONE, WEAK, STRONG)


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


def judge_relevance(hits: list[SearchHit], model: RelevanceModel | None, *, threshold: float) -> None:
    """Set each hit's ``relevance`` (the model over the whole answer) and ``relevant`` (at or above
    ``threshold``). Without a model (an embedder none is calibrated for) or a cosine anywhere (no
    query vector) there is nothing to judge: relevance stays None and every hit counts as relevant."""
    scores = model.scores(hits) if model is not None else None
    for i, hit in enumerate(hits):
        hit.relevance = None if scores is None else round(scores[i], 4)
        hit.relevant = hit.relevance is None or hit.relevance >= threshold


def grade_evidence(hits: list[SearchHit], *, strong: float) -> str:
    """``none`` when no hit is relevant; ``strong`` when the first relevant hit's relevance is at
    least ``strong``; ``weak`` otherwise (a read without a query, or without a query vector, is
    weak: nothing was judged). One notion of relevance: the grade agrees with what is injected."""
    first = next((hit for hit in hits if hit.relevant), None)
    if first is None:
        return NONE
    return STRONG if first.relevance is not None and first.relevance >= strong else WEAK


def rerank_hits(query: str, hits: list[SearchHit], provider: RerankProvider, *, top_n: int) -> list[SearchHit]:
    """The first ``top_n`` hits in the provider's order (ties: the fused order), the rest after them.

    Raises RerankError when the provider fails; the caller keeps the fused order then.
    """
    head, tail = hits[:top_n], hits[top_n:]
    scores = provider.score(query, [hit.text for hit in head])
    for hit, score in zip(head, scores, strict=False):
        hit.rerank_score = float(score)
    order = sorted(range(len(head)), key=lambda i: (-scores[i], i))
    return [head[i] for i in order] + tail
