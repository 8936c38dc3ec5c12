"""A small typed client for memory_engine's REST API, for hosts in other processes (docs/mcp.md).

Synchronous, on httpx: a timeout on every request, retries with exponential backoff on 429
and 503 (and on a connection error) that honour the server's ``Retry-After``, and results as
dataclasses carrying every field the API answers (tests/client checks them against the
OpenAPI schema). It imports nothing of Django or of the app::

    from memory_engine.client import MemoryEngineClient

    with MemoryEngineClient("http://127.0.0.1:8000", api_key="me_…") as engine:
        written = engine.write_memory(memory_store_id="ms_…", content="Ada prefers tea.")
        for hit in engine.search("What does Ada drink?").results:
            print(hit.id, hit.score, hit.similarity_score, hit.document_path, hit.page, hit.text)

``base_url`` is the server's root; the client adds ``/api/v1/`` itself, and every ``path`` given
to :meth:`MemoryEngineClient.request` is relative to it: ``engine.request("GET", "memories")``
is ``GET <base_url>/api/v1/memories``.

Every failure is an :class:`ApiError` with a ``code``: the API's own for an error answer, and
for none (``status`` 0) one of :data:`CLIENT_CODES`; never an httpx exception.
"""

from __future__ import annotations

import dataclasses
import email.utils
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx

__all__ = ["CLIENT_CODES", "ApiError", "Memory", "MemoryEngineClient", "SearchHit", "SearchRanks", "SearchResult",
           "ToolResult", "WriteResult"]

#: The statuses worth another try: the server asks the caller to come back later.
RETRY_STATUSES = frozenset({429, 503})

#: The codes of failures without an error answer from the API (``ApiError.status`` is 0 for
#: all but ``INVALID_RESPONSE``, which keeps the status of the answer it could not read).
CLIENT_CODES = {
    "API_KEY_MISSING": "the client was given an empty API key",
    "INVALID_URL": "the base URL or path is no http(s) URL",
    "TIMEOUT": "no answer within the timeout (after the retries)",
    "CONNECTION_FAILED": "the server could not be reached (after the retries)",
    "TRANSPORT_ERROR": "the connection failed in another way (after the retries)",
    "INVALID_RESPONSE": "the answer is not the JSON the API sends",
}


