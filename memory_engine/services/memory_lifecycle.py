"""How a memory ends: forget (by tier), restore from the trash, and the sweep that deletes
expired memories and purges the trash (docs/memory.md, "Expiry, forget and the trash").

* a **user**-tier memory is deleted at once when forgotten (its revisions and, when nothing
  else uses it, its content row with it); the ledger keeps the ``forgotten`` row, which names
  its id and holds its text;
* an **agent** or **institutional** memory goes to the trash (``trashed_at`` and
  ``invalidated_at`` set): nothing recalls it, and :func:`memory_restore` brings it back for
  the store's ``trash_days`` (``TRASH_DAYS``); then :func:`memory_sweep` purges it;
* :func:`memory_sweep` also deletes expired memories (``expires_at`` passed), which no read
  returns even before it runs. Each deletion writes one ledger row (``expired`` / ``purged``).

Every change takes the store lock of the write funnel, so a sweep, a forget and a write on
the same store never interleave; the ledger row is written in the same transaction.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone

from memory_engine.conf import engine_settings
from memory_engine.db import across_projects, delete_in_project
from memory_engine.exceptions import NotInTrash, TrashExpired
from memory_engine.models import Memory, MemoryAssertion, MemoryContent, MemoryRevision, MemoryStore
from memory_engine.models.memories import Mechanism, Outcome, Tier
from memory_engine.models.retention import RetentionClass
from memory_engine.policy import check_legal_hold

from .entities import entities_drop_unnamed, entities_named_by, entity_edges_retire, entity_edges_revive
from .memories import lock_store

logger = logging.getLogger("memory_engine.lifecycle")

__all__ = ["SWEEP_BATCH", "SWEEP_PRINCIPAL", "SweepCounts", "memory_forget", "memory_restore", "memory_sweep",
           "restorable_until", "trash_days"]

#: Principal of the ledger rows the sweep writes.
SWEEP_PRINCIPAL = "system:memory_sweep"
#: Memories deleted per transaction by the sweep (each batch holds one store's lock briefly).
SWEEP_BATCH = 500


def trash_days(store: MemoryStore) -> int:
    """Days a forgotten memory of ``store`` stays restorable: the store's, else TRASH_DAYS."""
    return store.trash_days if store.trash_days is not None else engine_settings.TRASH_DAYS


def restorable_until(memory: Memory) -> datetime | None:
    """When ``memory`` leaves the restore window (None: it is not in the trash)."""
    if memory.trashed_at is None:
        return None
    return memory.trashed_at + timedelta(days=trash_days(memory.store))


def _forget_assertion(memory: Memory, *, principal: str, mechanism: str, outcome: str = Outcome.FORGOTTEN,
                      reason: str = "forgotten", details: dict | None = None) -> MemoryAssertion:
    return MemoryAssertion.objects.create(
        store_id=memory.store_id, project_id=memory.project_id, memory_id=memory.pk, replaced_memory_id=memory.pk,
        content=memory.content.text,
        outcome=outcome, decision_reason=reason, principal=principal, mechanism=mechanism, details=details or {},
    )


def _delete_orphan_contents(project_id: str, store_id: str, content_ids: set[str]) -> int:
    """Delete those of ``content_ids`` no memory or revision uses any more (call under the store lock)."""
    if not content_ids:
        return 0
    used = Q(Exists(Memory.objects.filter(project_id=project_id, content_id=OuterRef("pk")))) | Q(
        Exists(MemoryRevision.objects.filter(project_id=project_id, content_id=OuterRef("pk"))))
    orphans = MemoryContent.objects.filter(project_id=project_id, store_id=store_id, pk__in=content_ids).exclude(used)
    return delete_in_project(orphans, project_id)[0]


def _delete_memories(store: MemoryStore, memories: list[Memory]) -> None:
    """Delete memories with their revisions, then the content rows and entities nobody uses any more."""
    project_id = store.project_id
    ids = [m.pk for m in memories]
    content_ids = {m.content_id for m in memories}
    content_ids |= set(MemoryRevision.objects.filter(project_id=project_id, memory_id__in=ids)
                       .values_list("content_id", flat=True))
    named = entities_named_by(project_id=project_id, memory_ids=ids)
    # revisions and entity edges cascade; successors' links become NULL
    delete_in_project(Memory.objects.filter(pk__in=ids), project_id)
    _delete_orphan_contents(project_id, store.pk, content_ids)
    entities_drop_unnamed(project_id=project_id, entity_ids=named)


@transaction.atomic
def memory_forget(*, memory: Memory, principal: str, mechanism: str = Mechanism.API) -> MemoryAssertion:
    """Forget a memory by its store's tier and record outcome ``forgotten`` (its text and id).

    user tier: the memory row is deleted at once (with its revisions and unused content rows).
    agent / institutional: it goes to the trash (``trashed_at`` = ``invalidated_at`` = now; a
    superseded memory keeps its ``invalidated_at``), restorable with :func:`memory_restore`.
    Forgetting a memory already in the trash records the row again and changes nothing.
    """
    lock_store(memory.store_id)
    memory = Memory.objects.of_project(memory.project_id).select_related("store", "content").get(pk=memory.pk)
    check_legal_hold(memories=Memory.objects.of_project(memory.project_id).filter(pk=memory.pk))
    if memory.store.tier == Tier.USER:
        assertion = _forget_assertion(memory, principal=principal, mechanism=mechanism,
                                      details={"deleted": True})
        _delete_memories(memory.store, [memory])
        return assertion
    if memory.trashed_at is None:
        now = timezone.now()
        changes = {"trashed_at": now, "invalidated_at": memory.invalidated_at or now}
        Memory.objects.filter(project_id=memory.project_id, pk=memory.pk).update(**changes)
        for name, value in changes.items():
            setattr(memory, name, value)
        entity_edges_retire(project_id=memory.project_id, memory_ids=[memory.pk], at=now)
    until = restorable_until(memory)
    return _forget_assertion(memory, principal=principal, mechanism=mechanism,
                             details={"trashed": True, "restorable_until": until.isoformat() if until else None})


