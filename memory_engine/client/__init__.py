"""A small typed client for memory_engine's REST API, for hosts in other processes (docs/mcp.md).

Synchronous, on httpx: a timeout on every request, retries with exponential backoff on 429
and 503 (and on a connection error) that honour the server's ``Retry-After``, and results as
dataclasses. It imports nothing of Django or of the app::

    from memory_engine.client import MemoryEngineClient

    with MemoryEngineClient("http://127.0.0.1:8000", api_key="me_…") as engine:
        written = engine.write_memory(memory_store_id="mst_…", content="Ada prefers tea.")
        for hit in engine.search("What does Ada drink?").results:
            print(hit.id, hit.score, hit.text)
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

__all__ = ["ApiError", "Memory", "MemoryEngineClient", "SearchHit", "SearchResult", "ToolResult", "WriteResult"]

#: The statuses worth another try: the server asks the caller to come back later.
RETRY_STATUSES = frozenset({429, 503})


class ApiError(Exception):
    """An answer with an error status: the API's ``code``, ``message`` and ``details``."""

    def __init__(self, status: int, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        # the server's body as sent (its code is the server's to choose, never this client's)
        self.body: dict[str, Any] = {"code": code, "message": message, "details": details or {}}

    @property
    def code(self) -> str:
        return str(self.body["code"])

    @property
    def message(self) -> str:
        return str(self.body["message"])

    @property
    def details(self) -> dict[str, Any]:
        return dict(self.body["details"])


@dataclass(frozen=True)
class Memory:
    id: str
    memory_store_id: str
    content: str
    kind: str = ""
    title: str = ""
    facet: str | None = None
    confidence: float | None = None
    tags: dict[str, Any] = field(default_factory=dict)
    created_at: str = ""
    invalidated_at: str | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Memory:
        return cls(id=data["id"], memory_store_id=data["memory_store_id"], content=data["content"],
                   kind=data.get("kind") or "", title=data.get("title") or "", facet=data.get("facet"),
                   confidence=data.get("confidence"), tags=data.get("tags") or {},
                   created_at=data.get("created_at") or "", invalidated_at=data.get("invalidated_at"))


@dataclass(frozen=True)
class WriteResult:
    """What the write funnel did: ``action`` is created, superseded or skipped."""

    action: str
    memory: Memory
    assertion_id: str
    superseded_memory_id: str | None = None


@dataclass(frozen=True)
class SearchHit:
    source: str
    id: str
    text: str
    score: float
    memory_store_id: str | None = None
    document_id: str | None = None


@dataclass(frozen=True)
class SearchResult:
    results: list[SearchHit]
    evidence: str
    degraded: list[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SearchResult:
        hits = [SearchHit(source=h["source"], id=h["id"], text=h["text"], score=h["score"],
                          memory_store_id=h.get("memory_store_id"), document_id=h.get("document_id"))
                for h in data.get("results", [])]
        return cls(results=hits, evidence=data.get("evidence", ""), degraded=list(data.get("degraded") or []))


@dataclass(frozen=True)
class ToolResult:
    """An agent tool call's answer: ``content`` is the text for the model."""

    content: str
    data: dict[str, Any]


def retry_after_seconds(value: str | None) -> float | None:
    """``Retry-After`` as seconds: delta-seconds or an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class MemoryEngineClient:
    """The REST API of one project, as one API key.

    ``retries`` more attempts after a 429, a 503 or a connection error, waiting ``Retry-After``
    when the server sends it (at most ``max_wait`` seconds), else ``backoff * 2**attempt``.
    """

    def __init__(self, base_url: str, *, api_key: str, timeout: float = 10.0, retries: int = 3,
                 backoff: float = 0.5, max_wait: float = 60.0, transport: httpx.BaseTransport | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self._http = httpx.Client(base_url=base_url.rstrip("/") + "/api/v1/", timeout=timeout,
                                  headers={"Authorization": f"Bearer {api_key}"}, transport=transport)
        self.retries = retries
        self.backoff = backoff
        self.max_wait = max_wait
        self._sleep = sleep

    def __enter__(self) -> MemoryEngineClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def request(self, method: str, path: str, *, json: Any = None, params: dict[str, Any] | None = None) -> Any:
        """One call with retries; the decoded JSON body (None for 204), or :class:`ApiError`."""
        attempt = 0
        while True:
            try:
                response = self._http.request(method, path.lstrip("/"), json=json, params=params)
            except httpx.TransportError:
                if attempt >= self.retries:
                    raise
                wait = self.backoff * 2 ** attempt
            else:
                if response.status_code not in RETRY_STATUSES or attempt >= self.retries:
                    return self._decode(response)
                hinted = retry_after_seconds(response.headers.get("Retry-After"))
                wait = hinted if hinted is not None else self.backoff * 2 ** attempt
            self._sleep(min(wait, self.max_wait))
            attempt += 1

    @staticmethod
    def _decode(response: httpx.Response) -> Any:
        if response.status_code >= 400:
            try:
                body = response.json()
            except ValueError:
                body = {}
            if not isinstance(body, dict):
                body = {}
            raise ApiError(response.status_code, body.get("code", "ERROR"),
                           body.get("message", response.reason_phrase), body.get("details"))
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    # --------------------------------------------------------------- memories

    def write_memory(self, *, memory_store_id: str, content: str, **fields: Any) -> WriteResult:
        """``POST /memories``: one fact through the write funnel (``kind``, ``facet``, ``tags``, …)."""
        data = self.request("POST", "memories", json={"memory_store_id": memory_store_id, "content": content,
                                                       **fields})
        return WriteResult(action=data["action"], memory=Memory.from_json(data), assertion_id=data["assertion_id"],
                           superseded_memory_id=data.get("superseded_memory_id"))

    def get_memory(self, memory_id: str) -> Memory:
        return Memory.from_json(self.request("GET", f"memories/{memory_id}"))

    def list_memories(self, **filters: Any) -> list[Memory]:
        """``GET /memories``: the first page of valid memories (filters as the API's query parameters)."""
        data = self.request("GET", "memories", params=filters)
        return [Memory.from_json(m) for m in (data["results"] if isinstance(data, dict) else data)]

    def forget_memory(self, memory_id: str) -> None:
        self.request("DELETE", f"memories/{memory_id}")

    def search(self, query: str, **options: Any) -> SearchResult:
        """``POST /knowledge/search`` (``memory_store_ids``, ``limit``, ``facet``, …)."""
        return SearchResult.from_json(self.request("POST", "knowledge/search", json={"query": query, **options}))

    # ---------------------------------------------------------------- agent tools

    def agent_tools(self, agent_id: str, *, provider: str = "openai") -> list[dict[str, Any]]:
        return list(self.request("GET", f"agents/{agent_id}/tools", params={"provider": provider})["tools"])

    def search_knowledge(self, agent_id: str, query: str, **arguments: Any) -> ToolResult:
        data = self.request("POST", f"agents/{agent_id}/tools/search_knowledge", json={"query": query, **arguments})
        return ToolResult(content=data["content"], data=data)

    def open_memory(self, agent_id: str, memory_id: str, **pins: Any) -> ToolResult:
        data = self.request("POST", f"agents/{agent_id}/tools/open_memory", json={"id": memory_id, **pins})
        return ToolResult(content=data["content"], data=data)
