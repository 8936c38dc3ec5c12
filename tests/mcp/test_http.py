"""The MCP server over streamable HTTP (include("memory_engine.mcp.urls")), driven by the SDK's
own client against a real server; REST reads back what the tools did."""

from __future__ import annotations

import importlib.metadata
import json
from typing import Any

import anyio
import httpx
import pytest

from memory_engine.agent_tools import agent_tool_definitions
from memory_engine.client import ApiError, MemoryEngineClient
from memory_engine.exceptions import UnknownField, ValidationFailed
from memory_engine.models import Memory, MemoryAssertion

from .conftest import Setup

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


async def _session(url: str, key: str, calls: list[tuple[str, dict[str, Any]]]) -> tuple[Any, list[Any]]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60) as http, \
            Client(streamable_http_client(url, http_client=http)) as client:
        tools = await client.list_tools()
        results = [await client.call_tool(name, arguments) for name, arguments in calls]
    return tools, results


async def _server_info(url: str, key: str) -> Any:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60) as http, \
            Client(streamable_http_client(url, http_client=http)) as client:
        return client.server_info


async def _refused_session(url: str, key: str, statuses: list[int]) -> None:
    """A session whose key the server refuses; ``statuses`` collects the HTTP status of each answer."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def record(response: Any) -> None:
        statuses.append(response.status_code)

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60,
                                  event_hooks={"response": [record]}) as http, \
            Client(streamable_http_client(url, http_client=http)) as client:
        await client.list_tools()


def _error_code(result: Any) -> str:
    assert result.is_error
    return json.loads(result.content[0].text)["code"]


def test_tools_over_http(setup: Setup, live_url: str) -> None:
    url = f"{live_url}/mcp/?agent={setup.agent.pk}"
    tools, (written, found, listed, bad, unknown, foreign) = anyio.run(_session, url, setup.key, [
        ("write_memory", {"content": "Ada prefers green tea in the morning.", "kind": "preference"}),
        ("search_knowledge", {"query": "what tea does Ada prefer"}),
        ("list_memories", {}),
        ("write_memory", {"content": "x", "confidence": "very"}),
        ("write_memory", {"content": "x", "subject": "mallory"}),
        ("open_memory", {"id": setup.other_memory_id}),
    ])
    # The tools are the agent's REST tool definitions (rendered from the memory schema).
    by_name = {tool.name: tool for tool in tools.tools}
    assert set(by_name) == {"search_knowledge", "write_memory", "open_memory", "list_memories", "forget_memory"}
    for definition in agent_tool_definitions(setup.agent, fmt="anthropic"):
        assert by_name[definition["name"]].input_schema == definition["input_schema"]
        assert by_name[definition["name"]].description == definition["description"]
    assert by_name["write_memory"].input_schema["properties"]["kind"]["enum"] == ["preference", "fact"]

    assert not written.is_error, written.content
    memory_id = written.structured_content["memory_id"]
    row = MemoryAssertion.objects.get(memory_id=memory_id)
    assert (row.mechanism, row.principal, row.outcome) == ("tool", f"key:{setup.project.api_keys.get().pk}",
                                                           "created")
    assert Memory.objects.get(pk=memory_id).kind == "preference"
    assert memory_id in found.content[0].text and "<knowledge>" in found.content[0].text
    assert listed.structured_content["memory_ids"] == [memory_id]
    assert _error_code(bad) == ValidationFailed.code
    assert _error_code(unknown) == UnknownField.code  # `subject` is the host's to pin, not an argument
    assert _error_code(foreign) == "NOT_FOUND"

    # The server names itself and the installed package's version.
    info = anyio.run(_server_info, url, setup.key)
    assert (info.name, info.version) == ("memory-engine", importlib.metadata.version("django-memory-engine"))

    _, (opened, forgotten) = anyio.run(_session, url, setup.key, [
        ("open_memory", {"id": memory_id}), ("forget_memory", {"id": memory_id})])
    assert "green tea" in opened.content[0].text
    assert not forgotten.is_error, forgotten.content
    row = MemoryAssertion.objects.get(memory_id=memory_id, outcome="forgotten")
    assert (row.mechanism, row.principal) == ("tool", f"key:{setup.project.api_keys.get().pk}")
    # The host reads the same rows over REST with the typed client.
    with MemoryEngineClient(live_url, api_key=setup.key) as engine:
        assert engine.get_memory(memory_id).invalidated_at is not None  # in the trash
        with pytest.raises(ApiError) as caught:
            engine.get_memory(setup.other_memory_id)
        assert (caught.value.status, caught.value.code) == (404, "NOT_FOUND")


def test_pinned_subject_and_facet_and_an_unpinned_agent(setup: Setup, live_url: str) -> None:
    url = f"{live_url}/mcp/?subject=ada&facet=garden"
    tools, (written, overridden, missing_agent) = anyio.run(_session, url, setup.key, [
        ("write_memory", {"agent_id": setup.agent.pk, "content": "The roses need water on Fridays."}),
        ("write_memory", {"agent_id": setup.agent.pk, "content": "Elsewhere.", "facet": "kitchen"}),
        ("list_memories", {"agent_id": "agt_nope"}),
    ])
    write = next(tool for tool in tools.tools if tool.name == "write_memory")
    assert "facet" not in write.input_schema["properties"]
    assert write.input_schema["required"][0] == "agent_id"
    memory = Memory.objects.select_related("store").get(pk=written.structured_content["memory_id"])
    assert (memory.store.subject_external_id, memory.facet) == ("ada", "garden")
    assert _error_code(overridden) == UnknownField.code  # a pinned facet is no argument
    assert _error_code(missing_agent) == "AGENT_NOT_FOUND"


def test_a_bad_key_is_refused(setup: Setup, live_url: str) -> None:
    response = httpx.post(f"{live_url}/mcp/", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                          headers={"Authorization": "Bearer me_nope_nope"})
    assert response.status_code == 401
    assert response.json()["code"] == "AUTHENTICATION_FAILED"
    assert response.headers["WWW-Authenticate"] == "Bearer"
    # The SDK's client meets the same 401 and raises its own error out of its task groups.
    from mcp.shared.exceptions import MCPError

    statuses: list[int] = []
    with pytest.RaisesGroup(pytest.RaisesGroup(pytest.RaisesExc(MCPError, check=lambda e: e.code == -32603))):
        anyio.run(_refused_session, f"{live_url}/mcp/", "me_nope_nope", statuses)
    assert statuses and set(statuses) == {401}


def test_the_endpoint_answers_under_wsgi_too(setup: Setup) -> None:
    """`make run` serves the example project with runserver (WSGI): the stateless JSON exchange
    needs no ASGI server."""
    from django.test import Client as DjangoClient

    response = DjangoClient().post(
        f"/mcp/?agent={setup.agent.pk}", {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        content_type="application/json", headers={"Authorization": f"Bearer {setup.key}",
                                                  "Accept": "application/json, text/event-stream",
                                                  "MCP-Protocol-Version": "2025-06-18"})
    assert response.status_code == 200, response.content
    assert {tool["name"] for tool in response.json()["result"]["tools"]} >= {"search_knowledge", "list_memories"}


def test_a_read_only_key_lists_and_runs_only_the_reading_tools(setup: Setup, live_url: str) -> None:
    from ..factories import make_key

    key = make_key(setup.project, read_only=True)
    tools, (write, listed) = anyio.run(_session, f"{live_url}/mcp/?agent={setup.agent.pk}", key, [
        ("write_memory", {"content": "Nothing to see."}), ("list_memories", {})])
    assert {tool.name for tool in tools.tools} == {"search_knowledge", "open_memory", "list_memories"}
    assert _error_code(write) == "READ_ONLY_KEY"
    assert not listed.is_error
