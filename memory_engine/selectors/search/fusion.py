"""Candidates to one ranked list: a ranking per channel, then weighted reciprocal rank fusion.

Each channel ranks memories and chunks together on its own value (cosine distance, lexical
score); ``min_similarity`` drops vector candidates before the ranking (no refill). A hit scores
``weight / (rrf_k + rank)`` summed over the channels that found it; a memory's score is then
multiplied by its tier's weight (:func:`tier_weight`), a chunk's stays as it is.
"""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone

from memory_engine.conf import engine_settings
from memory_engine.models.memories import Tier

from .results import MEMORY, USER_FOR_AGENT, SearchHit
from .rows import CandidateRow

Ranks = dict[tuple[str, str], int]

#: Sorts a hit that one channel did not rank after every hit it ranked.
UNRANKED = 1 << 30


def channel_ranks(rows: list[CandidateRow], min_similarity: float | None) -> tuple[Ranks, Ranks, Ranks]:
    """(vector ranks, lexical ranks, graph ranks) by (source, id), 1 first; memories and chunks
    merged (the graph channel ranks memories only: by its score, then by cosine distance)."""
    vector = sorted((r.dist, r.id, r.key) for r in rows
                    if r.from_vector and r.dist is not None
                    and (min_similarity is None or 1.0 - r.dist >= min_similarity))
    lexical = sorted((-r.lex, r.id, r.key) for r in rows if r.lex is not None)
    graph = sorted((-r.graph, r.dist if r.dist is not None else 2.0, r.id, r.key) for r in rows if r.graph is not None)
    return ({key: i for i, (_, _, key) in enumerate(vector, 1)},
            {key: i for i, (_, _, key) in enumerate(lexical, 1)},
            {key: i for i, (_, _, _, key) in enumerate(graph, 1)})


def tier_weight(row: CandidateRow, *, half_life: float, now: datetime) -> float:
    """A memory's multiplier: ``0.5 ** (age in days / half-life) * TIER_PRECEDENCE[tier]``.

    The half-life is the store's ``recency_half_life_days`` when set (0: no decay), else its
    tier's TIER_HALF_LIFE_DAYS when positive, else the request's ``half_life`` (0: no decay).
    user_for_agent weighs as the user tier. Precedence is one constant per tier, so it biases
    across tiers and keeps the order within one.
    """
    tier = Tier.USER.value if row.tier == USER_FOR_AGENT else (row.tier or Tier.INSTITUTIONAL.value)
    days = row.store_half_life
    if days is None:
        days = engine_settings.TIER_HALF_LIFE_DAYS.get(tier) or half_life
    weight = float(engine_settings.TIER_PRECEDENCE.get(tier, 1.0))
    if days and row.created_at is not None:
        age_days = max(0.0, (now - row.created_at).total_seconds() / 86400.0)
        weight *= 0.5 ** (age_days / days)
    return weight


def fuse(rows: list[CandidateRow], *, rrf_k: float, half_life: float, limit: int,
         min_similarity: float | None, weights: dict[str, float]) -> list[SearchHit]:
    """The ``limit`` best candidates by fused score, ties broken by each channel's rank, then id."""
    now = timezone.now()
    vector_ranks, lexical_ranks, graph_ranks = channel_ranks(rows, min_similarity)
    hits = []
    for row in rows:
        vrank, lrank, grank = vector_ranks.get(row.key), lexical_ranks.get(row.key), graph_ranks.get(row.key)
        if vrank is None and lrank is None and grank is None:
            continue  # a vector candidate below min_similarity
        score = sum(weights.get(channel, 0.0) / (rrf_k + rank)
                    for channel, rank in (("vector", vrank), ("lexical", lrank), ("graph", grank)) if rank is not None)
        if row.source == MEMORY:
            score *= tier_weight(row, half_life=half_life, now=now)
        ranks: dict[str, int | None] = {"vector": vrank, "lexical": lrank}
        if grank is not None:  # the graph channel's rank, where it ranked the hit
            ranks["graph"] = grank
        hits.append(row.hit(score=score, similarity_score=row.similarity, ranks=ranks,
                            lexical_score=row.lex if lrank is not None else None, authority=row.authority))
    hits.sort(key=lambda h: (-h.score, h.ranks["vector"] or UNRANKED, h.ranks["lexical"] or UNRANKED, h.id))
    return hits[:limit]
