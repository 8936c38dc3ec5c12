"""Store tiers over HTTP: tier on create (fixed afterwards), a subject's store found or created,
an agent's own store created with it (docs/memory.md, *Tiers and subjects*)."""

from __future__ import annotations

from typing import Any

import pytest

from memory_engine.models import Agent, MemoryStore
from tests.factories import AgentFactory, MemoryStoreFactory

pytestmark = pytest.mark.django_db

STORES = "/api/v1/memory-stores"


def subject_store(client: Any, external_id: str) -> Any:
    return client.get(f"/api/v1/subjects/{external_id}/memory-store")


def test_a_new_store_is_institutional_unless_told(client):
    response = client.post(STORES, {"name": "handbook"}, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["tier"], body["subject_external_id"], body["agent_id"]) == ("institutional", None, None)
    assert body["recency_half_life_days"] is None


def test_tier_and_owner_on_create(client, project):
    user = client.post(STORES, {"name": "alice", "tier": "user", "subject_external_id": "alice"}, format="json")
    assert user.status_code == 201, user.json()
    assert (user.json()["tier"], user.json()["subject_external_id"]) == ("user", "alice")
    agent = AgentFactory(project=project)
    own = client.post(STORES, {"name": "own", "tier": "agent", "agent_id": agent.pk}, format="json")
    assert own.status_code == 201 and own.json()["agent_id"] == agent.pk
    # The subject's store is the one the subjects endpoint finds.
    found = subject_store(client, "alice")
    assert found.status_code == 200 and found.json()["id"] == user.json()["id"]


