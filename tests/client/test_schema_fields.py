"""The client's result types carry every field the API answers: each dataclass is compared
with the response schema drf-spectacular generates for its endpoint, so a field added to the
API and not to the client fails here (and a client field the API does not send, too)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from django.test import Client

from memory_engine import client

#: Each result type, where the API answers it: (method, path, status), then a walk from that
#: response's schema (a property name, or "[]" for an array's items).
ANSWERS: dict[type, tuple[tuple[str, str, str], tuple[str, ...]]] = {
    client.Memory: (("get", "/api/v1/memories/{id}", "200"), ()),
    client.WriteResult: (("post", "/api/v1/memories", "201"), ()),
    client.SearchResult: (("post", "/api/v1/knowledge/search", "200"), ()),
    client.SearchHit: (("post", "/api/v1/knowledge/search", "200"), ("results", "[]")),
    client.SearchRanks: (("post", "/api/v1/knowledge/search", "200"), ("results", "[]", "ranks")),
}
#: Client fields built from other API fields: WriteResult.memory holds the memory's own fields.
COMPOSED = {client.WriteResult: {"memory": client.Memory}}


@pytest.fixture(scope="module")
def schema(django_db_blocker: Any) -> dict[str, Any]:
    with django_db_blocker.unblock():
        response = Client().get("/api/schema/?format=json")
    assert response.status_code == 200
    return dict(response.json())


def resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node or ("allOf" in node and len(node["allOf"]) == 1):
        node = node["allOf"][0] if "allOf" in node else node
        if "$ref" in node:
            node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[-1]]
    return node


def answered_fields(schema: dict[str, Any], where: tuple[str, str, str], walk: tuple[str, ...]) -> set[str]:
    method, path, status = where
    node = resolve(schema, schema["paths"][path][method]["responses"][status]["content"]["application/json"]
                   ["schema"])
    for step in walk:
        node = resolve(schema, node["items"] if step == "[]" else node["properties"][step])
    return set(node["properties"])


def client_fields(cls: type) -> set[str]:
    names = {spec.name for spec in dataclasses.fields(cls)}
    for name, part in COMPOSED.get(cls, {}).items():
        names = (names - {name}) | client_fields(part)
    return names


@pytest.mark.parametrize("cls", ANSWERS, ids=lambda cls: cls.__name__)
def test_the_result_type_has_exactly_the_answers_fields(schema: dict[str, Any], cls: type) -> None:
    answered = answered_fields(schema, *ANSWERS[cls])
    assert client_fields(cls) == answered, (
        f"missing in the client: {sorted(answered - client_fields(cls))}; "
        f"not in the API: {sorted(client_fields(cls) - answered)}")


def test_a_listed_memory_is_the_same_memory(schema: dict[str, Any]) -> None:
    """``list_memories`` builds Memory from the list's items: the same fields as one memory."""
    listed = answered_fields(schema, ("get", "/api/v1/memories", "200"), ("results", "[]"))
    assert listed == client_fields(client.Memory)


@pytest.mark.parametrize("path", ["/api/v1/agents/{id}/tools/search_knowledge",
                                  "/api/v1/agents/{id}/tools/open_memory"])
def test_a_tool_result_keeps_the_whole_answer(schema: dict[str, Any], path: str) -> None:
    """ToolResult is generic: the model's ``content``, and the whole body in ``data``."""
    assert {spec.name for spec in dataclasses.fields(client.ToolResult)} == {"content", "data"}
    assert "content" in answered_fields(schema, ("post", path, "200"), ())


def test_parsing_fills_every_field_from_an_answer(schema: dict[str, Any]) -> None:
    """from_json reads each field by its API name (a typo would leave the default)."""
    hit = {name: f"<{name}>" for name in answered_fields(schema, *ANSWERS[client.SearchHit])}
    hit["ranks"] = {"vector": 3, "lexical": None}
    parsed = client.SearchResult.from_json({"results": [hit], "evidence": "strong", "degraded": ["x"],
                                            "lexical_backend": "bm25"})
    one = parsed.results[0]
    for name in hit:
        if name != "ranks":
            assert getattr(one, name) == f"<{name}>", name
    assert one.ranks == client.SearchRanks(vector=3, lexical=None)
    assert (parsed.evidence, parsed.degraded, parsed.lexical_backend) == ("strong", ["x"], "bm25")
    memory = {name: f"<{name}>" for name in client_fields(client.Memory)}
    write = {**memory, **{name: f"<{name}>" for name in client_fields(client.WriteResult) - set(memory)}}
    result = client.WriteResult.from_json(write)
    assert all(getattr(result.memory, name) == f"<{name}>" for name in memory)
    assert all(getattr(result, name) == f"<{name}>" for name in set(write) - set(memory))
