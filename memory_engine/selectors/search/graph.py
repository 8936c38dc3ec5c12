"""The graph channel's entities (docs/entities.md, *The graph channel*): those a query names,
then, hop by hop, the entities named most often with them in the scope's live memories.

The query is read by the rule extractor (memory_engine.mentions); its names resolve by key or
alias within the project, as names of memories do. A hop's neighbours are counted in the
memories the search may read (the scope's stores, its grants), never outside them; dates are
not followed (a date joins unrelated facts). The query's entities weigh 1, each hop half the
one before, each times its rarity in the scope, ``ln(1 + live memories / memories naming it)``:
a name in half of a conversation's turns (its speaker) says little about which turn answers,
a place named in two says much.
"""

from __future__ import annotations

import math
from typing import Any

from django.db.models import Q

from memory_engine.mentions import DATE, entity_key, extract_mentions
from memory_engine.models import Entity

from .scope import Scope
from .sql import EDGE, MEM, STORE, memory_where

__all__ = ["graph_entities"]


def graph_entities(cursor: Any, scope: Scope, query: str, *, hops: int, neighbours: int) -> tuple[list[str],
                                                                                                  list[float]]:
    """(entity ids, weights) of the graph channel for ``query``; empty when it names no entity
    the project knows."""
    keys = sorted({entity_key(m.name, m.kind) for m in extract_mentions(query)} - {""})
    if not keys:
        return [], []
    found = list(Entity.objects.filter(Q(key__in=keys) | Q(aliases__overlap=keys), project_id=scope.project_id)
                 .order_by("id").values_list("id", flat=True))
    ids, weights = list(found), [1.0] * len(found)
    frontier, weight = found, 1.0
    for _ in range(max(0, min(hops, 2))):
        if not frontier:
            break
        weight /= 2
        frontier = _neighbours(cursor, scope, frontier, ids, neighbours)
        ids += frontier
        weights += [weight] * len(frontier)
    rarity = _rarity(cursor, scope, ids)
    return ids, [weight * rarity.get(entity_id, 0.0) for entity_id, weight in zip(ids, weights, strict=True)]


def _rarity(cursor: Any, scope: Scope, ids: list[str]) -> dict[str, float]:
    """entity id -> ln(1 + live memories of the scope / those of them that name it)."""
    if not ids:
        return {}
    cursor.execute(f"""
        SELECT ee.entity_id, count(DISTINCT m.id), (SELECT count(*) FROM {MEM} m JOIN {STORE} s ON s.id = m.store_id
                                                    WHERE {memory_where(scope)})
        FROM {EDGE} ee JOIN {MEM} m ON m.id = ee.memory_id JOIN {STORE} s ON s.id = m.store_id
        WHERE ee.entity_id = ANY(%(ids)s::varchar[]) AND {memory_where(scope)} GROUP BY ee.entity_id""",
                   {**scope.params(), "ids": ids})
    return {entity_id: math.log(1 + total / named) for entity_id, named, total in cursor.fetchall() if named}


def _neighbours(cursor: Any, scope: Scope, frontier: list[str], seen: list[str], limit: int) -> list[str]:
    """The ``limit`` entities (dates aside) named in the most live memories of the scope that name
    one of ``frontier``, other than those ``seen``."""
    cursor.execute(f"""
        SELECT e2.entity_id FROM {EDGE} e1
        JOIN {EDGE} e2 ON e2.memory_id = e1.memory_id AND NOT (e2.entity_id = ANY(%(seen)s::varchar[]))
        JOIN {Entity._meta.db_table} en ON en.id = e2.entity_id AND en.kind <> '{DATE}'
        JOIN {MEM} m ON m.id = e1.memory_id
        JOIN {STORE} s ON s.id = m.store_id
        WHERE e1.entity_id = ANY(%(frontier)s::varchar[]) AND e1.memory_id IS NOT NULL AND {memory_where(scope)}
        GROUP BY e2.entity_id ORDER BY count(DISTINCT e2.memory_id) DESC, e2.entity_id LIMIT %(limit)s""",
                   {**scope.params(), "frontier": frontier, "seen": seen, "limit": limit})
    return [row[0] for row in cursor.fetchall()]
