"""Each finding of the schema fuzzer, pinned as a plain regression test (the fuzzer's derandomized
run may stop generating the same case when the schema or data change)."""

from __future__ import annotations

from typing import Any

import pytest

from memory_engine.models import MemoryRule
from memory_engine.models.memories import Mechanism
from memory_engine.services.memories import memory_write
from tests.factories import AgentFactory

pytestmark = pytest.mark.django_db


def test_search_tool_with_a_non_object_body_is_400(client: Any, project: Any) -> None:
    agent = AgentFactory(project=project)
    response = client.post(f"/api/v1/agents/{agent.pk}/tools/search_knowledge", [None, None], format="json")
    assert response.status_code == 400 and response.json()["code"] == "VALIDATION_ERROR"


def test_query_that_embeds_to_a_zero_vector_is_not_a_500(hashing_embedder: None, client: Any, store: Any) -> None:
    """The hashing test embedder maps text without word characters to the zero vector: every
    cosine would be NaN, which JSON cannot carry."""
    memory_write(store=store, content="(&) ☕ !!", principal="test", mechanism=Mechanism.API)
    response = client.post("/api/v1/knowledge/search", {"query": "(&) ☕"}, format="json")
    assert response.status_code == 200, response.content[:300]
    assert all(hit["similarity_score"] is None for hit in response.json()["results"])


@pytest.mark.parametrize("value", ["4121-06-22T21:54:59+21:20", "0001-01-01T00:00:00+05:00"])
def test_created_before_with_an_offset_postgresql_refuses(client: Any, value: str) -> None:
    response = client.get("/api/v1/memory-assertions", {"created_before": value})
    assert response.status_code in (200, 400), response.content[:300]


def test_memory_store_create_answers_valid_memories(client: Any) -> None:
    body = client.post("/api/v1/memory-stores", {"name": "fresh"}, format="json").json()
    assert body["valid_memories"] == 0


def test_rule_answers_always_say_whether_a_secret_is_set(client: Any, store: Any) -> None:
    body = client.post(f"/api/v1/memory-stores/{store.pk}/rules", {"handler": {"type": "builtin"}},
                       format="json").json()
    assert body["handler"]["secret_set"] is False


def test_patch_rule_handler_without_type_keeps_the_type(client: Any, store: Any) -> None:
    rule = MemoryRule.objects.create(store=store, handler_type="http", handler_config={"url": "http://127.0.0.1:9/x"})
    response = client.patch(f"/api/v1/memory-stores/{store.pk}/rules/{rule.pk}",
                            {"handler": {"url": "http://127.0.0.1:9/y"}}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["handler"]["type"] == "http"
