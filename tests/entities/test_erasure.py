"""Entity names do not outlive what stated them (docs/entities.md, *Erasure*): an erasure, a
consent revocation, a document's forget and purge, a user-tier forget and a store's deletion
delete, in the same transaction, the entities no edge names any more; an entity another live
memory or chunk still names stays, and an erasure receipt counts the entities it removed."""

from __future__ import annotations

from typing import Any

import pytest

from memory_engine.consent_categories import ConsentCategory
from memory_engine.models import Entity, EntityEdge, Memory, MemoryStore
from memory_engine.policy import system_principal
from memory_engine.services.consent import consent_revoke
from memory_engine.services.documents import document_create_text, document_ingest
from memory_engine.services.entities import entities_extract_documents, entities_extract_memories
from memory_engine.services.memories import memory_write
from memory_engine.services.stores import memory_store_delete, subject_store_get_or_create
from tests.factories import MemoryStoreFactory

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("hashing_embedder")]


def write(store: MemoryStore, text: str, **kwargs: Any) -> Memory:
    return memory_write(store=store, content=text, principal="test", **kwargs).memory


def listed(client: Any, q: str) -> list[dict[str, Any]]:
    response = client.get("/api/v1/entities", {"q": q})
    assert response.status_code == 200, response.json()
    return response.json()["results"]


def graph() -> None:
    entities_extract_memories()
    entities_extract_documents()


def test_an_erasure_removes_the_entities_only_the_erased_rows_named(client: Any, project: Any) -> None:
    subject = subject_store_get_or_create(project=project, external_id="cust-hb")[0]
    write(subject, "Hieronymus Bellweather was treated for asthma in Lisbon.")
    kept = MemoryStoreFactory(project=project)
    write(kept, "The Lisbon office opens at eight.")
    graph()
    bellweather = Entity.objects.get(project=project, key="hieronymus bellweather")
    assert [e["key"] for e in listed(client, "Bellweather")] == ["hieronymus bellweather"]

    response = client.post("/api/v1/erasure", {"subject_external_id": "cust-hb"}, format="json")

    assert response.status_code == 201, response.json()
    receipt = response.json()
    assert listed(client, "Bellweather") == [] and listed(client, "Hieronymus") == []
    assert client.get(f"/api/v1/entities/{bellweather.pk}").status_code == 404
    assert receipt["counts"]["entity"] == 1 and receipt["ids"]["entity"] == [bellweather.pk]
    # a name a live memory still states stays, with its edge
    assert [e["name"] for e in listed(client, "Lisbon")] == ["Lisbon"]
    assert EntityEdge.objects.filter(entity__key="lisbon", memory__store=kept).exists()


def test_a_consent_revocation_removes_the_names_of_the_revoked_memories(project: Any, client: Any) -> None:
    subject = subject_store_get_or_create(project=project, external_id="cust-hb")[0]
    health = write(subject, "Hieronymus Bellweather takes insulin.")
    Memory.objects.filter(pk=health.pk).update(consent_category=ConsentCategory.HEALTH)
    write(subject, "Quillon Vexmoor prefers tea.")
    graph()

    receipt = consent_revoke(project=project, caller=system_principal("test"), subject_external_id="cust-hb",
                             categories=[ConsentCategory.HEALTH])

    assert listed(client, "Bellweather") == []
    assert receipt.counts["entity"] == 1
    assert [e["name"] for e in listed(client, "Vexmoor")] == ["Quillon Vexmoor"]


def test_a_documents_forget_and_purge_remove_the_names_only_its_chunks_named(client: Any, project: Any) -> None:
    document = document_create_text(project=project, path="/health/note.md", content_type="text/markdown",
                                    content="# Note\n\nHieronymus Bellweather moved to Lisbon.\n",
                                    enqueue=False)
    document_ingest(document_id=document.pk)
    write(MemoryStoreFactory(project=project), "The Lisbon office opens at eight.")
    graph()
    assert listed(client, "Bellweather")

    forgotten = client.post(f"/api/v1/documents/{document.pk}/forget", {"reason": "request"}, format="json")
    assert forgotten.status_code == 200, forgotten.json()
    assert listed(client, "Bellweather") == []
    assert listed(client, "Lisbon")
    assert client.post(f"/api/v1/documents/{document.pk}/purge").status_code == 204
    assert listed(client, "Bellweather") == [] and listed(client, "Lisbon")


def test_a_purge_removes_the_names_of_a_documents_chunks(client: Any, project: Any) -> None:
    document = document_create_text(project=project, path="/health/old.md", content_type="text/markdown",
                                    content="# Old\n\nHieronymus Bellweather moved away.\n", enqueue=False)
    document_ingest(document_id=document.pk)
    graph()
    response = client.delete(f"/api/v1/documents/{document.pk}")
    assert response.status_code == 204
    assert listed(client, "Bellweather") == []


def test_forgetting_a_user_memory_removes_its_names_and_a_trashed_one_keeps_them(client: Any,
                                                                              project: Any) -> None:
    subject = subject_store_get_or_create(project=project, external_id="cust-hb")[0]
    user_memory = write(subject, "Hieronymus Bellweather called about the invoice.")
    agent_store = MemoryStoreFactory(project=project, tier="agent")
    trashed = write(agent_store, "Quillon Vexmoor called about the lease.")
    graph()

    assert client.delete(f"/api/v1/memories/{user_memory.pk}").status_code in (200, 204)
    assert client.delete(f"/api/v1/memories/{trashed.pk}").status_code in (200, 204)

    assert listed(client, "Bellweather") == []
    # in the trash the memory can come back: its entity keeps its (retired) edges
    assert [e["name"] for e in listed(client, "Vexmoor")] == ["Quillon Vexmoor"]


def test_deleting_a_store_removes_the_names_only_its_memories_named(client: Any, project: Any) -> None:
    store = MemoryStoreFactory(project=project)
    write(store, "Hieronymus Bellweather opened the account.")
    graph()
    memory_store_delete(store=store)
    assert listed(client, "Bellweather") == []
