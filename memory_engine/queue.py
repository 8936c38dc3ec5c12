"""The one module that enqueues django-q2 tasks: the task paths, the ``enqueue_*``
functions and the sweep schedules.

Services call the ``enqueue_*_on_commit`` functions with plain ids; the work is queued
once the transaction commits (a rollback queues nothing), and the worker's entry point in
:mod:`memory_engine.tasks` re-fetches the rows and calls a service. Tasks are named by
dotted path, so this module imports no service and no task: services may enqueue without
an import cycle (services -> queue, tasks -> services).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from django.db import DEFAULT_DB_ALIAS, transaction

from memory_engine.conf import engine_settings

__all__ = [
    "DISTILLERS_SCHEDULE_NAME",
    "DISTILLERS_TASK",
    "ENTITIES_DOCUMENTS_TASK",
    "ENTITIES_SCHEDULE_NAME",
    "ENTITIES_SWEEP_TASK",
    "INGEST_MANY_TASK",
    "INGEST_TASK",
    "MEMORY_MAP_TASK",
    "MEMORY_SWEEP_SCHEDULE_NAME",
    "MEMORY_SWEEP_TASK",
    "RULE_FIRE_TASK",
    "RULE_SWEEP_SCHEDULE_NAME",
    "RULE_SWEEP_TASK",
    "SWEEP_SCHEDULE_NAME",
    "SWEEP_TASK",
    "WEBHOOKS_SCHEDULE_NAME",
    "WEBHOOKS_TASK",
    "enqueue_document_ingest",
    "enqueue_document_ingest_on_commit",
    "enqueue_documents_ingest_on_commit",
    "enqueue_memory_map_on_commit",
    "enqueue_entities_documents_on_commit",
    "enqueue_memory_rule_fire",
    "ensure_schedules",
]

INGEST_TASK = "memory_engine.tasks.document_ingest_task"
INGEST_MANY_TASK = "memory_engine.tasks.documents_ingest_task"
SWEEP_TASK = "memory_engine.tasks.document_sweep_task"
SWEEP_SCHEDULE_NAME = "memory_engine: ingestion sweep"
RULE_FIRE_TASK = "memory_engine.tasks.memory_rule_fire_task"
RULE_SWEEP_TASK = "memory_engine.tasks.rule_firing_sweep_task"
RULE_SWEEP_SCHEDULE_NAME = "memory_engine: rule firing sweep"
MEMORY_SWEEP_TASK = "memory_engine.tasks.memory_sweep_task"
MEMORY_SWEEP_SCHEDULE_NAME = "memory_engine: memory sweep"
RETENTION_SWEEP_TASK = "memory_engine.tasks.retention_sweep_task"
RETENTION_SWEEP_SCHEDULE_NAME = "memory_engine: retention sweep"
WEBHOOKS_TASK = "memory_engine.tasks.webhooks_dispatch_task"
DISTILLERS_TASK = "memory_engine.tasks.distillers_tick_task"
DISTILLERS_SCHEDULE_NAME = "memory_engine: distillers"
MEMORY_MAP_TASK = "memory_engine.tasks.memory_map_compute_task"
WEBHOOKS_SCHEDULE_NAME = "memory_engine: webhooks"
ENTITIES_DOCUMENTS_TASK = "memory_engine.tasks.entities_documents_task"
ENTITIES_SWEEP_TASK = "memory_engine.tasks.entities_sweep_task"
ENTITIES_SCHEDULE_NAME = "memory_engine: entity graph"
GUARD_SWEEP_TASK = "memory_engine.tasks.guard_sweep_task"
GUARD_SWEEP_SCHEDULE_NAME = "memory_engine: instruction guard"


def _async_task(path: str, *args: Any, **options: Any) -> None:
    # django_q.tasks imports django_q's models, which need the app registry: import on use.
    from django_q.tasks import async_task

    async_task(path, *args, **options)


def enqueue_document_ingest(document_id: str, project_id: str) -> None:
    """Queue the ingestion of one document of ``project_id`` now (call it from
    ``transaction.on_commit``); the task names the project in every statement."""
    _async_task(INGEST_TASK, document_id, project_id, task_name=f"ingest {document_id}",
                group="memory_engine.ingest")


def enqueue_document_ingest_on_commit(document_id: str, project_id: str) -> None:
    """Queue the ingestion of one document once the current transaction commits."""
    transaction.on_commit(partial(enqueue_document_ingest, document_id, project_id))


def enqueue_documents_ingest(groups: Sequence[Sequence[str]], project_id: str) -> None:
    """Queue one task per group of document ids of ``project_id`` now: a group's documents share
    the embedder's batches (``document_ingest_many``); a group of one is the one-document task."""
    for group in groups:
        if len(group) == 1:
            enqueue_document_ingest(group[0], project_id)
        elif group:
            _async_task(INGEST_MANY_TASK, list(group), project_id,
                        task_name=f"ingest {group[0]} and {len(group) - 1} more", group="memory_engine.ingest")


def enqueue_documents_ingest_on_commit(groups: Sequence[Sequence[str]], project_id: str) -> None:
    """Queue the ingestion of new documents, a task per group, once the transaction commits."""
    transaction.on_commit(partial(enqueue_documents_ingest, [list(group) for group in groups], project_id))


