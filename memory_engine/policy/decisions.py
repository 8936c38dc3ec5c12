"""The access decisions: which rows a principal sees for an action (a filter inside the SQL) and
whether it may act on one object (docs/security.md, *The access policy*).

Every grant-covered row takes its tags from one place:

* a memory store its own ``access_tags``; its memories, contents, revisions, ledger rows and
  rules go with it;
* a document its own ``access_tags``; its versions, chunks and raw captures go with it;
* an agent goes with its own (agent-tier) store, and its generations with the agent;
* an evidence link needs both of its ends; a feed entry and a retention change its store or
  its document;
* an entity (memory_engine.models.entities) goes with the memories and chunks that mention it:
  it is seen through any of them; an edge goes with its memory or its chunk.

A principal without grants (a key or staff user without them, a superuser, the system) is not
narrowed: it sees every row of its projects. One with grants sees a row when one of the row's
tags is reached by a pattern granted the action (or is its owner tag).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django.db.models import Exists, F, Func, Model, OuterRef, Q, QuerySet

from memory_engine.exceptions import GrantRequired, NotFound, StagedGenerationForbidden
from memory_engine.grants import HOLD, SEARCH
from memory_engine.models import (
    Agent,
    Chunk,
    Distiller,
    DistillerRun,
    Document,
    DocumentVersion,
    Entity,
    EntityEdge,
    EvidenceLink,
    FeedEntry,
    Generation,
    Memory,
    MemoryAssertion,
    MemoryContent,
    MemoryRevision,
    MemoryRule,
    MemoryStore,
    RawCapture,
    RetentionChange,
)
from memory_engine.models.memories import Tier

from .principals import Principal, PrincipalKind

__all__ = ["GENERATION_PERMISSION", "HOLD_PERMISSION", "allows", "get_visible_or_404", "lookup_action",
           "may_purge_project", "object_tags", "reach", "receipts_visible", "require", "require_generation_access",
           "require_unrestricted", "sees", "tag_filter", "unrestricted_only", "visible"]

M = TypeVar("M", bound=Model)

#: The Django permission a staff user needs to release a legal hold (besides a ``hold`` grant
#: when the user has grants).
HOLD_PERMISSION = "memory_engine.release_legal_hold"

#: What promoting or demoting a staged generation needs of a staff user besides staff: changing
#: replay runs.
GENERATION_PERMISSION = "memory_engine.change_replayrun"


def _own_store(agent_ref: str, tags: list[str]) -> Exists:
    return Exists(MemoryStore.objects.filter(project_id=OuterRef("project_id"), agent_id=OuterRef(agent_ref),
                                             tier=Tier.AGENT, access_tags__overlap=tags))


def _link_end(end: str, tags: list[str]) -> Q:
    return (Q(**{f"{end}_memory__store__access_tags__overlap": tags})
            | Q(**{f"{end}_version__document__access_tags__overlap": tags}))


def _edge_end(tags: list[str], prefix: str = "") -> Q:
    return (Q(**{f"{prefix}memory__store__access_tags__overlap": tags})
            | Q(**{f"{prefix}chunk__document__access_tags__overlap": tags}))


def _entity_seen(tags: list[str]) -> Q:
    """Entities with an edge to a memory or a chunk these tags reach (one EXISTS per end, each
    an index lookup from the edge)."""
    edges = EntityEdge.objects.filter(entity_id=OuterRef("pk"))
    return (Q(Exists(edges.filter(memory__store__access_tags__overlap=tags)))
            | Q(Exists(edges.filter(chunk__document__access_tags__overlap=tags))))


#: For each grant-covered model: the rows whose tags overlap ``tags``.
TAG_FILTERS: dict[type[Model], Callable[[list[str]], Q]] = {
    MemoryStore: lambda tags: Q(access_tags__overlap=tags),
    Memory: lambda tags: Q(store__access_tags__overlap=tags),
    MemoryContent: lambda tags: Q(store__access_tags__overlap=tags),
    MemoryAssertion: lambda tags: Q(store__access_tags__overlap=tags),
    MemoryRule: lambda tags: Q(store__access_tags__overlap=tags),
    Distiller: lambda tags: Q(store__access_tags__overlap=tags),
    DistillerRun: lambda tags: Q(distiller__store__access_tags__overlap=tags),
    MemoryRevision: lambda tags: Q(memory__store__access_tags__overlap=tags),
    Document: lambda tags: Q(access_tags__overlap=tags),
    DocumentVersion: lambda tags: Q(document__access_tags__overlap=tags),
    Chunk: lambda tags: Q(document__access_tags__overlap=tags),
    RawCapture: lambda tags: Q(document__access_tags__overlap=tags),
    Agent: lambda tags: Q(_own_store("pk", tags)),
    Generation: lambda tags: Q(_own_store("agent_id", tags)),
    EvidenceLink: lambda tags: _link_end("source", tags) & _link_end("target", tags),
    FeedEntry: lambda tags: Q(Exists(MemoryStore.objects.filter(pk=OuterRef("store_id"), access_tags__overlap=tags)))
    | Q(Exists(Document.objects.filter(pk=OuterRef("document_id"), access_tags__overlap=tags))),
    Entity: _entity_seen,
    EntityEdge: _edge_end,
    RetentionChange: lambda tags: Q(Exists(MemoryStore.objects.filter(pk=OuterRef("parent_id"),
                                                                      access_tags__overlap=tags)))
    | Q(Exists(Document.objects.filter(pk=OuterRef("parent_id"), access_tags__overlap=tags))),
}


def tag_filter(model: type[Model], tags: list[str]) -> Q:
    """The rows of ``model`` whose grant tags overlap ``tags``."""
    try:
        return TAG_FILTERS[model](tags)
    except KeyError:
        raise TypeError(f"{model.__name__} rows carry no grant tags; see memory_engine.policy.TAG_FILTERS") from None


def _catalogue(principal: Principal) -> set[str]:
    """The tags the documents and stores of the principal's projects carry (for wildcard patterns)."""
    if "catalogue" not in principal.cache:
        found: set[str] = set()
        for model in (Document, MemoryStore):
            rows = model.objects.all()
            if principal.project_ids is not None:
                rows = rows.filter(project_id__in=principal.project_ids)
            found.update(rows.values_list(Func(F("access_tags"), function="unnest"), flat=True).distinct())
        principal.cache["catalogue"] = found
    return principal.cache["catalogue"]


