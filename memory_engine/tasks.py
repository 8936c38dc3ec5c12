"""django-q2 entry points: they take ids, re-fetch rows and call a service.

Enqueue them with ``transaction.on_commit`` (the services do), never with model
instances. The ingestion sweep is a django-q2 ``Schedule`` created on ``post_migrate``
(:func:`ensure_schedules`), so a fresh ``migrate`` is all a deployment needs.
"""

from __future__ import annotations

from typing import Any

INGEST_TASK = "memory_engine.tasks.document_ingest_task"
SWEEP_TASK = "memory_engine.tasks.document_sweep_task"
SWEEP_SCHEDULE_NAME = "memory_engine: ingestion sweep"
RULE_SWEEP_TASK = "memory_engine.tasks.rule_firing_sweep_task"
RULE_SWEEP_SCHEDULE_NAME = "memory_engine: rule firing sweep"


def memory_rule_fire_task(rule_id: str, generation_id: str, resume: bool = False) -> dict[str, Any] | None:
    """Run one memory rule on one completed generation (enqueued by the signal receiver,
    or again by the rule-firing sweep with ``resume=True``)."""
    from memory_engine.services.rules import memory_rule_fire

    return memory_rule_fire(rule_id=rule_id, generation_id=generation_id, resume=resume)


def rule_firing_sweep_task() -> dict[str, int]:
    """Re-enqueue rule firings whose worker died (still pending after RULE_FIRING_TIMEOUT)."""
    from memory_engine.services.rules import rule_firing_sweep

    return rule_firing_sweep()


def document_ingest_task(document_id: str) -> str | None:
    """Ingest one document; returns its final status (for the django-q2 task log)."""
    from memory_engine.services.documents import document_ingest

    document = document_ingest(document_id=document_id)
    return document.status if document is not None else None


def document_sweep_task() -> dict[str, int]:
    """Re-run stalled ingestions and time out pending converters."""
    from memory_engine.services.documents import document_sweep

    return document_sweep()


def enqueue_document_ingest(document_id: str) -> None:
    """Queue the ingestion of one document (call it from ``transaction.on_commit``)."""
    from django_q.tasks import async_task

    async_task(INGEST_TASK, document_id, task_name=f"ingest {document_id}", group="memory_engine.ingest")


def ensure_schedules(**kwargs: Any) -> None:
    """post_migrate receiver: create or update the ingestion and rule-firing sweep Schedules."""
    from django.db import DEFAULT_DB_ALIAS

    from memory_engine.conf import engine_settings

    try:
        from django_q.models import Schedule
    except ImportError:  # django_q not installed: run `document_sweep` from your own scheduler
        return
    using = kwargs.get("using") or DEFAULT_DB_ALIAS
    minutes = max(1, int(engine_settings.INGESTION_SWEEP_MINUTES))
    for name, func in ((SWEEP_SCHEDULE_NAME, SWEEP_TASK), (RULE_SWEEP_SCHEDULE_NAME, RULE_SWEEP_TASK)):
        Schedule.objects.using(using).update_or_create(
            name=name,
            defaults={"func": func, "schedule_type": Schedule.MINUTES, "minutes": minutes, "repeats": -1},
        )
