"""Reads of the entity graph (docs/entities.md): the entities a principal may see, one entity's
edges, and the memories and chunks that mention it.

A principal sees an entity through the memories and chunks it may see that mention it
(memory_engine.policy: ``visible`` on Entity and EntityEdge); an entity mentioned only outside
its grants answers exactly like one that does not exist (ENTITY_NOT_FOUND). A principal with
grants sees it as those memories and chunks state it (:func:`entities_as_seen`): not by a name,
an alias or a date that only another team's text gave it.
"""

from __future__ import annotations

import copy
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, Exists, F, Max, Min, OuterRef, Q, QuerySet, Window
from django.db.models.functions import RowNumber

from memory_engine.exceptions import EntityNotFound
from memory_engine.mentions import entity_key
from memory_engine.mentions.model import fold
from memory_engine.models import Chunk, Entity, EntityEdge, Memory, Project, Relation
from memory_engine.policy import SEARCH, Principal, get_visible_or_404, reach, tag_filter, visible

__all__ = ["DETAIL_MAX", "SEEN_TEXTS", "EntityDetail", "entities_as_seen", "entities_visible", "entity_detail",
           "entity_get", "entity_ids_visible", "entity_neighbours", "entity_search"]

#: Most edges, memories and chunks one entity's detail lists (newest first).
DETAIL_MAX = 100
#: Most texts (memories and chunks in reach that mention it, newest first) read for the names a
#: principal with grants sees an entity by.
SEEN_TEXTS = 200


def entities_visible(*, caller: Principal, project: Project, action: str | None = SEARCH) -> QuerySet[Entity]:
    """The project's entities ``caller`` may see."""
    return visible(caller, Entity.objects.filter(project=project), action)


def entity_search(queryset: QuerySet[Entity], *, q: str | None = None, kind: str | None = None,
                  tags: list[str] | None = None) -> QuerySet[Entity]:
    """Entities whose name contains ``q`` (case-insensitive) or one of whose names (key, aliases)
    is ``q``'s key; of ``kind`` when given. Seen through ``tags`` (a principal's reach; None: not
    narrowed), ``q`` must also be written in a memory or chunk they reach that mentions the entity:
    a name or alias only another team's text spells finds nothing."""
    if kind:
        queryset = queryset.filter(kind=kind)
    if q:
        key = entity_key(q)
        queryset = queryset.filter(Q(name__icontains=q) | Q(key=key) | Q(aliases__contains=[key]))
        if tags is not None:
            edges = EntityEdge.objects.filter(tag_filter(EntityEdge, tags), entity_id=OuterRef("pk"))
            queryset = queryset.filter(Exists(edges.filter(Q(memory__content__text__icontains=q)
                                                           | Q(chunk__text__icontains=q))))
    return queryset


def _spelled(spelling: str, folded: str) -> bool:
    """Whether ``folded`` (a folded text) writes ``spelling`` (a folded name) as whole words."""
    return bool(spelling) and re.search(rf"(?<!\w){re.escape(spelling)}(?!\w)", folded) is not None


def _as_written(key: str, texts: list[str]) -> str:
    """How the first of ``texts`` that writes ``key`` writes it (its case; the key itself when
    only the folded text holds it, an accent dropped)."""
    pattern = re.compile(r"(?<!\w)" + r"\s+".join(re.escape(word) for word in key.split()) + r"(?!\w)",
                         re.IGNORECASE)
    for text in texts:
        if found := pattern.search(text):
            return found.group(0)
    return key


def _seen_as(entity: Entity, texts: list[str], times: tuple[datetime, datetime] | None) -> Entity:
    """A copy of ``entity`` as ``texts`` (the texts in reach that mention it) state it."""
    seen = copy.copy(entity)
    if times is not None:
        seen.created_at, seen.updated_at = times
    folded = [fold(text) for text in texts]
    spelled = [name for name in dict.fromkeys([entity.key, *entity.aliases])
               if any(_spelled(name, text) for text in folded)]
    if not spelled:  # a date (named canonically) or a name an extractor rewrote: its key stands
        seen.aliases = []
        return seen
    seen.key = entity.key if entity.key in spelled else spelled[0]
    if not any(_spelled(fold(entity.name), text) for text in folded):
        seen.name = _as_written(seen.key, texts)
    seen.aliases = [name for name in spelled if name != seen.key]
    return seen


