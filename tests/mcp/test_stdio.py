"""``manage.py memory_engine_mcp`` as the subprocess a desktop MCP client starts, driven by the
SDK's own stdio client on the test database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import anyio
import pytest
from django.db import connection

from memory_engine.models import MemoryAssertion

from ..conftest import ROOT, TEST_PROVIDERS
from .conftest import Setup

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def _env() -> dict[str, str]:
    return dict(os.environ, MEMORY_ENGINE_DB_NAME=connection.settings_dict["NAME"], PYTHONUNBUFFERED="1",
                MEMORY_ENGINE_EMBEDDING_PROVIDER=f"{TEST_PROVIDERS}.HashingEmbeddingProvider")


def _command(*args: str) -> list[str]:
    return [sys.executable, str(ROOT / "manage.py"), "memory_engine_mcp", *args]


async def _session(args: list[str], calls: list[tuple[str, dict[str, Any]]]) -> tuple[Any, list[Any]]:
    from mcp import Client, StdioServerParameters

    command = _command(*args)
    params = StdioServerParameters(command=command[0], args=command[1:], env=_env(), cwd=str(ROOT))
    async with Client(params) as client:
        tools = await client.list_tools()
        results = [await client.call_tool(name, arguments) for name, arguments in calls]
    return tools, results


def test_tools_over_stdio(setup: Setup) -> None:
    args = ["--key", setup.key, "--agent", setup.agent.pk, "--facet", "garden"]
    tools, (written, found, bad, foreign) = anyio.run(_session, args, [
        ("write_memory", {"content": "The roses need water on Fridays.", "kind": "fact"}),
        ("search_knowledge", {"query": "when do the roses need water"}),
        ("search_knowledge", {"query": "roses", "limit": 500}),
        ("forget_memory", {"id": setup.other_memory_id}),
    ])
    assert {tool.name for tool in tools.tools} == {"search_knowledge", "write_memory", "open_memory",
                                                   "list_memories", "forget_memory"}
    assert all("facet" not in tool.input_schema["properties"] for tool in tools.tools)  # pinned
    memory_id = written.structured_content["memory_id"]
    row = MemoryAssertion.objects.select_related("memory").get(memory_id=memory_id)
    assert (row.mechanism, row.principal, row.memory.facet) == (
        "tool", f"key:{setup.project.api_keys.get().pk}", "garden")
    assert memory_id in found.content[0].text
    assert bad.is_error and json.loads(bad.content[0].text)["code"] == "LIMIT_INVALID"  # as REST answers
    assert foreign.is_error and foreign.structured_content["code"] == "NOT_FOUND"


def test_a_bad_key_stops_the_command(setup: Setup) -> None:
    done = subprocess.run(_command("--key", "me_nope_nope"), env=_env(), cwd=ROOT, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode != 0
    assert "AUTHENTICATION_FAILED" in done.stderr