@pytest.mark.parametrize("body, code", [
    ({"tier": "user"}, "TIER_INVALID"),
    ({"tier": "agent"}, "TIER_INVALID"),
    ({"tier": "institutional", "subject_external_id": "alice"}, "TIER_INVALID"),
    ({"subject_external_id": "alice"}, "TIER_INVALID"),
    ({"tier": "user", "subject_external_id": "alice", "agent_id": "agt_x"}, "TIER_INVALID"),
    ({"tier": "team"}, "TIER_INVALID"),
    ({"tier": "user", "subject_external_id": "x" * 201}, "SUBJECT_INVALID"),
    ({"tier": "agent", "agent_id": "agt_nope"}, "UNKNOWN_SCOPE"),
])
def test_tier_validation(client, body, code):
    response = client.post(STORES, {"name": "s", **body}, format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["code"] == code
    assert not MemoryStore.objects.filter(name="s").exists()


def test_another_projects_agent_is_unknown(client, other_project):
    foreign = AgentFactory(project=other_project)
    response = client.post(STORES, {"name": "s", "tier": "agent", "agent_id": foreign.pk}, format="json")
    assert response.status_code == 400 and response.json()["code"] == "UNKNOWN_SCOPE"


def test_one_store_per_subject_and_per_agent(client, project):
    assert client.post(STORES, {"name": "a", "tier": "user", "subject_external_id": "alice"},
                       format="json").status_code == 201
    again = client.post(STORES, {"name": "b", "tier": "user", "subject_external_id": "alice"}, format="json")
    assert again.status_code == 409 and again.json()["code"] == "TIER_STORE_EXISTS"
    agent = client.post("/api/v1/agents", {"name": "support"}, format="json").json()
    second = client.post(STORES, {"name": "c", "tier": "agent", "agent_id": agent["id"]}, format="json")
    assert second.status_code == 409 and second.json()["code"] == "TIER_STORE_EXISTS"


def test_tier_and_owner_are_fixed_after_creation(client, project):
    created = client.post(STORES, {"name": "a", "tier": "user", "subject_external_id": "alice"}, format="json").json()
    url = f"{STORES}/{created['id']}"
    for change in ({"tier": "institutional"}, {"subject_external_id": "bob"}, {"agent_id": "agt_x"}):
        response = client.patch(url, change, format="json")
        assert response.status_code == 400 and response.json()["code"] == "TIER_IMMUTABLE"
        assert response.json()["details"]["fields"] == sorted(change)
    # Sending the current values back (PUT of what GET answered) is fine.
    same = client.put(url, {**created, "description": "Alice's memory"}, format="json")
    assert same.status_code == 200, same.json()
    assert same.json()["description"] == "Alice's memory" and same.json()["tier"] == "user"


def test_subject_store_is_created_once_then_found(client, readonly_client, other_client, project):
    first = subject_store(client, "crm:42")
    assert first.status_code == 201, first.json()
    body = first.json()
    assert (body["tier"], body["subject_external_id"], body["name"]) == ("user", "crm:42", "user:crm:42")
    again = subject_store(client, "crm:42")
    assert again.status_code == 200 and again.json()["id"] == body["id"]
    assert subject_store(readonly_client, "crm:42").json()["id"] == body["id"]  # a read-only key finds it
    # ... but cannot create one.
    refused = subject_store(readonly_client, "crm:43")
    assert refused.status_code == 403 and refused.json()["code"] == "READ_ONLY_KEY"
    # Another project's subject of the same id is another store.
    theirs = subject_store(other_client, "crm:42")
    assert theirs.status_code == 201 and theirs.json()["id"] != body["id"]
    assert MemoryStore.objects.filter(tier="user", subject_external_id="crm:42").count() == 2


def test_subject_store_name_taken_falls_back_to_the_store_id(client, project):
    MemoryStoreFactory(project=project, name="user:alice")
    response = subject_store(client, "alice")
    assert response.status_code == 201 and response.json()["name"] == f"user:{response.json()['id']}"


def test_subject_ids_are_validated(client):
    for bad in ("x" * 201, "%20padded"):
        response = subject_store(client, bad)
        assert response.status_code == 400 and response.json()["code"] == "SUBJECT_INVALID", bad
    assert subject_store(client, "x" * 200).status_code == 201


def test_an_agent_gets_its_own_store(client, project):
    response = client.post("/api/v1/agents", {"name": "support"}, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    store = MemoryStore.objects.get(pk=body["memory_store_id"])
    assert (store.tier, store.agent_id, store.name, store.project_id) == ("agent", body["id"], "agent:support",
                                                                          project.pk)
    assert body["write_memory_store_id"] is None  # writes go where the host points them
    listed = client.get("/api/v1/agents").json()["results"]
    assert [a["memory_store_id"] for a in listed] == [store.pk]
    # A rename carries the store's name along; a name in use leaves it as it is.
    renamed = client.patch(f"/api/v1/agents/{body['id']}", {"name": "helpdesk"}, format="json")
    assert renamed.status_code == 200 and renamed.json()["memory_store_id"] == store.pk
    assert MemoryStore.objects.get(pk=store.pk).name == "agent:helpdesk"
    MemoryStoreFactory(project=project, name="agent:triage")
    assert client.patch(f"/api/v1/agents/{body['id']}", {"name": "triage"}, format="json").status_code == 200
    assert MemoryStore.objects.get(pk=store.pk).name == "agent:helpdesk"
    # A new agent whose derived store name is taken still gets its store.
    again = client.post("/api/v1/agents", {"name": "helpdesk-2"}, format="json").json()
    MemoryStoreFactory(project=project, name="agent:other")
    other = client.post("/api/v1/agents", {"name": "other"}, format="json")
    assert other.status_code == 201, other.json()
    assert MemoryStore.objects.get(pk=other.json()["memory_store_id"]).name.startswith("agent:ms_")
    assert again["memory_store_id"]
    # Deleting the agent deletes its own store, with its memories and their ledger rows.
    written = client.post("/api/v1/memories", {"memory_store_id": store.pk, "content": "Refunds take 5 days."},
                          format="json")
    assert written.status_code == 201, written.json()
    assert client.delete(f"/api/v1/agents/{body['id']}").status_code == 204
    assert not MemoryStore.objects.filter(pk=store.pk).exists()
    assert not Agent.objects.filter(pk=body["id"]).exists()
