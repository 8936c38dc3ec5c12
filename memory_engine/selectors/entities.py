"""Reads of the entity graph (docs/entities.md): the entities a principal may see, one entity's
edges, and the memories and chunks that mention it.

A principal sees an entity through the memories and chunks it may see that mention it
(memory_engine.policy: ``visible`` on Entity and EntityEdge); an entity mentioned only outside
its grants answers exactly like one that does not exist (ENTITY_NOT_FOUND).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Q, QuerySet

from memory_engine.exceptions import EntityNotFound
from memory_engine.mentions import entity_key
from memory_engine.models import Chunk, Entity, EntityEdge, Memory, Project
from memory_engine.policy import SEARCH, Principal, get_visible_or_404, tag_filter, visible

__all__ = ["DETAIL_MAX", "EntityDetail", "entities_visible", "entity_detail", "entity_get", "entity_ids_visible",
           "entity_neighbours", "entity_search"]

#: Most edges, memories and chunks one entity's detail lists (newest first).
DETAIL_MAX = 100


def entities_visible(*, caller: Principal, project: Project, action: str | None = SEARCH) -> QuerySet[Entity]:
    """The project's entities ``caller`` may see."""
    return visible(caller, Entity.objects.filter(project=project), action)


def entity_search(queryset: QuerySet[Entity], *, q: str | None = None, kind: str | None = None) -> QuerySet[Entity]:
    """Entities whose name contains ``q`` (case-insensitive) or one of whose names (key, aliases)
    is ``q``'s key; of ``kind`` when given."""
    if kind:
        queryset = queryset.filter(kind=kind)
    if q:
        key = entity_key(q)
        queryset = queryset.filter(Q(name__icontains=q) | Q(key=key) | Q(aliases__contains=[key]))
    return queryset


def entity_get(*, caller: Principal, project: Project, entity_id: Any, action: str | None = SEARCH) -> Entity:
    """One entity ``caller`` may see; ENTITY_NOT_FOUND (``details.id``) otherwise."""
    return get_visible_or_404(caller, Entity.objects.filter(project=project), entity_id, action=action,
                              error=EntityNotFound)


def entity_ids_visible(*, project_id: str, ids: list[str], access_tags: list[str] | None) -> set[str]:
    """Those of ``ids`` that name an entity of the project seen through ``access_tags`` (None:
    every entity of the project): the search's ``entity_ids`` check."""
    rows = Entity.objects.filter(project_id=project_id, pk__in=ids)
    if access_tags is not None:
        rows = rows.filter(tag_filter(Entity, access_tags))
    return set(rows.values_list("pk", flat=True))


@dataclass
class EntityDetail:
    """One entity as a principal sees it: its edges both ways (valid and retired), and the live
    memories and chunks that mention it, each list newest first and at most DETAIL_MAX long."""

    entity: Entity
    edges: list[EntityEdge]
    memories: list[Memory]
    chunks: list[Chunk]


def entity_detail(*, caller: Principal, entity: Entity) -> EntityDetail:
    """What ``caller`` may see of ``entity`` (already found through entity_get)."""
    edges = visible(caller, EntityEdge.objects.filter(Q(entity=entity) | Q(other=entity)))
    edges = edges.select_related("entity", "other").order_by("-valid_at", "-id")[:DETAIL_MAX]
    memories = visible(caller, Memory.objects.live().filter(entity_edges__entity=entity)).distinct() \
        .select_related("content", "store").defer("content__embedding").order_by("-created_at", "-id")[:DETAIL_MAX]
    chunks = visible(caller, Chunk.objects.filter(entity_edges__entity=entity, generation__isnull=True)).distinct() \
        .select_related("document").defer("embedding").order_by("document__path", "chunk_index")[:DETAIL_MAX]
    return EntityDetail(entity=entity, edges=list(edges), memories=list(memories), chunks=list(chunks))


def entity_neighbours(*, caller: Principal, entity: Entity, limit: int = 12) -> list[tuple[Entity, int]]:
    """The entities named in the most live memories ``caller`` may see that also name ``entity``,
    with how many such memories each shares, most first."""
    memories = visible(caller, Memory.objects.live().filter(entity_edges__entity=entity)).values("pk")
    shared = (EntityEdge.objects.filter(memory__in=memories).exclude(entity=entity).values("entity_id")
              .annotate(shared=Count("memory_id", distinct=True)).order_by("-shared", "entity_id")[:limit])
    counts = {row["entity_id"]: row["shared"] for row in shared}
    found = Entity.objects.in_bulk(list(counts))
    return [(found[entity_id], count) for entity_id, count in counts.items() if entity_id in found]