def reach(principal: Principal, action: str | None = SEARCH) -> list[str] | None:
    """The concrete tags ``action`` reaches (None: any action); None when the principal is not
    narrowed. Computed once per principal."""
    grants = principal.grants
    if grants is None:
        return None
    key = ("reach", action)
    if key not in principal.cache:
        catalogue = _catalogue(principal) if grants.needs_catalogue(action) else ()
        principal.cache[key] = grants.tags(action, catalogue)
    return principal.cache[key]


def visible(principal: Principal, queryset: QuerySet[M], action: str | None = SEARCH) -> QuerySet[M]:
    """``queryset`` less the rows ``principal`` does not reach for ``action`` (None: any action),
    filtered in SQL. Project scoping is the caller's queryset's (every query filters by project first)."""
    tags = reach(principal, action)
    if tags is None:
        return queryset
    return queryset.filter(tag_filter(queryset.model, tags))


def lookup_action(method: str | None) -> str | None:
    """The action a detail lookup filters by: ``search`` for reads; for writes any action, so an
    object the principal may see but not change answers 403 GRANT_REQUIRED, not 404."""
    return SEARCH if method in ("GET", "HEAD", "OPTIONS") else None


def get_visible_or_404(principal: Principal, queryset: QuerySet[M], pk: Any, *, action: str | None = SEARCH,
                       error: type[NotFound] = NotFound, field: str = "id") -> M:
    """The row ``pk`` of ``queryset`` (already limited to the caller's project) that ``principal``
    reaches for ``action``; else ``error``, exactly as for an id that never existed."""
    from django.core.exceptions import ValidationError

    try:
        row = visible(principal, queryset, action).filter(pk=pk).first()
    except (TypeError, ValueError, ValidationError):  # an id no row can have (e.g. a NUL in it)
        row = None
    if row is not None:
        return row
    if error is NotFound:
        raise NotFound()
    raise error(details={field: pk})


def object_tags(obj: Model) -> list[str]:
    """The grant tags of one row (see the module docstring)."""
    if isinstance(obj, (MemoryStore, Document)):
        return list(obj.access_tags)
    if isinstance(obj, (Memory, MemoryAssertion, MemoryRule, MemoryContent, Distiller)):
        return list(obj.store.access_tags)
    if isinstance(obj, DistillerRun):
        return list(obj.distiller.store.access_tags)
    if isinstance(obj, MemoryRevision):
        return list(obj.memory.store.access_tags)
    if isinstance(obj, (DocumentVersion, Chunk, RawCapture)):
        return list(obj.document.access_tags)
    if isinstance(obj, (Agent, Generation)):
        agent_id = obj.pk if isinstance(obj, Agent) else obj.agent_id
        own = MemoryStore.objects.filter(project_id=obj.project_id, agent_id=agent_id, tier=Tier.AGENT).values_list(
            "access_tags", flat=True)
        return list(own.first() or [])
    if isinstance(obj, Entity):  # the tags of every store and document whose rows mention it
        edges = EntityEdge.objects.filter(entity_id=obj.pk)
        tags = {tag for found in edges.filter(memory__isnull=False).values_list("memory__store__access_tags", flat=True)
                .distinct() for tag in found}
        tags.update(tag for found in edges.filter(chunk__isnull=False)
                    .values_list("chunk__document__access_tags", flat=True).distinct() for tag in found)
        return sorted(tags)
    raise TypeError(f"{type(obj).__name__} rows carry no grant tags")


