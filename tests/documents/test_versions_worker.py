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
