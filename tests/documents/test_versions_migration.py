"""Migration 0007: every existing document gets a version 1 that holds its chunks."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from memory_engine.models import Chunk, Document, DocumentVersion

BEFORE = [("memory_engine", "0006_memory_lifecycle")]
AFTER = [("memory_engine", "0007_document_versions")]


def migrate(targets: list[tuple[str, str]]) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return executor


@pytest.mark.django_db(transaction=True)
def test_backfill_gives_every_document_version_one():
    try:
        executor = migrate(BEFORE)
        old = executor.loader.project_state(BEFORE).apps
        project = old.get_model("memory_engine", "Project").objects.create(name="migrated")
        documents = old.get_model("memory_engine", "Document").objects
        chunk = old.get_model("memory_engine", "Chunk").objects
        common = {"project": project, "content_type": "text/plain", "chunk_strategy": "whole", "sha256": "ab" * 32}
        ready = documents.create(path="/ready.txt", status="ready", **common)
        chunk.create(document=ready, chunk_index=0, text="first chunk")
        chunk.create(document=ready, chunk_index=1, text="second chunk")
        reingesting = documents.create(path="/again.txt", status="processing", **common)
        chunk.create(document=reingesting, chunk_index=0, text="old text")
        failed = documents.create(path="/failed.txt", status="failed", **common)
        pending = documents.create(path="/pending.txt", status="pending", **common)
    finally:
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes("memory_engine"))
    expected = {ready.pk: "active", reingesting.pk: "active", failed.pk: "failed", pending.pk: "pending"}
    for document_id, status in expected.items():
        version = DocumentVersion.objects.get(document_id=document_id)
        assert (version.number, version.status, version.sha256) == (1, status, "ab" * 32), document_id
        document = Document.objects.get(pk=document_id)
        assert document.active_version_id == (version.pk if status == "active" else None)
        assert document.source == "upload" and document.external_ref is None
    assert set(Chunk.objects.filter(document_id=ready.pk).values_list("version__number", flat=True)) == {1}
    assert not Chunk.objects.filter(version__isnull=True).exists()