def entities_as_seen(*, caller: Principal, entities: Iterable[Entity]) -> list[Entity]:
    """``entities`` as ``caller`` sees them (for display only: never save what this returns).

    A caller without grants sees each as it is. For one with grants, each is a copy whose
    ``created_at`` and ``updated_at`` are those of the first and last edge it sees, whose
    ``aliases`` are those written (case- and accent-insensitively, whole words) in the texts it
    sees that mention the entity (the newest SEEN_TEXTS), and whose ``name`` is written there too
    (else the entity is named and keyed by the first of its key and aliases that is): a name,
    an alias or a first mention that only another team's text gave it is not shown."""
    entities = list(entities)
    tags = reach(caller, SEARCH)
    if tags is None or not entities:
        return entities
    edges = EntityEdge.objects.filter(tag_filter(EntityEdge, tags), entity_id__in={e.pk for e in entities})
    times = {row["entity_id"]: (row["first"], row["last"])
             for row in edges.values("entity_id").annotate(first=Min("created_at"), last=Max("created_at"))}
    newest = (edges.exclude(relation=Relation.INVOLVES)  # the subject's `about` edge names the same text
              .annotate(rank=Window(RowNumber(), partition_by=[F("entity_id")],
                                    order_by=[F("created_at").desc(), F("id").desc()]))
              .filter(rank__lte=SEEN_TEXTS))
    texts: dict[str, dict[str, None]] = defaultdict(dict)
    for entity_id, memory_text, chunk_text in newest.values_list("entity_id", "memory__content__text", "chunk__text"):
        texts[entity_id][memory_text or chunk_text or ""] = None
    return [_seen_as(entity, list(texts[entity.pk]), times.get(entity.pk)) for entity in entities]


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
    """What ``caller`` may see of ``entity`` (already found through entity_get), every entity in
    it (the entity, its edges' ends) as ``caller`` sees it (:func:`entities_as_seen`)."""
    edges = list(visible(caller, EntityEdge.objects.filter(Q(entity=entity) | Q(other=entity)))
                 .select_related("entity", "other").order_by("-valid_at", "-id")[:DETAIL_MAX])
    ends = {entity.pk: entity, **{e.pk: e for edge in edges for e in (edge.entity, edge.other) if e is not None}}
    seen = {e.pk: e for e in entities_as_seen(caller=caller, entities=ends.values())}
    entity = seen[entity.pk]
    for edge in edges:
        edge.entity = seen[edge.entity_id]
        if edge.other_id is not None:
            edge.other = seen[edge.other_id]
    memories = visible(caller, Memory.objects.live().filter(entity_edges__entity=entity)).distinct() \
        .select_related("content", "store").defer("content__embedding").order_by("-created_at", "-id")[:DETAIL_MAX]
    chunks = visible(caller, Chunk.objects.filter(entity_edges__entity=entity, generation__isnull=True)).distinct() \
        .select_related("document").defer("embedding").order_by("document__path", "chunk_index")[:DETAIL_MAX]
    return EntityDetail(entity=entity, edges=edges, memories=list(memories), chunks=list(chunks))


def entity_neighbours(*, caller: Principal, entity: Entity, limit: int = 12) -> list[tuple[Entity, int]]:
    """The entities named in the most live memories ``caller`` may see that also name ``entity``,
    with how many such memories each shares, most first."""
    memories = visible(caller, Memory.objects.live().filter(entity_edges__entity=entity)).values("pk")
    shared = (EntityEdge.objects.filter(memory__in=memories).exclude(entity=entity).values("entity_id")
              .annotate(shared=Count("memory_id", distinct=True)).order_by("-shared", "entity_id")[:limit])
    counts = {row["entity_id"]: row["shared"] for row in shared}
    found = Entity.objects.in_bulk(list(counts))
    return [(found[entity_id], count) for entity_id, count in counts.items() if entity_id in found]
