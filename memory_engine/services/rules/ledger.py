"""The firing ledger: ``generation.extraction[rule_id]`` pending markers and counts, the
enqueueing of firings, and the sweep that re-enqueues lost ones."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from memory_engine.conf import engine_settings
from memory_engine.db import across_projects
from memory_engine.exceptions import MemoryEngineError, RuleFiringStalled
from memory_engine.models import Generation
from memory_engine.queue import enqueue_memory_rule_fire

logger = logging.getLogger("memory_engine.rules")

#: ``extraction[rule_id]["status"]`` of a firing enqueued and not finished yet.
PENDING = "pending"


def new_counts() -> dict[str, Any]:
    return {"created": 0, "superseded": 0, "skipped": 0, "failed": 0, "error": None}


def error_entry(error: MemoryEngineError) -> dict[str, str]:
    """``extraction[rule_id]["error"]``: the code and (shortened) message of ``error``."""
    return {"code": error.code, "message": error.message[:500]}


def enqueue_rule_firing(*, project_id: str, rule_id: str, generation_id: str, attempt: int = 1) -> None:
    """Record the firing as pending on ``generation.extraction`` and queue its task (which
    carries the project: every statement of a firing names it, docs/scaling.md).

    The pending entry (``{"status": "pending", "enqueued_at", "attempts"}``) is what
    :func:`rule_firing_sweep` looks for: a task whose worker died never replaces it with
    counts, so the sweep enqueues it again.
    """
    mark_firing_pending(project_id=project_id, rule_id=rule_id, generation_id=generation_id, attempt=attempt)
    enqueue_memory_rule_fire(rule_id=rule_id, generation_id=generation_id, project_id=project_id,
                             resume=attempt > 1)


def _generation(project_id: str, generation_id: str) -> QuerySet[Generation]:
    """The generation, by its project and id (a statement on the project's node)."""
    return Generation.objects.filter(project_id=project_id, pk=generation_id)


@transaction.atomic
def record_rule_counts(*, project_id: str, generation_id: str, rule_id: str, counts: dict[str, Any]) -> None:
    """Set ``extraction[rule_id]`` under a row lock: firings of several rules finish concurrently.

    The counts *replace* the entry (a pending marker, or the counts of an earlier run), so a
    firing run twice is never counted twice.
    """
    generation = _generation(project_id, generation_id).select_for_update().only("id", "extraction").first()
    if generation is None:
        return
    extraction = dict(generation.extraction or {})
    extraction[rule_id] = counts
    _generation(project_id, generation_id).update(extraction=extraction)


def mark_firing_pending(*, project_id: str, rule_id: str, generation_id: str, attempt: int = 1) -> None:
    """``extraction[rule_id] = {"status": "pending", "enqueued_at": <iso>, "attempts": n}``."""
    record_rule_counts(project_id=project_id, generation_id=generation_id, rule_id=rule_id, counts={
        "status": PENDING, "enqueued_at": timezone.now().isoformat(), "attempts": attempt,
    })


@transaction.atomic
def drop_pending(*, project_id: str, generation_id: str, rule_id: str) -> None:
    """Forget the pending marker of a firing that will not run (its rule was disabled or deleted)."""
    generation = _generation(project_id, generation_id).select_for_update().only("id", "extraction").first()
    if generation is not None and is_pending((generation.extraction or {}).get(rule_id)):
        extraction = dict(generation.extraction)
        del extraction[rule_id]
        _generation(project_id, generation_id).update(extraction=extraction)


def is_pending(entry: Any) -> bool:
    return isinstance(entry, dict) and entry.get("status") == PENDING


def rule_firing_sweep(*, now: datetime | None = None) -> dict[str, int]:
    """Re-enqueue firings still pending after ``RULE_FIRING_TIMEOUT`` seconds (their task
    was lost: the worker was killed, or the queue lost it); after ``RULE_FIRING_MAX_ATTEMPTS``
    record ``RULE_FIRING_STALLED`` instead. Runs as a django-q2 schedule
    (``memory_engine.tasks.rule_firing_sweep_task``)."""
    now = now or timezone.now()
    stale_before = now - timedelta(seconds=engine_settings.RULE_FIRING_TIMEOUT)
    max_attempts = engine_settings.RULE_FIRING_MAX_ATTEMPTS
    counts = {"requeued": 0, "stalled": 0}
    # jsonpath over each generation's extraction: only generations with a pending firing match.
    # (every project's generations: then each one's claim is a statement on its project's node)
    with across_projects():
        candidates = list(Generation.objects.extra(
            where=["extraction @? '$.* ? (@.status == \"pending\")'"]
        ).values_list("project_id", "pk"))
    for project_id, generation_id in candidates:
        for rule_id, attempt in _claim_stale_firings(project_id, generation_id, stale_before, max_attempts, now):
            if attempt is None:
                counts["stalled"] += 1
                continue
            transaction.on_commit(partial(enqueue_rule_firing, project_id=project_id, rule_id=rule_id,
                                          generation_id=generation_id, attempt=attempt), robust=True)
            counts["requeued"] += 1
    if any(counts.values()):
        logger.warning("rule firing sweep: %s", counts, extra={"counts": counts})
    return counts


@transaction.atomic
def _claim_stale_firings(project_id: str, generation_id: str, stale_before: datetime, max_attempts: int,
                         now: datetime) -> list[tuple[str, int | None]]:
    """Under the row lock: the stale pending entries of one generation, as (rule id, next
    attempt) to re-enqueue or (rule id, None) when given up (recorded as stalled). Touching
    ``enqueued_at`` here keeps a concurrent sweep from enqueueing the same firing twice."""
    generation = _generation(project_id, generation_id).select_for_update(skip_locked=True).only(
        "id", "extraction").first()
    if generation is None:
        return []
    extraction = dict(generation.extraction or {})
    claimed: list[tuple[str, int | None]] = []
    for rule_id, entry in extraction.items():
        if not is_pending(entry):
            continue
        try:
            enqueued_at = datetime.fromisoformat(entry.get("enqueued_at") or "")
        except ValueError:
            enqueued_at = None
        if enqueued_at is not None and enqueued_at >= stale_before:
            continue
        attempts = int(entry.get("attempts") or 1)
        if attempts >= max_attempts:
            extraction[rule_id] = {**new_counts(), "error": error_entry(RuleFiringStalled(
                f"The worker running this rule stopped {attempts} times without finishing (no result after "
                f"{engine_settings.RULE_FIRING_TIMEOUT}s each); check the worker logs, then run the rule again "
                "from the admin."))}
            claimed.append((rule_id, None))
        else:
            extraction[rule_id] = {**entry, "enqueued_at": now.isoformat()}
            claimed.append((rule_id, attempts + 1))
    if claimed:
        _generation(project_id, generation_id).update(extraction=extraction)
    return claimed