@transaction.atomic
def memory_restore(*, memory: Memory, principal: str, mechanism: str = Mechanism.API) -> Memory:
    """Bring a memory back from the trash (outcome ``restored``).

    409 NOT_IN_TRASH when it is not in the trash; 409 TRASH_EXPIRED after the store's trash_days.
    It comes back as it was, even when a live memory now holds the same text or about key (the
    next write of that fact dedups against both; forget one of them to keep a single copy).
    A memory that had been superseded before it was forgotten comes back superseded.
    """
    lock_store(memory.store_id)
    memory = Memory.objects.of_project(memory.project_id).select_related("store", "content").get(pk=memory.pk)
    if memory.trashed_at is None:
        raise NotInTrash(details={"memory_id": memory.pk})
    until = restorable_until(memory)
    assert until is not None
    if timezone.now() >= until:
        raise TrashExpired(details={"memory_id": memory.pk, "trashed_at": memory.trashed_at.isoformat(),
                                    "trash_days": trash_days(memory.store)})
    changes = {"trashed_at": None, "invalidated_at": memory.invalidated_at if memory.superseded_by_id else None}
    Memory.objects.filter(project_id=memory.project_id, pk=memory.pk).update(**changes)
    for name, value in changes.items():
        setattr(memory, name, value)
    if memory.invalidated_at is None:
        entity_edges_revive(project_id=memory.project_id, memory_ids=[memory.pk])
    MemoryAssertion.objects.create(
        store_id=memory.store_id, project_id=memory.project_id, memory_id=memory.pk, content=memory.content.text,
        outcome=Outcome.RESTORED,
        decision_reason="restored", principal=principal, mechanism=mechanism,
    )
    return memory


@dataclass
class SweepCounts:
    """What one sweep deleted."""

    expired: int = 0
    purged: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"expired": self.expired, "purged": self.purged}


def _sweep_store_batch(project_id: str, store_id: str, now: datetime, counts: SweepCounts) -> int:
    """Delete one batch of one store's due memories under its lock; the number deleted."""
    with transaction.atomic():
        lock_store(store_id)
        store = MemoryStore.objects.get(project_id=project_id, pk=store_id)
        trash_cutoff = now - timedelta(days=trash_days(store))
        due = list(
            Memory.objects.of_project(project_id).filter(store_id=store_id)
            .filter(Q(expires_at__lte=now) | Q(trashed_at__lte=trash_cutoff))
            .exclude(retention_class=RetentionClass.LEGAL_HOLD)
            .select_related("content").defer("content__embedding")
            .select_for_update(skip_locked=True, of=("self",)).order_by("pk")[:SWEEP_BATCH]
        )
        if not due:
            return 0
        rows = []
        for memory in due:
            expired = memory.expires_at is not None and memory.expires_at <= now
            outcome = Outcome.EXPIRED if expired else Outcome.PURGED
            moment = memory.expires_at if expired else memory.trashed_at
            details = {"expires_at" if expired else "trashed_at": moment.isoformat() if moment else None}
            rows.append(MemoryAssertion(
                store_id=store_id, project_id=store.project_id, memory_id=memory.pk, content=memory.content.text,
                outcome=outcome,
                decision_reason=str(outcome), principal=SWEEP_PRINCIPAL, mechanism=Mechanism.SYSTEM, details=details,
            ))
            if expired:
                counts.expired += 1
            else:
                counts.purged += 1
        MemoryAssertion.objects.bulk_create(rows)
        _delete_memories(store, due)
    return len(due)


def memory_sweep(*, now: datetime | None = None) -> SweepCounts:
    """Delete expired memories (ledger ``expired``) and purge the trash past each store's
    trash_days (ledger ``purged``), with content rows nothing uses any more.

    Batch-wise, one store at a time under its lock; idempotent, and safe to run concurrently
    (rows another sweep holds are skipped, a deleted row is not found twice).
    """
    now = now or timezone.now()
    counts = SweepCounts()
    default_cutoff = now - timedelta(days=engine_settings.TRASH_DAYS)
    # A coarse pre-filter (stores with anything possibly due); each batch applies its store's window.
    candidates = Memory.objects.filter(
        Q(expires_at__lte=now) | Q(trashed_at__isnull=False, store__trash_days__isnull=False)
        | Q(trashed_at__lte=default_cutoff), store__project_id=F("project_id")  # joined by the project too
    ).exclude(retention_class=RetentionClass.LEGAL_HOLD)
    # every project's stores (one statement across a distributed database's nodes), then each
    # store's batches on its project's rows
    with across_projects():
        stores = list(candidates.values_list("project_id", "store_id").distinct().order_by("store_id"))
    for project_id, store_id in stores:
        while _sweep_store_batch(project_id, store_id, now, counts) == SWEEP_BATCH:
            pass
    if counts.expired or counts.purged:
        logger.info("memory sweep expired=%s purged=%s", counts.expired, counts.purged,
                    extra=counts.as_dict())
    return counts
