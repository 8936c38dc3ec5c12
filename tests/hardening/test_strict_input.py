"""Strict input (memory_engine.strict): a field no endpoint or tool declares answers
``400 UNKNOWN_FIELD`` naming it, and nothing changes — generated from the OpenAPI schema, so a new
operation is covered without a new test. List filters naming an unknown row answer
``400 UNKNOWN_SCOPE`` as search scopes do; a search with nothing to search or list answers
``400 QUERY_REQUIRED``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings

from memory_engine.models import Project
from memory_engine.services.stores import project_delete

from .mcp_wsgi import mcp_call
from .test_access_matrix import _engine_settings, rolled_back
from .test_isolation_matrix import OPERATIONS, Operation, body_for, call, own_params
from .world import World, build_world, counts, nonexistent_id

pytestmark = pytest.mark.django_db

SIGNED = {"v1_documents_converter_callback_create"}
WITH_BODY = [op for op in OPERATIONS if "requestBody" in op.spec and op.op_id not in SIGNED]


@pytest.fixture(scope="module")
def world(django_db_setup: None, django_db_blocker: Any) -> Iterator[World]:
    with django_db_blocker.unblock(), override_settings(MEMORY_ENGINE=_engine_settings()):
        built = build_world("strict")
    yield built
    with django_db_blocker.unblock():
        project_delete(project=Project.objects.get(pk=built.project.pk))


@pytest.fixture(autouse=True)
def _settings(settings: Any) -> None:
    settings.MEMORY_ENGINE = _engine_settings()


def test_every_body_operation_is_covered() -> None:
    assert len(WITH_BODY) > 30, [op.op_id for op in WITH_BODY]


@pytest.mark.parametrize("op", WITH_BODY, ids=lambda op: op.op_id)
def test_an_unknown_body_field_is_refused(op: Operation, world: World) -> None:
    before = counts(world)
    with rolled_back():
        body = body_for(op, world) or {}
        answer = call(op, world.key, own_params(op, world), {**body, "unexpected_field": "1"})
    assert (answer.status, answer.body.get("code")) == (400, "UNKNOWN_FIELD"), f"{op.label}: {answer.text[:300]}"
    assert answer.body["details"] == {"fields": ["unexpected_field"]}
    assert "unexpected_field" in answer.body["message"]
    assert counts(world) == before


@pytest.mark.parametrize("path, body, field, nearest", [
    ("/api/v1/memory-stores", {"name": "nested", "share": {"keys": [], "action": ["search"]}}, "share.action",
     "share.actions"),
    ("/api/v1/documents/batch", {"documents": [{"content": "x", "paht": "/x.txt"}]}, "documents.paht",
     "documents.path"),
])
def test_nested_unknown_fields_are_named_with_their_path(world: World, path: str, body: dict[str, Any],
                                                         field: str, nearest: str) -> None:
    from tests.conftest import api_client

    with rolled_back():
        answer = api_client(world.key).post(path, body, format="json")
    assert (answer.status_code, answer.json()["code"]) == (400, "UNKNOWN_FIELD"), answer.content
    assert answer.json()["details"] == {"fields": [field], "suggestions": {field: nearest}}
    assert f"did you mean `{nearest}`?" in answer.json()["message"]


def test_rule_handlers_keep_their_own_check(world: World) -> None:
    """A handler's configuration is checked by the handler (HANDLER_INVALID names unknown keys)."""
    from tests.conftest import api_client

    with rolled_back():
        answer = api_client(world.key).post(f"/api/v1/memory-stores/{world.first('store')}/rules",
                                            {"handler": {"type": "http", "url": "http://127.0.0.1:9/x", "urll": "y"}},
                                            format="json")
    assert answer.status_code == 400 and answer.json()["code"] in ("UNKNOWN_FIELD", "HANDLER_INVALID")
    assert "urll" in answer.content.decode()


def test_mcp_tools_refuse_unknown_arguments(world: World) -> None:
    with rolled_back():
        answer = mcp_call(world.key, "search_knowledge", {"query": "region", "limt": 3},
                          agent=world.first("agent"))
    assert (answer.is_error, answer.code) == (True, "UNKNOWN_FIELD")
    assert answer.body["details"] == {"fields": ["limt"]}


@pytest.mark.parametrize("path, param, kind", [
    ("/api/v1/memories", "memory_store_id", "store"),
    ("/api/v1/memory-assertions", "memory_store_id", "store"),
    ("/api/v1/memory-assertions", "memory_id", "memory"),
    ("/api/v1/memory-assertions", "generation_id", "generation"),
    ("/api/v1/memory-assertions", "rule_id", "memory_rule"),
    ("/api/v1/generations", "agent_id", "agent"),
])
def test_list_filters_naming_an_unknown_row_answer_unknown_scope(world: World, path: str, param: str,
                                                                 kind: str) -> None:
    from tests.conftest import api_client

    client = api_client(world.key)
    unknown = nonexistent_id(world.first(kind))
    answer = client.get(path, {param: unknown})
    assert (answer.status_code, answer.json()["code"]) == (400, "UNKNOWN_SCOPE"), answer.content
    assert answer.json()["details"] == {param: [unknown]}
    assert client.get(path, {param: world.first(kind)}).status_code == 200


def test_a_search_with_nothing_to_search_or_list(world: World) -> None:
    from tests.conftest import api_client

    client = api_client(world.key)
    for body in ({"query": ""}, {"query": "   "}, {}):
        answer = client.post("/api/v1/knowledge/search", body, format="json")
        assert (answer.status_code, answer.json()["code"]) == (400, "QUERY_REQUIRED"), body
    listed = client.post("/api/v1/knowledge/search", {"query": "", "memory_store_ids": [world.first("store")]},
                         format="json")
    assert listed.status_code == 200 and listed.json()["results"]  # the documented listing mode
