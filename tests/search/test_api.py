"""The HTTP doors: /knowledge/search, /agents CRUD, /agents/{id}/context and /tools."""

from __future__ import annotations

import pytest

from memory_engine.conf import engine_settings
from memory_engine.models import Agent
from tests.factories import AgentFactory, MemoryStoreFactory

from .helpers import make_document, write

pytestmark = pytest.mark.django_db

SEARCH = "/api/v1/knowledge/search"


def test_search_answer_shape(client, project, store):
    memory = write(store, "The user's favourite tea is jasmine.", tags={"kind": "preference"})
    make_document(project, "/tea.txt", ["Jasmine tea is scented with jasmine blossoms."], pages=True)
    response = client.post(SEARCH, {"query": "jasmine tea", "memory_store_ids": [store.pk],
                                    "document_paths": ["/"]}, format="json")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["degraded"] == []
    assert body["lexical_backend"] == "bm25"
    by_source = {hit["source"]: hit for hit in body["results"]}
    mem, doc = by_source["memory"], by_source["document"]
    assert mem["id"] == memory.pk and mem["memory_store_id"] == store.pk
    assert mem["memory_store_name"] == store.name and mem["tags"] == {"kind": "preference"}
    assert doc["document_path"] == "/tea.txt" and doc["page"] == 1 and doc["chunk_index"] == 0
    for hit in body["results"]:
        assert set(hit) >= {"source", "id", "text", "score", "similarity_score", "document_id", "document_path",
                            "page", "chunk_index", "memory_store_id", "memory_store_name", "tags", "ranks"}
        assert set(hit["ranks"]) == {"vector", "lexical"}
        assert -1 <= hit["similarity_score"] <= 1
    assert "Server-Timing" in response.headers


def test_search_allowed_for_read_only_keys(readonly_client, project):
    make_document(project, "/a.txt", ["alpha"])
    assert readonly_client.post(SEARCH, {"query": "alpha"}, format="json").status_code == 200


def test_search_unknown_scope_is_400_and_identical_for_foreign_ids(client, other_project):
    foreign = MemoryStoreFactory(project=other_project)
    answers = [client.post(SEARCH, {"query": "x", "memory_store_ids": [i]}, format="json")
               for i in (foreign.pk, "ms_01doesnotexist000000000000")]
    assert [a.status_code for a in answers] == [400, 400]
    assert [a.json()["code"] for a in answers] == ["UNKNOWN_SCOPE", "UNKNOWN_SCOPE"]
    assert answers[0].json()["details"] == {"memory_store_ids": [foreign.pk]}


