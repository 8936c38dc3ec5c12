"""The run token that fences every write of an ingestion after its claim.

:func:`document_ingest_many <memory_engine.services.documents.pipeline.document_ingest_many>`
claims pending documents with a fresh ``run`` token (one per group of documents claimed
together); every later write goes through :func:`owned` or :func:`owned_many`, so a worker
presumed dead (and replaced by the sweep) or a run superseded by a re-ingest can no longer
touch the document.
"""

from __future__ import annotations

import logging
import operator
from functools import reduce
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from memory_engine.exceptions import MemoryEngineError
from memory_engine.models import Chunk, Document, DocumentVersion
from memory_engine.models.documents import DocumentStatus

logger = logging.getLogger("memory_engine.documents")

#: converter_state keys that survive a new run (everything else belongs to one run).
PERSISTENT_STATE = ("base_url", "password", "chunk_request")


class Superseded(Exception):
    """The run lost its claim (re-ingested, deleted, or replaced by the sweep)."""



def owned(project_id: str, document_id: str, run: str) -> Any:
    """The document while ``run`` holds its claim (every statement names the project)."""
    return Document.objects.filter(project_id=project_id, pk=document_id, status=DocumentStatus.PROCESSING,
                                   converter_state__run=run)


def beat(project_id: str, document_id: str, run: str, **fields: Any) -> None:
    if not owned(project_id, document_id, run).update(heartbeat_at=timezone.now(), **fields):
        raise Superseded()


def persistent_state(state: dict[str, Any] | None) -> dict[str, Any]:
    return {key: value for key, value in (state or {}).items() if key in PERSISTENT_STATE}


def owned_many(project_id: str, runs: dict[str, str]) -> Any:
    """:func:`owned` for several documents of the project at once: ``runs`` maps each document to its run."""
    by_run: dict[str, list[str]] = {}
    for document_id, run in runs.items():
        by_run.setdefault(run, []).append(document_id)
    fences = [Q(pk__in=document_ids, converter_state__run=run) for run, document_ids in by_run.items()]
    if not fences:
        return Document.objects.none()
    return Document.objects.filter(reduce(operator.or_, fences), project_id=project_id,
                                   status=DocumentStatus.PROCESSING)


def ingested_versions(project_id: str, document_ids: list[str]) -> dict[str, DocumentVersion]:
    """The version an ingestion of each document derives chunks for: the newest pending one
    (a new capture), else the active one (a re-ingest); one query for all. A document whose
    versions were lost is missing (its chunks then belong to no version)."""
    chosen: dict[str, DocumentVersion] = {}
    versions = DocumentVersion.objects.filter(
        project_id=project_id, document_id__in=document_ids,
        status__in=[DocumentVersion.Status.PENDING, DocumentVersion.Status.ACTIVE])
    for version in versions:
        current = chosen.get(version.document_id)
        if current is None or _ingested_before(current, version):
            chosen[version.document_id] = version
    return chosen


def _ingested_before(current: DocumentVersion, other: DocumentVersion) -> bool:
    """Whether ``other`` wins over ``current``: pending over active, then the newer pending."""
    pending = DocumentVersion.Status.PENDING
    if (current.status == pending) != (other.status == pending):
        return other.status == pending
    return other.number > current.number


def fail_ingestion(project_id: str, document_id: str, run: str | None, error: MemoryEngineError) -> bool:
    """Mark failed with ``error = {code, message, details}`` of ``error`` (fenced by ``run`` when
    given); the previous chunks, if any, stay searchable."""
    with transaction.atomic():
        query = owned(project_id, document_id, run) if run else Document.objects.filter(project_id=project_id,
                                                                                          pk=document_id)
        document = query.select_for_update().first()
        if document is None:
            return False
        kept = Chunk.objects.filter(project_id=project_id, document=document, generation__isnull=True)
        count = kept.count()
        document.status = DocumentStatus.FAILED
        document.error = error.as_dict()
        document.total_chunks = document.indexed_chunks = count
        document.unembedded_chunks = kept.filter(embedding__isnull=True).count() if count else 0
        document.heartbeat_at = timezone.now()
        document.converter_state = persistent_state(document.converter_state)
        document.save()
        # A new capture that failed never becomes live; the active version stays.
        DocumentVersion.objects.filter(project_id=project_id, document=document,
                                       status=DocumentVersion.Status.PENDING).update(
            status=DocumentVersion.Status.FAILED, error=error.as_dict())
    logger.info("ingestion failed", extra={"document_id": document_id, "code": error.code})
    return True