def allows(principal: Principal, action: str, obj: Model | list[str]) -> bool:
    """Whether ``principal`` may do ``action`` on ``obj`` (a row, or its grant tags).

    ``hold`` (releasing a legal hold) is never implied: superusers and the system have it; an
    API key only through a grant that names it; a staff user needs the ``release_legal_hold``
    permission, and a grant naming it when the user has grants."""
    tags = obj if isinstance(obj, list) else None
    if isinstance(obj, EvidenceLink):
        ends = [e for e in (obj.source_memory, obj.source_version, obj.target_memory, obj.target_version) if e]
        return all(allows(principal, action, end) for end in ends)
    if action == HOLD:
        if principal.superuser:
            return True
        if principal.kind == PrincipalKind.USER and not principal.has_perm(HOLD_PERMISSION):
            return False
        if principal.grants is None:
            return principal.kind == PrincipalKind.USER
        return principal.grants.allows(HOLD, tags if tags is not None else object_tags(obj))  # type: ignore[arg-type]
    if principal.grants is None:
        return True
    return principal.grants.allows(action, tags if tags is not None else object_tags(obj))  # type: ignore[arg-type]


def sees(principal: Principal, obj: Model, action: str | None = SEARCH) -> bool:
    """Whether ``obj`` is in ``principal``'s reach for ``action`` (None: any action)."""
    tags = reach(principal, action)
    if tags is None:
        return True
    return type(obj)._default_manager.filter(pk=obj.pk).filter(tag_filter(type(obj), tags)).exists()


def require(principal: Principal, action: str, obj: Model | list[str]) -> None:
    """403 GRANT_REQUIRED (``details.action``) unless ``principal`` may do ``action`` on ``obj``."""
    if not allows(principal, action, obj):
        raise GrantRequired(details={"action": action})


def require_unrestricted(principal: Principal, action: str = SEARCH) -> None:
    """Project-wide configuration (ingestion rules, transform configs, replay runs, the memory
    schema, webhooks) reaches every team's rows: a principal narrowed by grants may not change it
    (403 GRANT_REQUIRED, ``details.scope: "project"``)."""
    if principal.restricted:
        raise GrantRequired(details={"action": action, "scope": "project"})


def require_generation_access(principal: Principal, permission: str | None = None) -> None:
    """Staged generations (generation search, promote, demote) are operator tools: an API key (a
    tenant; no admin scope exists) and a user without staff are refused with
    STAGED_GENERATION_FORBIDDEN (403); ``permission`` is the model permission a staff user also
    needs (``details.missing``; superusers and the system have every one)."""
    if principal.kind == PrincipalKind.KEY:
        raise StagedGenerationForbidden()
    user = principal.user
    if principal.kind == PrincipalKind.USER and not (user is not None and (user.is_staff or user.is_superuser)):
        raise StagedGenerationForbidden()
    if permission is not None and not principal.has_perm(permission):
        raise StagedGenerationForbidden(details={"missing": [permission]})


def unrestricted_only(principal: Principal, queryset: QuerySet[M]) -> QuerySet[M]:
    """Rows that carry the whole project (webhook subscriptions: the project's feed) are for
    principals not narrowed by grants; for the others they do not exist."""
    return queryset.none() if principal.restricted else queryset


def may_purge_project(principal: Principal) -> bool:
    """Whether ``principal`` may purge anywhere in its project: not narrowed, not read-only, and
    for a staff user the permissions to delete memories and documents."""
    if principal.restricted or principal.read_only:
        return False
    return principal.has_perm("memory_engine.delete_memory") and principal.has_perm("memory_engine.delete_document")


def receipts_visible(principal: Principal, queryset: QuerySet[M]) -> QuerySet[M]:
    """Erasure receipts a principal may list: all of its project's when it may purge anywhere in
    it; else only the receipts of erasures it made itself (none for a read-only key)."""
    if may_purge_project(principal):
        return queryset
    if principal.read_only:
        return queryset.none()
    return queryset.filter(principal=principal.label)