class ApiError(Exception):
    """A failed call: the API's ``code``, ``message`` and ``details`` for an error answer (``status``
    its HTTP status), or one of :data:`CLIENT_CODES` when there was no usable answer."""

    def __init__(self, status: int, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        # an error answer's body as the server sent it (its code is the server's, never rewritten here)
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


_T = TypeVar("_T")


def _from_json(cls: type[_T], data: dict[str, Any], **values: Any) -> _T:
    """``cls`` from the API's fields of the same names (the dataclass defaults for absent ones);
    ``values`` for those built otherwise. Fields the API adds later are ignored until the client
    names them (tests/client/test_schema_fields.py fails meanwhile)."""
    for spec in dataclasses.fields(cls):  # type: ignore[arg-type]
        if spec.name not in values and spec.name in data:
            values[spec.name] = data[spec.name]
    return cls(**values)


@dataclass(frozen=True)
class Memory:
    """A memory (``GET /memories/{id}``, the ``Memory`` schema); times are ISO 8601 strings."""

    id: str
    memory_store_id: str
    content: str
    content_id: str = ""
    tags: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    source_type: str = ""
    about: dict[str, str] | None = None
    #: who or what it is about, as the write funnel compares it (docs/write-funnel.md, "Subjects")
    subjects: list[str] = field(default_factory=list)
    kind: str = ""
    title: str = ""
    summary: str = ""
    confidence: float | None = None
    facet: str | None = None
    expires_at: str | None = None
    evidence_count: int = 0
    reinforced_at: str | None = None
    trashed_at: str | None = None
    agent_id: str | None = None
    created_at: str = ""
    invalidated_at: str | None = None
    superseded_by_memory_id: str | None = None
    retention_class: str = ""
    provenance: str = ""
    lineage: str = ""
    consent_category: str = ""
    derived_from: list[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Memory:
        return _from_json(cls, data)


@dataclass(frozen=True)
class WriteResult:
    """What the write funnel did (``POST /memories``, the ``MemoryWriteResult`` schema): ``action``
    is created, superseded or skipped; ``memory`` the memory created or kept."""

    action: str
    memory: Memory
    assertion_id: str
    superseded_memory_id: str | None = None
    similarity: float | None = None
    decision_reason: str = ""
    changed_details: list[dict[str, Any]] = field(default_factory=list)
    potential_duplicates: list[dict[str, Any]] = field(default_factory=list)
    degraded: list[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WriteResult:
        return _from_json(cls, data, memory=Memory.from_json(data))


@dataclass(frozen=True)
class SearchRanks:
    """A hit's rank in each channel (1 = first); None when the channel did not find it (``graph``:
    the graph channel, when it ranked the hit; docs/entities.md). ``context``: for a conversation
    turn next to top hits, the best rank among them (docs/retrieval.md, *Neighbouring turns*)."""

    vector: int | None = None
    lexical: int | None = None
    graph: int | None = None
    context: int | None = None


@dataclass(frozen=True)
class SearchHit:
    """One result of ``POST /knowledge/search`` (the ``SearchHit`` schema): a document chunk
    (``document_*``, ``page``, ``chunk_index``) or a memory (``memory_store_*``, ``tier``, ``title``).
    ``score`` is the fused value, comparable only inside one answer; ``similarity_score`` the raw
    cosine (None for a lexical-only hit); ``relevance`` how surely it bears on the query (None when
    nothing was judged) and ``relevant`` whether it reaches the search's threshold."""

    source: str
    id: str
    text: str
    score: float
    similarity_score: float | None = None
    document_id: str | None = None
    document_path: str | None = None
    document_title: str | None = None
    page: int | None = None
    chunk_index: int | None = None
    memory_store_id: str | None = None
    memory_store_name: str | None = None
    tags: dict[str, Any] = field(default_factory=dict)
    created_at: str | None = None
    ranks: SearchRanks = field(default_factory=SearchRanks)
    lexical_score: float | None = None
    authority: float | None = None
    content_preview: str = ""
    has_full_body: bool = False
    tier: str | None = None
    title: str | None = None
    provenance: str | None = None
    lineage: str | None = None
    relevance: float | None = None
    relevant: bool = True
    entity_ids: list[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SearchHit:
        return _from_json(cls, data, ranks=_from_json(SearchRanks, data.get("ranks") or {}))


@dataclass(frozen=True)
class SearchResult:
    """``POST /knowledge/search`` (the ``SearchResult`` schema)."""

    results: list[SearchHit]
    evidence: str
    degraded: list[str] = field(default_factory=list)
    lexical_backend: str | None = None
    #: candidates the instruction guard kept out (they read as instructions to an AI)
    withheld: int = 0

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SearchResult:
        return _from_json(cls, data, results=[SearchHit.from_json(h) for h in data.get("results", [])],
                          evidence=data.get("evidence", ""), degraded=list(data.get("degraded") or []))


@dataclass(frozen=True)
class ToolResult:
    """An agent tool call's answer: ``content`` is the text for the model, ``data`` the whole
    body (``knowledge`` for search_knowledge, ``memory`` for open_memory, …)."""

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


def _transport_code(exc: httpx.TransportError) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return "TIMEOUT"
    if isinstance(exc, httpx.ConnectError):
        return "CONNECTION_FAILED"
    return "TRANSPORT_ERROR"


class MemoryEngineClient:
    """The REST API of one project, as one API key. ``base_url`` is the server's root
    (``http://127.0.0.1:8000``); the client adds ``/api/v1/``.

    ``retries`` more attempts after a 429, a 503 or a connection error, waiting ``Retry-After``
    when the server sends it (at most ``max_wait`` seconds), else ``backoff * 2**attempt``.
    """

    def __init__(self, base_url: str, *, api_key: str, timeout: float = 10.0, retries: int = 3,
                 backoff: float = 0.5, max_wait: float = 60.0, transport: httpx.BaseTransport | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if not api_key or not api_key.strip():
            raise ApiError(0, "API_KEY_MISSING", "api_key is empty; pass the project's API key (me_…).")
        try:
            self._http = httpx.Client(base_url=base_url.rstrip("/") + "/api/v1/", timeout=timeout,
                                      headers={"Authorization": f"Bearer {api_key.strip()}"}, transport=transport)
        except (httpx.InvalidURL, httpx.LocalProtocolError) as exc:  # a bad base URL, a key no header can carry
            raise ApiError(0, "INVALID_URL", f"Cannot use base_url {base_url!r}: {exc}") from exc
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
        """One call with retries; the decoded JSON body (None for 204), or :class:`ApiError`.

        ``path`` is relative to ``<base_url>/api/v1/`` (a leading ``/`` is ignored): ``"memories"``,
        ``"agents/agt_…/tools"``; never ``"/api/v1/memories"``.
        """
        attempt = 0
        while True:
            try:
                response = self._http.request(method, path.lstrip("/"), json=json, params=params)
            except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
                raise ApiError(0, "INVALID_URL", f"Cannot request {path!r}: {exc}") from exc
            except httpx.TransportError as exc:
                if attempt >= self.retries:
                    raise ApiError(0, _transport_code(exc), f"{method} {path}: {exc!r}") from exc
                wait = self.backoff * 2 ** attempt
            except httpx.HTTPError as exc:  # too many redirects, an undecodable body: no retry helps
                raise ApiError(0, "TRANSPORT_ERROR", f"{method} {path}: {exc!r}") from exc
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
        try:
            return response.json()
        except ValueError as exc:
            raise ApiError(response.status_code, "INVALID_RESPONSE",
                           f"The answer is not JSON ({response.headers.get('Content-Type', 'no type')}).") from exc

    # --------------------------------------------------------------- memories

    def write_memory(self, *, memory_store_id: str, content: str, **fields: Any) -> WriteResult:
        """``POST /memories``: one fact through the write funnel (``kind``, ``facet``, ``tags``, …)."""
        data = self.request("POST", "memories", json={"memory_store_id": memory_store_id, "content": content,
                                                       **fields})
        return WriteResult.from_json(data)

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
