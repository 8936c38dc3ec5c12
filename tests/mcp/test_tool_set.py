"""One decision of which tools an agent gets (memory_engine.agent_tools.tool_definitions): the REST
listing (``GET /agents/{id}/tools``, ``/tool-guidance``) and the MCP server's ``tools/list`` offer
the same tools for the same key, agent and subject, and every tool offered runs at both doors."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from rest_framework.test import APIClient

from memory_engine.exceptions import ValidationFailed
from memory_engine.models import MemoryAssertion
from memory_engine.models.memories import Mechanism
from memory_engine.services.memories import memory_write

from ..factories import AgentFactory, MemoryStoreFactory, ProjectFactory, make_key
from ..hardening.mcp_wsgi import HEADERS, mcp_call

pytestmark = pytest.mark.django_db

READING = ["search_knowledge", "open_memory", "list_memories"]
ALL = [*READING, "write_memory", "forget_memory"]


def _mcp_tools(key: str, *, agent: str, subject: str | None = None) -> dict[str, Any]:
    pins = f"?agent={agent}" + (f"&subject={subject}" if subject else "")
    response = Client().post(f"/mcp/{pins}", {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
                             content_type="application/json", headers={**HEADERS, "Authorization": f"Bearer {key}"})
    assert response.status_code == 200, response.content
    return {tool["name"]: tool for tool in response.json()["result"]["tools"]}


def _rest(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


@pytest.mark.parametrize(("write_store", "read_only", "subject", "expected"), [
    (True, False, None, ALL),
    (False, False, None, READING),  # nowhere to write
    (False, False, "ada", ALL),  # the host's subject's store
    (True, True, None, READING),  # a read-only key
    (False, True, "ada", READING),
])
def test_rest_and_mcp_offer_the_same_tools(hashing_embedder: None, write_store: bool, read_only: bool,
                                           subject: str | None, expected: list[str]) -> None:
    project = ProjectFactory()
    store = MemoryStoreFactory(project=project)
    agent = AgentFactory(project=project, write_memory_store=store if write_store else None,
                         knowledge_config={"memory_store_ids": [store.pk]})
    key = make_key(project, read_only=read_only)
    query = "?provider=anthropic" + (f"&subject={subject}" if subject else "")

    rest = _rest(key).get(f"/api/v1/agents/{agent.pk}/tools{query}")
    assert rest.status_code == 200, rest.content
    guidance = _rest(key).get(f"/api/v1/agents/{agent.pk}/tool-guidance{query}")
    assert guidance.status_code == 200, guidance.content
    mcp = _mcp_tools(key, agent=agent.pk, subject=subject)

    assert [tool["name"] for tool in rest.json()["tools"]] == expected
    assert [tool["name"] for tool in guidance.json()["tools"]] == expected
    assert list(mcp) == expected
    assert f"You have these tools: {', '.join(expected)}." in guidance.json()["guidance"]
    for tool in rest.json()["tools"]:  # the same definitions: the agent is pinned, the facet is not
        assert mcp[tool["name"]]["inputSchema"] == tool["input_schema"]
        assert mcp[tool["name"]]["description"] == tool["description"]


def test_a_view_only_staff_user_is_offered_the_reading_tools() -> None:
    project = ProjectFactory()
    store = MemoryStoreFactory(project=project)
    agent = AgentFactory(project=project, write_memory_store=store)
    user = User.objects.create_user("viewer", "viewer@example.com", "pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="memory_engine",
                                                        codename__startswith="view_"))
    project.members.add(user)
    client = Client()
    client.force_login(user)
    response = client.get(f"/api/v1/agents/{agent.pk}/tools", HTTP_X_PROJECT_ID=project.pk)
    assert response.status_code == 200, response.content
    assert [tool["function"]["name"] for tool in response.json()["tools"]] == READING


def test_a_bad_subject_on_the_listing_is_a_400() -> None:
    project = ProjectFactory()
    agent = AgentFactory(project=project)
    response = _rest(make_key(project)).get(f"/api/v1/agents/{agent.pk}/tools?subject=%20bad%20")
    assert response.status_code == 400, response.content
    assert response.json()["code"] and response.json()["message"]


def test_list_and_forget_run_over_rest_as_over_mcp(hashing_embedder: None) -> None:
    project = ProjectFactory()
    store = MemoryStoreFactory(project=project)
    agent = AgentFactory(project=project, write_memory_store=store, knowledge_config={"memory_store_ids": [store.pk]})
    key = make_key(project)
    client = _rest(key)
    first = memory_write(store=store, content="Ada waters the roses on Fridays.", principal="test",
                         mechanism=Mechanism.API).memory
    second = memory_write(store=store, content="Ada's cat is called Turing.", principal="test",
                          mechanism=Mechanism.API).memory
    other = memory_write(store=MemoryStoreFactory(project=ProjectFactory()), content="Another project's fact.",
                         principal="test", mechanism=Mechanism.API).memory

    listed = client.post(f"/api/v1/agents/{agent.pk}/tools/list_memories", {"limit": 5}, format="json")
    assert listed.status_code == 200, listed.content
    assert listed.json()["memory_ids"] == [second.pk, first.pk]
    assert listed.json() == mcp_call(key, "list_memories", {"limit": 5}, agent=agent.pk).body
    assert "<knowledge>" in listed.json()["content"] and "Turing" in listed.json()["content"]

    bad = client.post(f"/api/v1/agents/{agent.pk}/tools/list_memories", {"limit": 0}, format="json")
    assert (bad.status_code, bad.json()["code"]) == (400, ValidationFailed.code)
    assert mcp_call(key, "list_memories", {"limit": 0}, agent=agent.pk).code == ValidationFailed.code

    forgotten = client.post(f"/api/v1/agents/{agent.pk}/tools/forget_memory", {"id": first.pk}, format="json")
    assert forgotten.status_code == 200, forgotten.content
    row = MemoryAssertion.objects.get(pk=forgotten.json()["assertion_id"])
    assert (row.memory_id, row.outcome, row.mechanism) == (first.pk, "forgotten", "tool")
    assert forgotten.json() == {"content": f"Forgot memory {first.pk}.", "memory_id": first.pk,
                                "assertion_id": row.pk}
    listed = client.post(f"/api/v1/agents/{agent.pk}/tools/list_memories", {}, format="json")
    assert listed.json()["memory_ids"] == [second.pk]

    # Gone, another project's and unknown ids answer alike.
    answers = [client.post(f"/api/v1/agents/{agent.pk}/tools/forget_memory", {"id": memory_id}, format="json")
               for memory_id in (first.pk, other.pk, "mem_nope")]
    assert [(a.status_code, a.json()["code"]) for a in answers] == [(404, "NOT_FOUND")] * 3

    refused = _rest(make_key(project, read_only=True)).post(
        f"/api/v1/agents/{agent.pk}/tools/forget_memory", {"id": second.pk}, format="json")
    assert (refused.status_code, refused.json()["code"]) == (403, "READ_ONLY_KEY")
    assert mcp_call(make_key(project, read_only=True), "forget_memory", {"id": second.pk},
                    agent=agent.pk).code == "READ_ONLY_KEY"
