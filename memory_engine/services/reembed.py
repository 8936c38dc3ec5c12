"""Re-embedding with the active model: fill vectors that failed at write time, or redo them all.

A change of model (or dimension) is not done here: it goes through the embedding-model
registry (memory_engine.services.embedding_models), which fills side storage while search
keeps serving. Both memory contents and document chunks are covered. Rows are embedded in batches
outside any transaction and written back one batch at a time; a failing batch is
counted and left for the next run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import Q, QuerySet

from memory_engine.conf import engine_settings
from memory_engine.models import Chunk, Document, MemoryContent
from memory_engine.providers.embeddings import EmbeddingError, get_embedding_provider, require_embedding_provider

logger = logging.getLogger("memory_engine.reembed")

VECTOR_TABLES = (
    ("memory_engine_memorycontent", "me_content_embedding_hnsw"),
    ("memory_engine_chunk", "me_chunk_embedding_hnsw"),
)


@dataclass
class ReembedReport:
    embedded: dict[str, int] = field(default_factory=lambda: {"memory_contents": 0, "chunks": 0})
    failed: dict[str, int] = field(default_factory=lambda: {"memory_contents": 0, "chunks": 0})
    errors: list[str] = field(default_factory=list)


def pending_querysets(*, missing_only: bool, store_ids: list[str] | None = None,
                      document_ids: list[str] | None = None) -> dict[str, QuerySet]:
    """The rows to (re-)embed, per kind, restricted to the given stores/documents if any."""
    contents = MemoryContent.objects.all()
    chunks = Chunk.objects.all()
    if store_ids is not None or document_ids is not None:
        contents = contents.filter(store_id__in=store_ids or [])
        chunks = chunks.filter(document_id__in=document_ids or [])
    if missing_only:
        provider = get_embedding_provider()
        model = provider.model_name if provider is not None else ""
        contents = contents.filter(Q(embedding__isnull=True) | ~Q(embedding_model=model))
        chunks = chunks.filter(Q(embedding__isnull=True) | ~Q(embedding_model=model))
    return {"memory_contents": contents.order_by("pk"), "chunks": chunks.order_by("pk")}


def reembed(*, missing_only: bool = True, store_ids: list[str] | None = None,
            document_ids: list[str] | None = None, batch_size: int | None = None,
            on_start: Callable[[str, int], Any] | None = None,
            on_progress: Callable[[str, int], Any] | None = None) -> ReembedReport:
    """Embed rows lacking a vector of the active model (or, with missing_only=False, every row)
    with the active model, in place. Raises EmbeddingNotConfigured without a provider.
    """
    provider = require_embedding_provider()
    report = ReembedReport()
    batch_size = batch_size or engine_settings.EMBEDDING_BATCH_SIZE
    for kind, queryset in pending_querysets(missing_only=missing_only, store_ids=store_ids,
                                            document_ids=document_ids).items():
        ids = list(queryset.values_list("pk", flat=True))
        if on_start:
            on_start(kind, len(ids))
        model = queryset.model
        for start in range(0, len(ids), batch_size):
            rows = list(model.objects.filter(pk__in=ids[start:start + batch_size]).only("pk", "text"))
            try:
                vectors = provider.embed_documents([row.text for row in rows])
            except EmbeddingError as exc:
                report.failed[kind] += len(rows)
                report.errors.append(str(exc))
                logger.warning("re-embedding a batch of %s failed: %s", kind, exc)
            else:
                with transaction.atomic():
                    for row, vector in zip(rows, vectors, strict=True):
                        model.objects.filter(pk=row.pk).update(embedding=vector,
                                                               embedding_model=provider.model_name)
                report.embedded[kind] += len(rows)
            if on_progress:
                on_progress(kind, len(rows))
    _refresh_document_counts(document_ids)
    return report


def reembed_missing(*, document_ids: list[str] | None = None, store_ids: list[str] | None = None) -> ReembedReport:
    """Shortcut used by the admin and the API: fill missing vectors in the given scope."""
    return reembed(missing_only=True, document_ids=document_ids, store_ids=store_ids)


def _refresh_document_counts(document_ids: list[str] | None) -> None:
    documents = Document.objects.all() if document_ids is None else Document.objects.filter(pk__in=document_ids)
    for document in documents.filter(unembedded_chunks__gt=0):
        missing = Chunk.objects.filter(document=document, generation__isnull=True, embedding__isnull=True).count()
        Document.objects.filter(pk=document.pk).update(unembedded_chunks=missing)


__all__ = ["ReembedReport", "reembed", "reembed_missing"]
