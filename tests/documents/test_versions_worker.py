"""A source that changes, ingested by a real django-q2 worker (the default embedder)."""

from __future__ import annotations

from memory_engine.models import Chunk, DocumentVersion
from tests.conftest import wait_for

WIKI = "/api/v1/documents/by-ref/wiki/onboarding"
OLD = "New hires collect their laptop from the IT desk on the first morning."
NEW = "New hires receive their laptop by courier a week before they start."


def version_status(number: int) -> str | None:
    version = DocumentVersion.objects.filter(number=number).first()
    return version.status if version else None


def test_queued_update_goes_live_through_the_worker(qcluster, client):
    first = client.put(WIKI, {"content": OLD}, format="json")
    assert first.status_code == 202 and first.json()["status"] == "created"
    wait_for(lambda: version_status(1) == "active", timeout=120)
    again = client.put(WIKI, {"content": OLD}, format="json")
    assert again.status_code == 200 and again.json()["status"] == "noop"

    second = client.put(WIKI, {"content": NEW}, format="json")
    assert second.status_code == 202 and second.json()["status"] == "updated"
    assert second.json()["version"]["status"] == "pending"
    wait_for(lambda: version_status(2) == "active", timeout=120)
    assert version_status(1) == "superseded"
    chunks = Chunk.objects.all()
    assert {c.version.number for c in chunks} == {2} and all(c.embedding is not None for c in chunks)
    hits = client.post("/api/v1/knowledge/search", {"query": "how do new hires get their laptop",
                                                     "document_paths": ["/"]}, format="json").json()["results"]
    assert hits and "courier" in hits[0]["text"] and all("IT desk" not in hit["text"] for hit in hits)


def test_one_worker_task_ingests_the_small_documents_waiting_with_it(qcluster, project):
    """Documents created without a task of their own are picked up by the next ingestion task
    of their project (document_ingest_group), in the real worker with the default embedder."""
    from memory_engine.models import Document
    from memory_engine.queue import enqueue_document_ingest
    from memory_engine.services.documents import document_create_text

    notes = [document_create_text(project=project, content=f"Note {n}: the {word} room is booked on Fridays.",
                                  path=f"/rooms/{word}.txt", enqueue=False)
             for n, word in enumerate(["amber", "basalt", "cobalt", "dune", "eider"])]
    enqueue_document_ingest(notes[-1].pk, notes[-1].project_id)  # one task, for the newest
    wait_for(lambda: Document.objects.filter(pk__in=[n.pk for n in notes], status="ready").count() == 5,
             timeout=120)
    assert all(c.embedding is not None for c in Chunk.objects.filter(document__in=notes))
    assert set(Document.objects.filter(pk__in=[n.pk for n in notes]).values_list("attempts", flat=True)) == {1}
