"""Recovery: the sweep that re-runs stalled ingestions and times out pending converters."""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from memory_engine.conf import engine_settings
from memory_engine.db import across_projects
from memory_engine.exceptions import ConverterTimeout, IngestionStalled
from memory_engine.models import Document
from memory_engine.models.documents import DocumentStatus
from memory_engine.queue import enqueue_document_ingest_on_commit

from .runs import fail_ingestion, persistent_state

logger = logging.getLogger("memory_engine.documents")


def document_sweep() -> dict[str, int]:
    """Re-run stalled ingestions, fail the hopeless ones, time out pending converters.

    * processing, waiting for a converter callback past its expiry -> failed CONVERTER_TIMEOUT;
    * processing with a heartbeat older than INGESTION_HEARTBEAT_TIMEOUT (worker died) ->
      pending again and re-enqueued, or failed INGESTION_STALLED after INGESTION_MAX_ATTEMPTS;
    * pending for longer than the timeout (its task was lost) -> enqueued again.
    """
    now = timezone.now()
    stale_before = now - timedelta(seconds=engine_settings.INGESTION_HEARTBEAT_TIMEOUT)
    max_attempts = engine_settings.INGESTION_MAX_ATTEMPTS
    counts = {"requeued": 0, "failed": 0, "timed_out": 0, "skipped": 0}
    # every project's documents (statements across a distributed database's nodes), then each
    # document's work on its project's rows
    with across_projects():
        processing = list(Document.objects.filter(status=DocumentStatus.PROCESSING).only(
            "pk", "project_id", "converter_state", "heartbeat_at"))
        stuck = list(Document.objects.filter(status=DocumentStatus.PENDING, updated_at__lt=stale_before)
                     .values_list("pk", "project_id"))
    for document in processing:
        state = document.converter_state or {}
        if state.get("awaiting_callback"):
            expires = (state.get("callback") or {}).get("expires_at", 0)
            if expires < time.time() and fail_ingestion(document.project_id, document.pk, state.get("run"),
                                                        ConverterTimeout(
                "The converter said it would deliver the pages later but nothing arrived before the callback "
                "URL expired; check the converter, then re-ingest the document.",
                details={"expired_at": expires},
            )):
                counts["timed_out"] += 1
        elif document.heartbeat_at is None or document.heartbeat_at < stale_before:
            counts[_recover(document.project_id, document.pk, stale_before, max_attempts)] += 1
    for document_id, project_id in stuck:
        # Touch the row so a long queue gets one extra task per timeout, not one per sweep;
        # a duplicate is harmless (the claim turns it into a no-op).
        if Document.objects.filter(project_id=project_id, pk=document_id, status=DocumentStatus.PENDING,
                                   updated_at__lt=stale_before).update(updated_at=now):
            enqueue_document_ingest_on_commit(document_id, project_id)
            counts["requeued"] += 1
    if any(counts.values()):
        logger.info("ingestion sweep: %s", counts)
    return counts


def _recover(project_id: str, document_id: str, stale_before: Any, max_attempts: int) -> str:
    with transaction.atomic():
        document = Document.objects.select_for_update(skip_locked=True).filter(
            project_id=project_id, pk=document_id, status=DocumentStatus.PROCESSING).first()
        if document is None or (document.heartbeat_at and document.heartbeat_at >= stale_before):
            return "skipped"  # finished, re-ingested or claimed by another sweep meanwhile
        if document.attempts >= max_attempts:
            run = (document.converter_state or {}).get("run")
            fail_ingestion(project_id, document.pk, run, IngestionStalled(
                f"The worker stopped responding {document.attempts} times (no heartbeat for "
                f"{engine_settings.INGESTION_HEARTBEAT_TIMEOUT}s); the file may be too slow to process. "
                "Check the worker logs, then re-ingest it.", details={"attempts": document.attempts}))
            return "failed"
        document.status = DocumentStatus.PENDING
        document.converter_state = persistent_state(document.converter_state)
        document.heartbeat_at = timezone.now()
        document.save()
        enqueue_document_ingest_on_commit(document.pk, project_id)
        return "requeued"
