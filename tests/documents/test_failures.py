"""Ingestion failures the other suites do not reach: the stored file gone (FILE_MISSING), an
unexpected error inside the pipeline (INGESTION_ERROR, the catch-all that keeps a document
from staying ``processing``), and what search sees of a failed document: nothing of the run
that failed; after a failed re-ingest, the previous chunks (docs/decisions.md)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from memory_engine.models import Chunk, Document
from memory_engine.services.documents import document_ingest
from tests.conftest import use_embedder

from .providers import ON_BATCH

DOCUMENTS = "/api/v1/documents"
SEARCH = "/api/v1/knowledge/search"
TEXT = ("The lighthouse keeper writes the weather into the log at dawn. "
        "Storm warnings go to the harbour master before noon. "
        "Lamp oil is ordered on the first Monday of every month.")


@pytest.fixture
def crashing_embedder(settings: Any) -> Iterator[list[Any]]:
    """The hashing embedder with hooks; append a hook that raises to crash a batch."""
    use_embedder(settings, "tests.documents.providers.ProgressRecordingProvider", MODEL="all-MiniLM-L6-v2")
    ON_BATCH.clear()
    yield ON_BATCH
    ON_BATCH.clear()


def provider_bug(texts: Any) -> None:
    """Not an EmbeddingError: a bug in a provider, which the pipeline cannot expect."""
    raise KeyError("embedding")


def create_text(client: Any, path: str, **fields: Any) -> dict[str, Any]:
    response = client.post(DOCUMENTS, {"content": TEXT, "path": path, "wait": True, **fields}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def chunks_found(client: Any, query: str) -> set[tuple[str, int, str]]:
    response = client.post(SEARCH, {"query": query, "document_paths": ["/"]}, format="json")
    assert response.status_code == 200, response.json()
    return {(hit["document_id"], hit["chunk_index"], hit["text"]) for hit in response.json()["results"]}


def test_a_stored_file_gone_fails_with_file_missing(client: Any, hashing_embedder: None) -> None:
    """Re-ingest through the API after the file left storage: failed with the code and the file's
    name, not a 500 and not stuck in processing."""
    document = create_text(client, "/logs/keeper.txt")
    assert document["status"] == "ready"
    stored = Document.objects.get(pk=document["id"]).file
    stored.storage.delete(stored.name)
    response = client.post(f"{DOCUMENTS}/{document['id']}/ingest", {"wait": True}, format="json")
    assert response.status_code in (200, 201), response.json()
    body = response.json()
    assert body["status"] == "failed" and body["error"]["code"] == "FILE_MISSING"
    assert body["error"]["details"] == {"file": stored.name} and "upload it again" in body["error"]["message"]
    status = client.get(f"{DOCUMENTS}/{document['id']}/status").json()
    assert status["status"] == "failed" and status["error"]["code"] == "FILE_MISSING"


def test_a_document_without_a_stored_file_fails_with_file_missing(project: Any, hashing_embedder: None) -> None:
    document = Document.objects.create(project=project, path="/nofile.txt", content_type="text/plain",
                                       chunk_strategy="whole")
    ingested = document_ingest(document_id=document.pk)
    assert ingested is not None and ingested.status == "failed"
    assert ingested.error["code"] == "FILE_MISSING" and ingested.attempts == 1


def test_an_unexpected_error_fails_the_document_with_ingestion_error(
        client: Any, crashing_embedder: list[Any], caplog: pytest.LogCaptureFixture) -> None:
    crashing_embedder.append(provider_bug)
    with caplog.at_level(logging.ERROR, logger="memory_engine"):
        body = create_text(client, "/logs/crash.txt")
    assert body["status"] == "failed" and body["error"]["code"] == "INGESTION_ERROR"
    assert body["error"]["details"] == {"error": "KeyError: 'embedding'"}
    assert "re-ingest" in body["error"]["message"]
    assert body["total_chunks"] == body["indexed_chunks"] == 0
    assert not Chunk.objects.filter(document_id=body["id"]).exists()
    assert any(record.exc_info for record in caplog.records)  # the traceback reaches the log
    # nothing of the failed document is searchable
    crashing_embedder.clear()
    assert chunks_found(client, "lighthouse keeper weather log") == set()
    # the failure is not final: a re-ingest with the bug gone makes it ready
    again = client.post(f"{DOCUMENTS}/{body['id']}/ingest", {"wait": True}, format="json").json()
    assert again["status"] == "ready" and again["error"] is None and again["total_chunks"] >= 1
    assert {hit[0] for hit in chunks_found(client, "lighthouse keeper weather log")} == {body["id"]}


def test_a_failed_reingest_never_shows_its_chunks(client: Any, crashing_embedder: list[Any]) -> None:
    """The run that failed wrote no chunk; the previous set stays searchable, unchanged."""
    ready = create_text(client, "/logs/keeper.txt", chunk_strategy="whole")
    assert ready["status"] == "ready" and ready["total_chunks"] == 1
    before = chunks_found(client, "lighthouse keeper weather log")
    assert before == {(ready["id"], 0, TEXT)}
    crashing_embedder.append(provider_bug)
    failed = client.post(f"{DOCUMENTS}/{ready['id']}/ingest",
                         {"wait": True, "chunk_strategy": "size", "chunk_size": 40, "chunk_overlap": 0},
                         format="json").json()
    assert failed["status"] == "failed" and failed["error"]["code"] == "INGESTION_ERROR"
    assert failed["total_chunks"] == 1  # counts the chunks that stayed
    crashing_embedder.clear()
    assert list(Chunk.objects.filter(document_id=ready["id"]).values_list("text", flat=True)) == [TEXT]
    assert chunks_found(client, "lighthouse keeper weather log") == before
    assert chunks_found(client, "lamp oil ordered monthly") == before
