"""Store and project lifecycle services: creating and changing a memory store (its tier and
owner fixed at creation), finding or creating a subject's or an agent's own store, and erasure
(the one way ledger rows may go)."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import QuerySet

from memory_engine.db import allow_ledger_erasure, delete_in_project
from memory_engine.exceptions import (
    LifetimeInvalid,
    NameTaken,
    TierImmutable,
    TierInvalid,
    TierStoreExists,
    UnknownScope,
    ValidationFailed,
)
from memory_engine.models import Agent, DocumentVersion, Memory, MemoryStore, Project
from memory_engine.models.memories import Tier
from memory_engine.policy import access_tags_write, check_legal_hold
from memory_engine.subjects import validate_subject

from .documents import stored_files_delete_on_commit
from .entities import entities_drop_unnamed, entities_named_by
from .memories import validate_consent_expiry_days, validate_thresholds

#: What a caller may set on a memory store.
STORE_FIELDS = ("name", "description", "tags", "duplicate_threshold", "supersede_threshold",
                "require_about_for_kinds", "judge_enabled", "recency_half_life_days", "ttl_default", "ttl_max",
                "trash_days", "consent_expiry_days")
#: Fixed at creation: the tier and its owner (TIER_IMMUTABLE when an update changes one).
OWNER_FIELDS = ("tier", "subject_external_id", "agent_id")


def check_name_free(rows: QuerySet[Any], name: str | None, *, label: str) -> None:
    """409 NAME_TAKEN when one of ``rows`` (a project's stores, agents, ... without the row
    being saved) already has ``name``; ``label`` starts the message ("A memory store")."""
    if name and rows.filter(name=name).exists():
        raise NameTaken(f"{label} named {name!r} already exists.", details={"name": name})


def validate_lifetimes(store: MemoryStore) -> None:
    """``ttl_default`` and ``ttl_max`` (seconds) are positive integers or None, ``ttl_default``
    not above ``ttl_max``; ``trash_days`` a non-negative integer or None; ``consent_expiry_days``
    consent categories to positive days or None (LIFETIME_INVALID)."""
    for name, low in (("ttl_default", 1), ("ttl_max", 1), ("trash_days", 0)):
        value = getattr(store, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
            raise LifetimeInvalid(f"`{name}` must be an integer of at least {low}, or null.",
                                  details={"field": name, "value": value if isinstance(value, int) else repr(value)})
    if store.ttl_default is not None and store.ttl_max is not None and store.ttl_default > store.ttl_max:
        raise LifetimeInvalid("`ttl_default` must not exceed `ttl_max`.",
                              details={"ttl_default": store.ttl_default, "ttl_max": store.ttl_max})
    validate_consent_expiry_days(store.consent_expiry_days)


def validate_memory_store(store: MemoryStore) -> None:
    """A store about to be saved: its thresholds form a valid pair (THRESHOLDS_INVALID), its
    lifetimes are sane (LIFETIME_INVALID) and no other store of its project has its name (NAME_TAKEN)."""
    validate_thresholds(store.duplicate_threshold, store.supersede_threshold)
    validate_lifetimes(store)
    others = MemoryStore.objects.filter(project_id=store.project_id).exclude(pk=store.pk)
    check_name_free(others, store.name, label="A memory store")


def _validate_half_life(value: Any) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0):
        raise ValidationFailed("`recency_half_life_days` must be a number >= 0 (0: no decay) or null.",
                               details={"field": "recency_half_life_days"})


def _check_owner(store: MemoryStore) -> None:
    """A new store's tier and owner agree (TIER_INVALID), its agent is of its project
    (UNKNOWN_SCOPE) and its subject or agent has no store yet (TIER_STORE_EXISTS)."""
    if store.tier not in Tier.values:
        raise TierInvalid(details={"field": "tier", "value": str(store.tier)[:50], "accepted": list(Tier.values)})
    needs = {Tier.USER: "subject_external_id", Tier.AGENT: "agent_id"}.get(Tier(store.tier))
    given = [name for name in ("subject_external_id", "agent_id") if getattr(store, name) not in (None, "")]
    if given != ([needs] if needs else []):
        raise TierInvalid(details={"tier": store.tier, "required": [needs] if needs else [], "given": given})
    if store.tier == Tier.USER:
        validate_subject(store.subject_external_id, field="subject_external_id")
        if MemoryStore.objects.filter(project_id=store.project_id, tier=Tier.USER,
                                      subject_external_id=store.subject_external_id).exists():
            raise TierStoreExists(details={"subject_external_id": store.subject_external_id})
    if store.tier == Tier.AGENT:
        if not Agent.objects.filter(project_id=store.project_id, pk=store.agent_id).exists():
            raise UnknownScope(f"Not found in your project: {store.agent_id}.",
                               details={"agent_id": [store.agent_id]})
        if MemoryStore.objects.filter(project_id=store.project_id, tier=Tier.AGENT, agent_id=store.agent_id).exists():
            raise TierStoreExists(details={"agent_id": store.agent_id})


@transaction.atomic
def memory_store_save(*, project: Project, store: MemoryStore | None = None, **fields: Any) -> MemoryStore:
    """Create (store=None) or update a memory store of ``project`` with ``fields`` (names in
    STORE_FIELDS, and on creation OWNER_FIELDS) after :func:`validate_memory_store`.

    A new store is institutional unless ``tier`` says otherwise: user with a
    ``subject_external_id``, agent with an ``agent_id`` of the project (TIER_INVALID,
    SUBJECT_INVALID, UNKNOWN_SCOPE, TIER_STORE_EXISTS). An update that would change the tier or
    owner raises TIER_IMMUTABLE (sending the current values is fine).
    """
    unknown = set(fields) - set(STORE_FIELDS) - set(OWNER_FIELDS)
    if unknown:
        raise ValidationFailed(f"Unknown memory store fields: {', '.join(sorted(unknown))}.",
                               details={"fields": sorted(unknown)})
    _validate_half_life(fields.get("recency_half_life_days"))
    owner = {name: fields.pop(name) for name in OWNER_FIELDS if name in fields}
    if store is not None:
        changed = sorted(name for name, value in owner.items() if value != getattr(store, name))
        if changed:
            raise TierImmutable(details={"fields": changed})
    else:
        store = MemoryStore(project=project, **owner)
        store.tier = store.tier or Tier.INSTITUTIONAL
        _check_owner(store)
    for name, value in fields.items():
        setattr(store, name, value)
    validate_memory_store(store)
    store.save()
    return store


def _free_name(project_id: str, preferred: str, fallback: str) -> str:
    """``preferred`` (cut to the column's length) when no store of the project has it, else ``fallback``."""
    name = preferred[:MemoryStore._meta.get_field("name").max_length]
    return fallback if MemoryStore.objects.filter(project_id=project_id, name=name).exists() else name


def subject_store_get_or_create(*, project: Project, external_id: str) -> tuple[MemoryStore, bool]:
    """The user-tier store of ``external_id`` (SUBJECT_INVALID unless 1-200 characters), created
    (named ``user:<external_id>``) when it does not exist; ``(store, created)``. Two concurrent
    first calls create one store: the loser of the unique constraint reads the winner's."""
    validate_subject(external_id, field="external_id")
    found = MemoryStore.objects.filter(project=project, tier=Tier.USER, subject_external_id=external_id).first()
    if found is not None:
        return found, False
    store = MemoryStore(project=project, tier=Tier.USER, subject_external_id=external_id)
    store.name = _free_name(project.pk, f"user:{external_id}", f"user:{store.pk}")
    try:
        with transaction.atomic():
            store.save()
    except IntegrityError:
        found = MemoryStore.objects.filter(project=project, tier=Tier.USER, subject_external_id=external_id).first()
        if found is None:
            raise
        return found, False
    return store, True


def agent_store_create(*, agent: Agent, owner: str | None) -> MemoryStore:
    """The agent's own (agent-tier) store, named ``agent:<agent name>`` (``agent:<store id>``
    when that name is taken), tagged with its creator's ``owner`` (the agent goes with it). The
    name is a label: recall finds the store by its agent."""
    store = MemoryStore(project_id=agent.project_id, tier=Tier.AGENT, agent=agent)
    store.name = _free_name(agent.project_id, f"agent:{agent.name}", f"agent:{store.pk}")
    store.save()
    access_tags_write(obj=store, owner=owner)
    return store


@transaction.atomic
def memory_store_delete(*, store: MemoryStore) -> None:
    """Erase a store with its memories, their ledger rows and the entities only they named
    (409 LEGAL_HOLD if one is held)."""
    memories = Memory.objects.of_project(store.project_id).filter(store=store)
    check_legal_hold(memories=memories)
    allow_ledger_erasure()
    named = entities_named_by(project_id=store.project_id, memory_ids=memories.values("pk"))
    delete_in_project(MemoryStore.objects.filter(pk=store.pk), store.project_id)
    entities_drop_unnamed(project_id=store.project_id, entity_ids=named)


@transaction.atomic
def project_delete(*, project: Project) -> None:
    """Erase a project and everything in it, keys and stored document files included
    (409 LEGAL_HOLD while a memory or document version of it is under legal hold)."""
    check_legal_hold(memories=Memory.objects.filter(store__project=project),
                     versions=DocumentVersion.objects.filter(document__project=project))
    allow_ledger_erasure()
    stored_files_delete_on_commit(names=list(project.documents.values_list("file", flat=True)))
    project.delete()
