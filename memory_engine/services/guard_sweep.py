"""Judging stored texts again when the instruction guard changes.

Every text is judged once, where it is written (the write funnel, document ingestion), and its
finding is stored with it (the ``guard`` column of content rows, memories and chunks); reads apply
their bar to it (memory_engine.instruction_guard). A finding names the guard's version: when the
normaliser, the rules, the lexicons or the classifier change, the version changes, and until a row
is judged again a read judges it itself (kept in the process's caches), so nothing unjudged reaches
a model, only more slowly. This sweep judges those rows in batches, outside any long
transaction: on its django-q2 schedule (GUARD_SWEEP_MINUTES, at most GUARD_SWEEP_ROWS rows a
run), from ``manage.py memory_engine_guard_sweep`` (all of them, with progress) and from the
admin's action on memory stores.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from django.db.models import Model, Q, QuerySet

from memory_engine.db import across_projects
from memory_engine.instruction_guard import findings, trusted_finding, version
from memory_engine.instruction_guard.classifier import SCREEN_MODEL
from memory_engine.models import Chunk, Memory, MemoryContent
from memory_engine.services.documents.pipeline import trusted_documents

__all__ = ["GUARDED_TABLES", "guard_counts", "guard_sweep", "unjudged"]

logger = logging.getLogger("memory_engine.guard_sweep")

#: What holds a finding: (name, model, the fields it covers).
GUARDED_TABLES: tuple[tuple[str, type[Model], tuple[str, ...]], ...] = (
    ("memory_contents", MemoryContent, ("text",)),
    ("chunks", Chunk, ("text",)),
    ("memories", Memory, ("title", "tags", "metadata")),
)
BATCH_ROWS = 200


def unjudged(model: type[Model]) -> QuerySet[Any]:
    """The rows of ``model`` without a finding of the guard's current version."""
    return model._default_manager.filter(Q(guard__isnull=True) | ~Q(guard__version=version()))


def _scoped(queryset: QuerySet[Any], store_ids: Sequence[str] | None) -> QuerySet[Any]:
    if store_ids is None:
        return queryset
    if queryset.model is Chunk:
        return queryset.none()  # a store holds no chunks
    return queryset.filter(store_id__in=list(store_ids))


def guard_counts(*, store_ids: Sequence[str] | None = None) -> dict[str, dict[str, int]]:
    """``{table: {"rows", "current"}}``: how many rows hold a finding of the guard's current version."""
    counts = {}
    for name, model, _ in GUARDED_TABLES:
        rows = _scoped(model._default_manager.all(), store_ids)
        total = rows.count()
        counts[name] = {"rows": total, "current": total - _scoped(unjudged(model), store_ids).count()}
    return counts


def _judge_batch(model: type[Model], fields: tuple[str, ...], project_id: str, ids: Sequence[str]) -> int:
    """Judge project ``project_id``'s rows ``ids`` of ``model``; how many now hold a finding."""
    vectors = "text" in fields
    only = ["pk", *fields, *(["embedding", "embedding_model"] if vectors else []),
            *(["document_id"] if model is Chunk else [])]
    rows: list[Any] = list(model._default_manager.filter(project_id=project_id, pk__in=ids).only(*only))
    trusted: set[str] = set()
    if model is Chunk:  # the chunks of a document its ingestion rule trusts are not judged
        trusted = set(trusted_documents(list({row.document_id for row in rows}), project_id=project_id))
        for row in rows:
            if row.document_id in trusted:
                row.guard = trusted_finding([row.text])
    judging = [row for row in rows if model is not Chunk or row.document_id not in trusted]
    screen = {row.text: list(row.embedding) for row in judging
              if vectors and row.embedding is not None and row.embedding_model == SCREEN_MODEL}
    found = findings([[getattr(row, field) for field in fields] for row in judging], vectors=screen)
    done = [row for row in rows if model is Chunk and row.document_id in trusted]
    for row, finding in zip(judging, found, strict=True):
        if finding.by:
            row.guard = finding.as_json()
            done.append(row)
    model._default_manager.filter(project_id=project_id).bulk_update(done, ["guard"])
    return len(done)


def guard_sweep(*, store_ids: Sequence[str] | None = None, limit: int | None = None,
                batch_size: int = BATCH_ROWS, on_start: Callable[[str, int], Any] | None = None,
                on_progress: Callable[[str, int], Any] | None = None) -> dict[str, int]:
    """Judge the rows without a finding of the current version, ``batch_size`` a statement, at
    most ``limit`` in all; ``{table: rows judged}``. A content row or chunk whose vector the
    engine's default embedder made is screened on it (instruction_guard's screen), as at write.
    A row the classifier could not judge is left for the next run."""
    judged: dict[str, int] = {}
    left = limit
    for name, model, fields in GUARDED_TABLES:
        with across_projects():  # every project's unjudged rows; each batch is one project's
            found_ids = list(_scoped(unjudged(model), store_ids).order_by("pk")
                             .values_list("project_id", "pk")[:left])
        judged[name] = 0
        if on_start:
            on_start(name, len(found_ids))
        by_project: dict[str, list[str]] = {}
        for project_id, pk in found_ids:
            by_project.setdefault(project_id, []).append(pk)
        for project_id, ids in by_project.items():
            for start in range(0, len(ids), batch_size):
                judged[name] += _judge_batch(model, fields, project_id, ids[start:start + batch_size])
                if on_progress:
                    on_progress(name, len(ids[start:start + batch_size]))
        if left is not None:
            left = max(0, left - len(found_ids))
    if any(judged.values()):
        logger.info("instruction guard sweep judged %s", judged, extra={"judged": judged, "version": version()})
    return judged