@pytest.mark.parametrize(
    ("body", "code"),
    [({"limit": 0}, "LIMIT_INVALID"), ({"limit": 1000}, "LIMIT_INVALID"), ({"rrf_k": 0}, "RRF_K_INVALID"),
     ({"min_similarity": 2}, "MIN_SIMILARITY_INVALID"), ({"recency_half_life_days": -3}, "HALF_LIFE_INVALID"),
     ({"tags": [1]}, "VALIDATION_ERROR"), ({"vector_weight": -1}, "WEIGHT_INVALID"),
     ({"lexical_weight": 101}, "WEIGHT_INVALID")],
)
def test_search_bad_knobs(client, body, code):
    response = client.post(SEARCH, {"query": "x", **body}, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == code


def test_channel_weights_per_request(client, project):
    make_document(project, "/w.txt", ["Jasmine tea is scented with jasmine blossoms.", "Green tea from Japan."])
    body = client.post(SEARCH, {"query": "jasmine tea", "vector_weight": 2, "lexical_weight": 0.5},
                       format="json").json()
    k = engine_settings.SEARCH_RRF_K
    for hit in body["results"]:
        weighted = {"vector": 2, "lexical": 0.5}
        expected = sum(weighted[ch] / (k + rank) for ch, rank in hit["ranks"].items() if rank)
        assert hit["score"] == pytest.approx(expected)
    lexical_only = client.post(SEARCH, {"query": "jasmine tea", "vector_weight": 0, "rrf_k": 60},
                               format="json").json()
    weight = engine_settings.SEARCH_LEXICAL_WEIGHT
    assert all(hit["score"] == pytest.approx(weight / (60 + hit["ranks"]["lexical"])) if hit["ranks"]["lexical"]
               else hit["score"] == 0 for hit in lexical_only["results"])


def test_search_huge_and_operator_queries(client, project):
    make_document(project, "/a.txt", ["alpha beta"])
    for query in ("x" * 10240, "!!! :* & | <-> ( ) ' \" \\", "(alpha & !beta) | gamma:*"):
        assert client.post(SEARCH, {"query": query}, format="json").status_code == 200


@pytest.mark.usefixtures("no_embedder")
def test_search_without_provider_is_503(client, store):
    response = client.post(SEARCH, {"query": "x", "memory_store_ids": [store.pk]}, format="json")
    assert response.status_code == 503
    assert response.json()["code"] == "EMBEDDING_NOT_CONFIGURED"


# --------------------------------------------------------------------------- agents


def test_agent_crud(client, project, store, other_project):
    created = client.post("/api/v1/agents", {"name": "helper", "knowledge_config": {"memory_store_ids": [store.pk],
                          "limit": 3}, "write_memory_store_id": store.pk}, format="json")
    assert created.status_code == 201, created.json()
    agent = created.json()
    assert agent["id"].startswith("agt_") and agent["write_memory_store_id"] == store.pk
    assert agent["knowledge_config"] == {"memory_store_ids": [store.pk], "limit": 3}
    assert client.get("/api/v1/agents").json()["count"] == 1
    patched = client.patch(f"/api/v1/agents/{agent['id']}", {"write_memory_store_id": None}, format="json")
    assert patched.status_code == 200 and patched.json()["write_memory_store_id"] is None
    assert patched.json()["knowledge_config"]["limit"] == 3
    duplicate = client.post("/api/v1/agents", {"name": "helper"}, format="json")
    assert duplicate.status_code == 409
    foreign = MemoryStoreFactory(project=other_project)
    bad = client.post("/api/v1/agents", {"name": "x", "knowledge_config": {"memory_store_ids": [foreign.pk]}},
                      format="json")
    assert bad.status_code == 400 and bad.json()["code"] == "UNKNOWN_SCOPE"
    bad = client.post("/api/v1/agents", {"name": "y", "write_memory_store_id": foreign.pk}, format="json")
    assert bad.status_code == 400 and bad.json()["details"] == {"write_memory_store_id": [foreign.pk]}
    bad = client.post("/api/v1/agents", {"name": "z", "knowledge_config": {"nope": 1}}, format="json")
    assert bad.status_code == 400 and bad.json()["code"] == "KNOWLEDGE_CONFIG_INVALID"
    assert client.delete(f"/api/v1/agents/{agent['id']}").status_code == 204
    assert not Agent.objects.filter(pk=agent["id"]).exists()


def test_other_projects_agent_is_404(client, other_project):
    agent = AgentFactory(project=other_project)
    for response in (client.get(f"/api/v1/agents/{agent.pk}"),
                     client.post(f"/api/v1/agents/{agent.pk}/context", {"messages": []}, format="json"),
                     client.get(f"/api/v1/agents/{agent.pk}/tools")):
        assert response.status_code == 404


def test_context_prepends_a_user_message(client, project, store):
    memory = write(store, "The user is vegetarian.")
    make_document(project, "/recipes/chili.txt", ["Chili recipe with beef and beans."])
    agent = AgentFactory(project=project, knowledge_config={"memory_store_ids": [store.pk]})
    messages = [{"role": "system", "content": "You are a cook."},
                {"role": "user", "content": "What should I cook for the user? They are vegetarian?"}]
    response = client.post(f"/api/v1/agents/{agent.pk}/context", {"messages": messages}, format="json")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["injected"] is True
    out = body["messages"]
    assert out[0] == messages[0] and out[2] == messages[1]
    assert out[1]["role"] == "user"
    assert out[1]["content"].startswith("<knowledge>") and out[1]["content"].endswith("</knowledge>")
    assert f"[Memory store: {store.name} ({memory.pk})]" in out[1]["content"]
    # A memory-only config never widens into a project-wide document search.
    assert "Chili" not in out[1]["content"]
    assert {hit["source"] for hit in body["knowledge"]["results"]} == {"memory"}
    # The override unions arrays: now documents are in scope too.
    response = client.post(f"/api/v1/agents/{agent.pk}/context",
                           {"messages": messages, "override": {"document_paths": ["/recipes/"]},
                            "query": "chili recipe"}, format="json")
    assert "[Document: /recipes/chili.txt]" in response.json()["messages"][1]["content"]


def test_context_with_nothing_found_leaves_messages_alone(client, project, store):
    agent = AgentFactory(project=project, knowledge_config={"memory_store_ids": [store.pk]})
    messages = [{"role": "user", "content": "hello"}]
    body = client.post(f"/api/v1/agents/{agent.pk}/context", {"messages": messages}, format="json").json()
    assert body == {"messages": messages, "injected": False,
                    "knowledge": {"results": [], "degraded": [], "lexical_backend": "bm25", "evidence": "none",
                                  "withheld": 0}}


def test_tools_definitions(client, project, store):
    agent = AgentFactory(project=project)
    body = client.get(f"/api/v1/agents/{agent.pk}/tools").json()
    assert body["provider"] == "openai"
    assert [t["function"]["name"] for t in body["tools"]] == ["search_knowledge", "open_memory", "list_memories"]
    assert body["tools"][0]["type"] == "function"
    agent.write_memory_store = store
    agent.save()
    body = client.get(f"/api/v1/agents/{agent.pk}/tools?provider=anthropic").json()
    assert [t["name"] for t in body["tools"]] == ["search_knowledge", "open_memory", "list_memories", "write_memory",
                                                  "forget_memory"]
    assert body["tools"][3]["input_schema"]["required"] == ["content"]
    assert client.get(f"/api/v1/agents/{agent.pk}/tools?provider=xml").json()["code"] == "TOOL_FORMAT_INVALID"


def test_search_knowledge_tool_runs_in_the_agents_scope(client, project, store):
    write(store, "The project deadline is March 3.")
    make_document(project, "/x.txt", ["Deadline policy for all projects."])
    agent = AgentFactory(project=project, knowledge_config={"memory_store_ids": [store.pk]})
    response = client.post(f"/api/v1/agents/{agent.pk}/tools/search_knowledge", {"query": "deadline"},
                           format="json")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert "March 3" in body["content"] and "Deadline policy" not in body["content"]
    assert body["content"].startswith("<knowledge>")