def enqueue_memory_rule_fire(*, rule_id: str, generation_id: str, project_id: str, resume: bool = False) -> None:
    """Queue one rule firing on one generation of the project now (the rules service calls it
    on commit, after recording the firing as pending)."""
    _async_task(RULE_FIRE_TASK, rule_id, generation_id, resume, project_id,
                task_name=f"rule {rule_id} on {generation_id}", group="memory_rules")


def enqueue_memory_map(store_id: str) -> None:
    """Queue the computation of one store's memory map now."""
    _async_task(MEMORY_MAP_TASK, store_id, task_name=f"memory map {store_id}", group="memory_engine.memory_map")


def enqueue_memory_map_on_commit(store_id: str) -> None:
    """Queue the computation of one store's memory map once the current transaction commits."""
    transaction.on_commit(partial(enqueue_memory_map, store_id))


def enqueue_guard_sweep(store_ids: Sequence[str] | None = None) -> None:
    """Queue a sweep of the instruction guard over stored texts without a current finding now
    (``store_ids``: those stores' memories only)."""
    _async_task(GUARD_SWEEP_TASK, list(store_ids) if store_ids is not None else None,
                task_name="instruction guard sweep", group="memory_engine.guard")


def enqueue_entities_documents(document_ids: Sequence[str], project_id: str) -> None:
    """Queue the entity graph's reading of the project's documents' new chunks now (services.entities)."""
    _async_task(ENTITIES_DOCUMENTS_TASK, list(document_ids), project_id, task_name=f"entities of {document_ids[0]}"
                + (f" and {len(document_ids) - 1} more" if len(document_ids) > 1 else ""),
                group="memory_engine.entities")


def enqueue_entities_documents_on_commit(document_ids: Sequence[str], project_id: str) -> None:
    """Queue the entity graph's reading of the project's documents' new chunks once the
    transaction commits."""
    if document_ids and engine_settings.ENTITY_EXTRACTOR:
        transaction.on_commit(partial(enqueue_entities_documents, list(document_ids), project_id))


def ensure_schedules(**kwargs: Any) -> None:
    """post_migrate receiver: create or update the ingestion, rule-firing and memory sweep
    Schedules, so a fresh ``migrate`` is all a deployment needs."""
    try:
        from django_q.models import Schedule
    except ImportError:  # django_q not installed: run `document_sweep` / `memory_sweep` from your own scheduler
        return
    using = kwargs.get("using") or DEFAULT_DB_ALIAS
    minutes = max(1, engine_settings.INGESTION_SWEEP_MINUTES)
    for name, func in ((SWEEP_SCHEDULE_NAME, SWEEP_TASK), (RULE_SWEEP_SCHEDULE_NAME, RULE_SWEEP_TASK)):
        Schedule.objects.using(using).update_or_create(
            name=name,
            defaults={"func": func, "schedule_type": Schedule.MINUTES, "minutes": minutes, "repeats": -1},
        )
    # expired memories and the trash past its window (services.memory_lifecycle.memory_sweep)
    # ... and ephemeral document versions past their TTL (services.retention.document_retention_sweep)
    for name, func in ((MEMORY_SWEEP_SCHEDULE_NAME, MEMORY_SWEEP_TASK),
                       (RETENTION_SWEEP_SCHEDULE_NAME, RETENTION_SWEEP_TASK)):
        Schedule.objects.using(using).update_or_create(
            name=name,
            defaults={"func": func, "schedule_type": Schedule.MINUTES,
                      "minutes": max(1, engine_settings.MEMORY_SWEEP_MINUTES), "repeats": -1},
        )
    # webhook deliveries and their retries (services.webhooks.webhooks_dispatch)
    Schedule.objects.using(using).update_or_create(
        name=WEBHOOKS_SCHEDULE_NAME,
        defaults={"func": WEBHOOKS_TASK, "schedule_type": Schedule.MINUTES,
                  "minutes": max(1, engine_settings.WEBHOOK_DISPATCH_MINUTES), "repeats": -1},
    )
    # the entity graph's reading of new memories, and of chunks whose queued reading was lost
    # (services.entities)
    Schedule.objects.using(using).update_or_create(
        name=ENTITIES_SCHEDULE_NAME,
        defaults={"func": ENTITIES_SWEEP_TASK, "schedule_type": Schedule.MINUTES,
                  "minutes": max(1, engine_settings.ENTITY_SWEEP_MINUTES), "repeats": -1},
    )
    # stored texts without a finding of the instruction guard's current version (services.guard_sweep)
    Schedule.objects.using(using).update_or_create(
        name=GUARD_SWEEP_SCHEDULE_NAME,
        defaults={"func": GUARD_SWEEP_TASK, "schedule_type": Schedule.MINUTES,
                  "minutes": max(1, engine_settings.GUARD_SWEEP_MINUTES), "repeats": -1},
    )
    # resident distillers (services.distillers.distillers_tick); a schedule counts whole minutes
    Schedule.objects.using(using).update_or_create(
        name=DISTILLERS_SCHEDULE_NAME,
        defaults={"func": DISTILLERS_TASK, "schedule_type": Schedule.MINUTES,
                  "minutes": max(1, -(-engine_settings.DISTILLER_TICK_SECONDS // 60)), "repeats": -1},
    )
