"""The ``wait`` rule: ingest in the caller's process, or queue the work for a worker."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memory_engine.conf import engine_settings
from memory_engine.models import Document

from .batch import document_create_many
from .intake import Capture, CaptureStatus
from .pipeline import document_ingest, document_ingest_many


def document_ingest_or_enqueue(start: Callable[..., Document], /, *, wait: bool, size_bytes: int | None,
                               **arguments: Any) -> tuple[Document, bool]:
    """Start an ingestion with ``start(**arguments)`` (:func:`document_create`,
    :func:`document_create_text` or :func:`document_reingest`) and return ``(document,
    ran_inline)``.

    With ``wait`` the pipeline runs here, after ``start`` committed, so the document comes
    back ready or failed; without it (or when ``size_bytes`` is over
    SYNC_INGESTION_MAX_BYTES, so a request never holds a worker thread for a large file)
    the ingestion is queued on commit. ``size_bytes=None`` sets no limit (an operator's
    command waits for anything).
    """
    limit = engine_settings.SYNC_INGESTION_MAX_BYTES
    inline = bool(wait) and (size_bytes is None or size_bytes <= limit)
    document = start(enqueue=not inline, **arguments)
    if inline:
        document = document_ingest(document_id=document.pk, project_id=document.project_id) or document
    return document, inline


def document_capture_or_enqueue(start: Callable[..., Capture], /, *, wait: bool, size_bytes: int | None,
                                **arguments: Any) -> tuple[Capture, bool]:
    """:func:`document_ingest_or_enqueue` for a capture (:func:`document_capture` or
    :func:`document_capture_text`): a ``noop`` ingests nothing; otherwise the capture comes
    back with the document and its new version as they stand after an inline ingestion."""
    limit = engine_settings.SYNC_INGESTION_MAX_BYTES
    inline = bool(wait) and (size_bytes is None or size_bytes <= limit)
    capture = start(enqueue=not inline, **arguments)
    if capture.status == CaptureStatus.NOOP:
        return capture, False
    if inline:
        capture.document = (document_ingest(document_id=capture.document.pk, project_id=capture.document.project_id)
                            or capture.document)
        capture.version.refresh_from_db()
    return capture, inline


def documents_create_or_enqueue(*, wait: bool, size_bytes: int, **arguments: Any) -> tuple[list[Document], bool]:
    """:func:`document_create_many` with the ``wait`` rule of :func:`document_ingest_or_enqueue`
    (``size_bytes``: the batch's total): inline, the documents go through one
    :func:`document_ingest_many` call, so they share the embedder's batches."""
    inline = bool(wait) and size_bytes <= engine_settings.SYNC_INGESTION_MAX_BYTES
    documents = document_create_many(enqueue=not inline, **arguments)
    if inline:
        ingested = document_ingest_many(document_ids=[document.pk for document in documents],
                                        project_id=arguments["project"].pk)
        documents = [after or before for after, before in zip(ingested, documents, strict=True)]
    return documents, inline
