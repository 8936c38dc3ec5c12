"""MCP tool calls through the streamable-HTTP endpoint, in-process (the WSGI test client, inside
the test's transaction): the same view, transport and SDK server ``make run`` serves."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.test import Client

HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}


@dataclass
class ToolAnswer:
    #: The HTTP status of the exchange (401 for a refused key, else 200).
    status: int
    is_error: bool
    #: The structured content: the tool's result, or the REST error body ({code, message, details}).
    body: dict[str, Any]
    text: str

    @property
    def code(self) -> str | None:
        return self.body.get("code") if self.is_error else None


def mcp_call(key: str, name: str, arguments: dict[str, Any] | None = None, *, agent: str | None = None,
             subject: str | None = None) -> ToolAnswer:
    """One ``tools/call`` as ``key``, with the host's pins."""
    pins = {k: v for k, v in (("agent", agent), ("subject", subject)) if v}
    response = Client().post(f"/mcp/?{urlencode(pins)}", {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                                          "params": {"name": name, "arguments": arguments or {}}},
                             content_type="application/json", headers={**HEADERS, "Authorization": f"Bearer {key}"})
    text = response.content.decode()
    if response.status_code != 200:
        body = response.json()
        return ToolAnswer(response.status_code, True, body, text)
    result = response.json()["result"]
    return ToolAnswer(200, bool(result.get("isError")), result.get("structuredContent") or {}, text)


def mcp_tools(key: str, *, agent: str | None = None) -> list[str]:
    """The names ``tools/list`` offers ``key``."""
    pins = f"?agent={agent}" if agent else ""
    response = Client().post(f"/mcp/{pins}", {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
                             content_type="application/json", headers={**HEADERS, "Authorization": f"Bearer {key}"})
    return [tool["name"] for tool in response.json()["result"]["tools"]]
