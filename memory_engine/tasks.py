"""django-q2 entry points: they take ids, re-fetch rows and call a service.

Nothing here enqueues: :mod:`memory_engine.queue` names these functions by dotted path,
queues them on commit (never with model instances) and creates the sweep Schedules.
"""

from __future__ import annotations

from typing import Any

from memory_engine.conf import engine_settings
from memory_engine.services.distillers import distillers_tick
from memory_engine.services.documents import document_ingest_group, document_ingest_many, document_sweep
from memory_engine.services.entities import entities_extract_documents, entities_sweep
from memory_engine.services.guard_sweep import guard_sweep
from memory_engine.services.memory_lifecycle import memory_sweep
from memory_engine.services.memory_map import memory_map_compute
from memory_engine.services.retention import document_retention_sweep
from memory_engine.services.rules import memory_rule_fire, rule_firing_sweep
from memory_engine.webhooks import webhooks_dispatch


def memory_rule_fire_task(rule_id: str, generation_id: str, resume: bool = False,
                          project_id: str | None = None) -> dict[str, Any] | None:
    """Run one memory rule on one completed generation (enqueued by the signal receiver,
    or again by the rule-firing sweep with ``resume=True``). A task queued by an earlier
    version has no ``project_id``: the firing looks it up."""
    return memory_rule_fire(rule_id=rule_id, generation_id=generation_id, project_id=project_id, resume=resume)


def rule_firing_sweep_task() -> dict[str, int]:
    """Re-enqueue rule firings whose worker died (still pending after RULE_FIRING_TIMEOUT)."""
    return rule_firing_sweep()


def document_ingest_task(document_id: str, project_id: str | None = None) -> str | None:
    """Ingest one document, and with it other small documents of its project waiting for a
    worker (document_ingest_group); returns the document's final status (for the task log).
    ``project_id`` is None in a task queued before it was passed (the project is looked up)."""
    document = document_ingest_group(document_id=document_id, project_id=project_id)
    return document.status if document is not None else None


def documents_ingest_task(document_ids: list[str], project_id: str | None = None) -> list[str | None]:
    """Ingest documents created together (document_create_many) in one document_ingest_many
    call; returns their final statuses (for the task log)."""
    return [document.status if document is not None else None
            for document in document_ingest_many(document_ids=document_ids, project_id=project_id)]


def document_sweep_task() -> dict[str, int]:
    """Re-run stalled ingestions and time out pending converters."""
    return document_sweep()


def memory_sweep_task() -> dict[str, int]:
    """Delete expired memories and purge the trash past each store's trash_days."""
    return memory_sweep().as_dict()


def retention_sweep_task() -> dict[str, int]:
    """Tombstone ephemeral document versions past DOCUMENT_EPHEMERAL_TTL_SECONDS."""
    return document_retention_sweep()


def webhooks_dispatch_task() -> int:
    """Deliver what the feed holds for every due webhook subscription (docs/webhooks.md)."""
    return webhooks_dispatch()


def distillers_tick_task() -> int:
    """A tick of every enabled resident distiller (docs/distillers.md); the number that ran."""
    return distillers_tick()


def memory_map_compute_task(store_id: str) -> str | None:
    """Compute one store's memory map (enqueued when a map is asked for and missing or stale);
    returns the map's status (for the task log)."""
    found = memory_map_compute(store_id=store_id)
    return found.status if found is not None else None


def entities_documents_task(document_ids: list[str], project_id: str | None = None) -> dict[str, Any]:
    """Read the entities of documents' new chunks into the graph (the documents of ``project_id``;
    a task queued by an earlier version has none: its documents are read by id)."""
    return entities_extract_documents(document_ids=document_ids, project_id=project_id).as_dict()


def entities_sweep_task() -> dict[str, Any]:
    """Read what the graph has not read yet: new memories, chunks whose queued reading was lost
    (docs/entities.md)."""
    return entities_sweep()


def guard_sweep_task(store_ids: list[str] | None = None) -> dict[str, int]:
    """Judge stored texts without a finding of the instruction guard's current version (at most
    GUARD_SWEEP_ROWS; the schedule comes back for the rest)."""
    return guard_sweep(store_ids=store_ids, limit=engine_settings.GUARD_SWEEP_ROWS)
