"""The swap, an ingestion run's last step (memory_engine.services.documents.pipeline runs it):
the instruction guard's finding on every new chunk, then one transaction that makes the documents
ready, takes their live chunks out, puts the new ones in and activates their pending versions."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.db import transaction
from django.db.models import OuterRef, Subquery
from django.utils import timezone

from memory_engine.chunking import ChunkSpec
from memory_engine.db import delete_in_project, insert_rows
from memory_engine.instruction_guard import findings, trusted_finding
from memory_engine.models import Chunk, Document, DocumentVersion, IngestionRule
from memory_engine.models.documents import DocumentStatus
from memory_engine.queue import enqueue_entities_documents_on_commit

from .runs import ingested_versions, owned_many, persistent_state

logger = logging.getLogger("memory_engine.documents")

#: One stored vector while a run waits for its swap (a float32 row).
Vector = np.ndarray


@dataclass
class Embedded:
    """A claimed document and its chunks, with their vectors once embedded (the shared queue
    fills them in)."""

    document: Document
    run: str
    specs: list[ChunkSpec]
    vectors: list[Vector | None] = field(default_factory=list)
    model: str = ""
    crash: Exception | None = None  # an embedder crash on this document alone, raised at its swap
    #: the instruction guard's finding on each chunk (None: the classifier could not run; the chunk
    #: is judged when read, or by the sweep)
    guards: list[dict[str, Any] | None] = field(default_factory=list)


def judge_chunks(items: list[Embedded]) -> None:
    """The instruction guard's finding on every chunk, before the swap's transaction (as the
    embedder): a chunk that reads as instructions to an AI is stored and kept out of every read.
    The chunks of a document whose ingestion rule trusts it are not judged."""
    todo = [item for item in items if item.crash is None and len(item.guards) != len(item.specs)]
    trusted = set(trusted_documents([item.document.pk for item in todo], project_id=project_of(todo)))
    for item in todo:
        if item.document.pk in trusted:
            item.guards = [trusted_finding([spec.text]) for spec in item.specs]
    todo = [item for item in todo if item.document.pk not in trusted]
    found = iter(findings([[spec.text] for item in todo for spec in item.specs]))
    for item in todo:
        item.guards = [finding.as_json() if finding.by else None for finding in (next(found) for _ in item.specs)]


def project_of(items: Sequence[Embedded]) -> str | None:
    """The one project of an ingestion's documents (an ingestion never mixes projects: each of its
    statements names that project); None for no documents."""
    projects = {item.document.project_id for item in items}
    assert len(projects) <= 1, f"one ingestion, several projects: {sorted(projects)}"
    return next(iter(projects), None)


def trusted_documents(document_ids: Sequence[str], *, project_id: str | None = None) -> list[str]:
    """Those of ``document_ids`` (of ``project_id`` when given) whose ingestion rule trusts them
    (``guard_policy`` trust)."""
    if not document_ids:
        return []
    documents = Document.objects.filter(pk__in=list(document_ids),
                                        ingestion_rule__guard_policy=IngestionRule.GuardPolicy.TRUST)
    if project_id is not None:
        documents = documents.filter(project_id=project_id, ingestion_rule__project_id=project_id)
    return list(documents.values_list("pk", flat=True))


def swap(items: list[Embedded]) -> None:
    """One transaction: the documents ready, their old chunks out, their new chunks in.

    The documents still owned by their runs are locked first (the others were re-ingested,
    deleted or handed back by the sweep meanwhile: superseded, left alone); the locks hold
    until the commit, so a re-ingest or the sweep cannot interleave with the swap. A
    document whose embedder call crashed raises that crash here.
    """
    for item in items:
        if item.crash is not None:
            raise item.crash
    now = timezone.now()
    with transaction.atomic():
        project_id = project_of(items)
        assert project_id is not None
        locked = set(owned_many(project_id, {item.document.pk: item.run for item in items}).select_for_update()
                     .values_list("pk", flat=True))
        for item in items:
            if item.document.pk not in locked:
                logger.info("ingestion run superseded", extra={"document_id": item.document.pk, "run": item.run})
        items = [item for item in items if item.document.pk in locked]
        if not items:
            return
        ids = [item.document.pk for item in items]
        versions = ingested_versions(project_id, ids)
        documents = []
        for item in items:
            document = item.document
            document.status, document.error = DocumentStatus.READY, None
            document.total_chunks = document.indexed_chunks = len(item.specs)
            document.unembedded_chunks = sum(vector is None for vector in item.vectors)
            document.ingested_at = document.heartbeat_at = document.updated_at = now
            document.converter_state = persistent_state(document.converter_state)
            document.entities_at = None  # the new chunks are the entity graph's to read
            documents.append(document)
        update_alike(documents, ["status", "error", "total_chunks", "indexed_chunks", "unembedded_chunks",
                                  "ingested_at", "heartbeat_at", "converter_state", "updated_at", "entities_at"])
        enqueue_entities_documents_on_commit(ids, project_id)
        # The live version's chunks give way to the new version's (a superseded version keeps
        # its row and raw capture, not its chunks): search sees the old version or the new one.
        # Staged generations' chunks (``generation`` set) are not the live version's: they stay.
        delete_in_project(Chunk.objects.filter(document_id__in=ids, generation__isnull=True), project_id)
        insert_rows([
            Chunk(document_id=item.document.pk, project_id=item.document.project_id,
                  version=versions.get(item.document.pk),
                  chunk_index=spec.chunk_index, page=spec.page, text=spec.text, embedding=vector,
                  embedding_model=item.model if vector is not None else "", guard=guard)
            for item in items
            for spec, vector, guard in zip(item.specs, item.vectors, item.guards or [None] * len(item.specs),
                                           strict=True)
        ])
        activated = {version.document_id: version for version in versions.values()
                     if version.status == DocumentVersion.Status.PENDING}
        if activated:
            versions_of_project = DocumentVersion.objects.filter(project_id=project_id)
            versions_of_project.filter(document_id__in=list(activated), status=DocumentVersion.Status.ACTIVE).update(
                status=DocumentVersion.Status.SUPERSEDED)
            versions_of_project.filter(pk__in=[version.pk for version in activated.values()]).update(
                status=DocumentVersion.Status.ACTIVE, activated_at=now, error=None)
            # Each of these documents now has exactly one active version: the one just activated.
            Document.objects.filter(project_id=project_id, pk__in=list(activated)).update(active_version=Subquery(
                versions_of_project.filter(document_id=OuterRef("pk"), status=DocumentVersion.Status.ACTIVE)
                .values("pk")[:1]))
            for item in items:
                if item.document.pk in activated:  # (the old one is not loaded: a read by its id alone)
                    item.document.active_version = activated[item.document.pk]


def update_alike(documents: list[Document], fields: list[str]) -> None:
    """Write ``fields`` of ``documents`` with one UPDATE per distinct set of values (documents of
    one batch mostly end alike: usually one statement, at worst one per document)."""
    alike: dict[str, tuple[dict[str, Any], list[str]]] = {}
    for document in documents:
        values = {name: getattr(document, name) for name in fields}
        key = json.dumps(values, sort_keys=True, default=str)
        alike.setdefault(key, (values, []))[1].append(document.pk)
    projects = {document.project_id for document in documents}
    for values, document_ids in alike.values():
        Document.objects.filter(project_id__in=projects, pk__in=document_ids).update(**values)
