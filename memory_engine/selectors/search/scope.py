"""Which sources one search reads: the filters of a request resolved against the caller's project.

Documents are searched when document_ids / document_paths / tags are given, or when nothing
scopes the search to memories (a bare query searches the project's documents, never its
memories); memories when memory_store_ids or tags are given. Ids outside the project are
refused (UNKNOWN_SCOPE) without saying whether they exist elsewhere.

A recall for an agent turn names its :class:`Actor`: the memories searched are then the
subject's user-tier store, the agent's own store and the stores the request names (the
agent's knowledge_config), in one statement (docs/memory.md, *Tiers and subjects*). Another
subject's user store is never part of an actor's recall, whatever the request names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import Q, QuerySet
from psycopg.types.json import Jsonb

from memory_engine.exceptions import (
    StagedGenerationNotFound,
    StagedGenerationState,
    UnknownScope,
    ValidationFailed,
)
from memory_engine.facets import validate_facet
from memory_engine.models import (
    Document,
    EntityKind,
    Lineage,
    MemoryStore,
    Project,
    Provenance,
    ReplayRun,
)
from memory_engine.models.memories import Tier
from memory_engine.subjects import validate_subject

from ..entities import entity_ids_visible
from .request import Actor, SearchRequest
from .results import DOCUMENT, MEMORY
from .validation import string_list


@dataclass
class Scope:
    """The resolved sources of one search."""

    project_id: str
    store_ids: list[str] | None  # None: memories are not searched
    search_documents: bool
    document_ids: list[str] | None
    path_patterns: list[str] | None
    tags: dict[str, Any] | None
    #: That facet's memories and the cross-cutting ones; None: every facet.
    facet: str | None = None
    #: The actor's agent: its user-tier memories rank as user_for_agent.
    actor_agent_id: str | None = None
    #: Deprecated documents are searched too (docs/retention.md).
    include_deprecated: bool = False
    #: A staged generation (replay run id): its chunks are searched instead of the live ones.
    generation_id: str | None = None
    #: Grant tags the caller reaches (docs/security.md); None: no restriction.
    access_tags: list[str] | None = None
    #: Only memories (and chunks of versions) of these provenances / lineages; None: any.
    provenance: list[str] | None = None
    lineage: list[str] | None = None
    #: Only memories and chunks that mention one of these entities (docs/entities.md); None: any.
    entity_ids: list[str] | None = None
    #: Only memories and chunks that mention an entity of one of these entity kinds (a valid
    #: edge); None: any.
    kinds: list[str] | None = None
    #: The graph channel's entities and their weights (the query's 1.0, each hop half the one
    #: before); empty: the channel does not run.
    graph_entities: list[str] = field(default_factory=list)
    graph_weights: list[float] = field(default_factory=list)

    @property
    def sources(self) -> list[str]:
        """The sources searched, memories first."""
        return ([MEMORY] if self.store_ids is not None else []) + ([DOCUMENT] if self.search_documents else [])

    def params(self) -> dict[str, Any]:
        """The SQL parameters the scope filters of memory_engine.selectors.search.sql name."""
        return {
            "project": self.project_id,
            "store_ids": self.store_ids or [],
            "doc_ids": self.document_ids or [],
            "path_patterns": self.path_patterns or [],
            "tags": Jsonb(self.tags) if self.tags else None,
            "facet": self.facet,
            "actor_agent": self.actor_agent_id,
            "generation": self.generation_id,
            "access_tags": self.access_tags or [],
            "provenance": self.provenance or [],
            "lineage": self.lineage or [],
            "entity_ids": self.entity_ids or [],
            "kinds": self.kinds or [],
            "graph_entities": self.graph_entities,
            "graph_weights": self.graph_weights,
        }


def _like_prefix(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _missing(ids: list[str], found: set[str]) -> list[str]:
    return [i for i in ids if i not in found]


def resolve_scope(request: SearchRequest) -> Scope:
    """Which sources to search for ``request`` (its query already cleaned); unknown or foreign ids
    -> UNKNOWN_SCOPE naming them, a bad facet -> FACET_INVALID, a bad subject -> SUBJECT_INVALID, a
    generation not of the project -> STAGED_GENERATION_NOT_FOUND, one that holds no staged corpus ->
    STAGED_GENERATION_STATE."""
    project, actor, access_tags = request.project, request.actor, request.access_tags
    facet = validate_facet(request.facet)
    if request.generation is not None:
        _check_generation(project, request.generation)
    if actor is not None:
        if actor.agent.project_id != project.pk:
            raise ValueError("the actor's agent belongs to another project")
        validate_subject(actor.subject, allow_none=True)
    filters = _Filters.checked(request)
    stores = MemoryStore.objects.filter(project=project)
    documents_qs = Document.objects.filter(project=project)
    if access_tags is not None:  # ids the grants do not reach answer like ids of another project
        stores = stores.filter(access_tags__overlap=access_tags)
        documents_qs = documents_qs.filter(access_tags__overlap=access_tags)
    _refuse_unknown(project, filters, stores, documents_qs, access_tags)

    store_ids, paths = filters.store_ids, filters.paths
    # tags turn both sources on, every store (in reach) and every document; so do entity_ids and
    # kinds when nothing else names a source
    every = filters.tags is not None or (filters.names_entities and not (store_ids or filters.doc_ids or paths))
    memories = bool(store_ids) or every
    if every and not store_ids:
        store_ids = list(stores.values_list("pk", flat=True))
    documents = bool(filters.doc_ids) or bool(paths) or every or (request.query is not None and not memories)
    if actor is not None:
        store_ids = _actor_store_ids(project, actor, (store_ids or []) if memories else [])
        memories = True
    return Scope(
        project_id=project.pk,
        store_ids=store_ids if memories else None,
        search_documents=documents,
        document_ids=filters.doc_ids or None,
        path_patterns=[_like_prefix(p) for p in paths] if paths else None,
        tags=filters.tags,
        facet=facet,
        actor_agent_id=actor.agent.pk if actor is not None else None,
        include_deprecated=request.include_deprecated,
        generation_id=request.generation,
        access_tags=access_tags,
        provenance=filters.provenance,
        lineage=filters.lineage,
        entity_ids=filters.entity_ids or None,
        kinds=filters.kinds,
    )


@dataclass(frozen=True)
class _Filters:
    """A request's filters checked for shape: lists of distinct strings (None: not given), known
    provenances, lineages and entity kinds (None: no filter), a tags object (None: none or empty)."""

    store_ids: list[str] | None
    doc_ids: list[str] | None
    entity_ids: list[str] | None
    paths: list[str] | None
    tags: dict[str, Any] | None
    provenance: list[str] | None
    lineage: list[str] | None
    kinds: list[str] | None

    @classmethod
    def checked(cls, request: SearchRequest) -> _Filters:
        store_ids = string_list("memory_store_ids", request.memory_store_ids)
        doc_ids = string_list("document_ids", request.document_ids)
        entity_ids = string_list("entity_ids", request.entity_ids)
        paths = string_list("document_paths", request.document_paths)
        if request.tags is not None and not isinstance(request.tags, dict):
            raise ValidationFailed("`tags` must be a JSON object.", details={"field": "tags"})
        return cls(store_ids=store_ids, doc_ids=doc_ids, entity_ids=entity_ids, paths=paths,
                   tags=request.tags or None,
                   provenance=_choices("provenance", request.provenance, Provenance.values),
                   lineage=_choices("lineage", request.lineage, Lineage.values),
                   kinds=_choices("kinds", request.kinds, EntityKind.values))

    @property
    def names_entities(self) -> bool:
        return bool(self.entity_ids) or self.kinds is not None


def _refuse_unknown(project: Project, filters: _Filters, stores: QuerySet[MemoryStore],
                    documents: QuerySet[Document], access_tags: list[str] | None) -> None:
    """UNKNOWN_SCOPE naming every store, document and entity id the caller cannot reach (of another
    project, beyond its grants, or none at all), without saying which."""
    unknown: dict[str, list[str]] = {}
    if filters.store_ids:
        found = set(stores.filter(pk__in=filters.store_ids).values_list("pk", flat=True))
        if missing := _missing(filters.store_ids, found):
            unknown["memory_store_ids"] = missing
    if filters.doc_ids:
        found = set(documents.filter(pk__in=filters.doc_ids).values_list("pk", flat=True))
        if missing := _missing(filters.doc_ids, found):
            unknown["document_ids"] = missing
    if filters.entity_ids:  # an entity the grants do not reach (through no memory or chunk) answers like none
        found = entity_ids_visible(project_id=project.pk, ids=filters.entity_ids, access_tags=access_tags)
        if missing := _missing(filters.entity_ids, found):
            unknown["entity_ids"] = missing
    if unknown:
        names = ", ".join(i for ids in unknown.values() for i in ids)
        raise UnknownScope(f"Not found in your project: {names}.", details=unknown)


def _choices(field: str, values: list[str] | None, allowed: list[str]) -> list[str] | None:
    """A filter list of known values (None or empty: no filter); 400 VALIDATION_ERROR otherwise."""
    if not values:
        return None
    if not isinstance(values, list) or any(v not in allowed for v in values):
        raise ValidationFailed(f"`{field}` must be a list of {', '.join(allowed)}.", details={"field": field})
    return sorted(set(values))


def _check_generation(project: Project, generation: str) -> None:
    """A staged corpus to search: a completed or demoted replay run of the project."""
    status = ReplayRun.objects.filter(project=project, pk=generation).values_list("status", flat=True).first()
    if status is None:
        raise StagedGenerationNotFound(details={"generation": generation})
    if status not in (ReplayRun.Status.COMPLETED, ReplayRun.Status.DEMOTED):
        raise StagedGenerationState(f"Generation {generation} is {status}: only a completed or demoted "
                                    "generation holds a staged corpus to search.",
                                    details={"generation": generation, "status": status})


def _actor_store_ids(project: Project, actor: Actor, named: list[str]) -> list[str]:
    """The subject's user store and the agent's own store (where they exist), then ``named``
    less any other subject's user store, in one query."""
    own = Q(tier=Tier.AGENT, agent=actor.agent)
    if actor.subject is not None:
        own |= Q(tier=Tier.USER, subject_external_id=actor.subject)
    rows = MemoryStore.objects.filter(Q(project=project) & (own | Q(pk__in=named))).order_by(
        "created_at", "id").values_list("pk", "tier", "subject_external_id")
    return [pk for pk, tier, subject in rows
            if tier != Tier.USER or (actor.subject is not None and subject == actor.subject)]
