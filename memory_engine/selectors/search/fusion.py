"""Candidates to one ranked list: a ranking per channel, then weighted reciprocal rank fusion.

Each channel ranks memories and chunks together on its own value (cosine distance, lexical
score); ``min_similarity`` drops vector candidates before the ranking (no refill). A hit scores
``weight / (rrf_k + rank)`` summed over the channels that found it; a memory's score is then
multiplied by its tier's weight (:func:`tier_weight`), a chunk's stays as it is. Then
(:func:`with_context`) the conversation turns next to the top hits gain a share of their score.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone

from memory_engine.conf import engine_settings
from memory_engine.models.memories import Tier

from .results import MEMORY, USER_FOR_AGENT, SearchHit
from .rows import CandidateRow, ContextRow

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
    hits.sort(key=_order)
    return hits[:limit]


def with_context(hits: list[SearchHit], rows: list[ContextRow], *, weight: float, pool: int,
                 gap: timedelta) -> list[SearchHit]:
    """``hits`` with the neighbouring turns of the top ``pool`` memory hits, ranked again: each turn
    gains ``weight`` times the fused score of every top hit it neighbours (``rows``: the turns and
    whom they neighbour) that was written at most ``gap`` before or after it; a turn no channel
    ranked enters with that gain alone. A turn's ``ranks["context"]`` is the best rank among the
    hits it gained from."""
    top = {hit.id: (rank, hit) for rank, hit in enumerate(hits[:pool], 1) if hit.source == MEMORY}
    gains = {hit.id: hit.score for _, hit in top.values()}  # before any turn gains
    found = {(hit.source, hit.id): hit for hit in hits}
    for row in rows:
        lent = [(rank, gains[origin]) for origin in row.origins if origin in top
                for rank, hit in [top[origin]] if _close(hit.created_at, row.created_at, gap)]
        if not lent or weight <= 0:
            continue
        hit = found.get(row.key)
        if hit is None:
            hit = found[row.key] = row.hit(similarity_score=row.similarity, authority=row.authority)
            hits.append(hit)
        hit.score += weight * sum(score for _, score in lent)
        hit.ranks["context"] = min(rank for rank, _ in lent)
    hits.sort(key=_order)
    return hits


def _close(one: datetime | None, other: datetime | None, gap: timedelta) -> bool:
    return one is not None and other is not None and abs(one - other) <= gap


def _order(hit: SearchHit) -> tuple[float, int, int, str]:
    """By fused score, ties broken by each channel's rank, then id."""
    return (-hit.score, hit.ranks["vector"] or UNRANKED, hit.ranks["lexical"] or UNRANKED, hit.id)
