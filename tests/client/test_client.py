"""memory_engine.client: against the real API served by Django's live server (pytest-django's
``live_server``: no optional extra needed, so nothing here can be skipped), and against a small
server that answers 429/503 with Retry-After; every failure is an ApiError with a code."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from memory_engine.client import CLIENT_CODES, ApiError, MemoryEngineClient, SearchRanks, retry_after_seconds
from memory_engine.models import MemoryAssertion

from ..httpserver import LocalServer
from ..search.helpers import make_document
from ..tool_setup import Setup, setup  # noqa: F401 - fixture

pytestmark = pytest.mark.timeout(120)


def test_round_trip_against_the_real_api(setup: Setup, live_server: Any) -> None:  # noqa: F811
    make_document(setup.project, "/garden/bees.pdf", ["Hives need shade.", "Grace keeps bees in the orchard."],
                  title="Bees", pages=True)
    with MemoryEngineClient(live_server.url, api_key=setup.key, timeout=30) as engine:
        written = engine.write_memory(memory_store_id=setup.store.pk, content="Grace keeps bees.", kind="fact")
        assert written.action == "created" and written.memory.content == "Grace keeps bees."
        assert (written.memory.kind, written.memory.source_type, written.decision_reason) == (
            "fact", "manual", "below_threshold")
        again = engine.write_memory(memory_store_id=setup.store.pk, content="Grace keeps bees.")
        assert (again.action, again.memory.id, again.similarity) == ("skipped", written.memory.id, 1.0)
        assert [m.id for m in engine.list_memories(memory_store_id=setup.store.pk)] == [written.memory.id]
        hits = engine.search("who keeps bees", memory_store_ids=[setup.store.pk]).results
        assert hits[0].id == written.memory.id
        assert (hits[0].memory_store_id, hits[0].tier) == (setup.store.pk, setup.store.tier)
        # A document hit keeps what cites it: path, page, per-channel ranks, the raw cosine.
        found = engine.search("Grace keeps bees in the orchard", document_paths=["/garden/"])
        top = found.results[0]
        assert (top.source, top.document_path, top.document_title, top.page, top.chunk_index) == (
            "document", "/garden/bees.pdf", "Bees", 2, 1)
        assert isinstance(top.ranks, SearchRanks) and top.ranks.vector == 1
        assert top.similarity_score is not None and 0.9 < top.similarity_score <= 1.0001
        assert found.lexical_backend in ("bm25", "tsvector") and found.evidence
        tool = engine.search_knowledge(setup.agent.pk, "bees")
        assert written.memory.id in tool.content
        engine.forget_memory(written.memory.id)
        with pytest.raises(ApiError) as caught:
            engine.write_memory(memory_store_id="ms_nope", content="x")
        assert (caught.value.status, caught.value.code) == (400, "UNKNOWN_SCOPE")
        # Paths are relative to /api/v1/: the full path is another URL, which the API does not know.
        with pytest.raises(ApiError) as caught:
            engine.request("GET", "/api/v1/memories")
        assert caught.value.status == 404
    assert MemoryAssertion.objects.get(memory_id=written.memory.id, outcome="forgotten").mechanism == "api"
    with MemoryEngineClient(live_server.url, api_key="me_nope_nope") as engine, pytest.raises(ApiError) as caught:
        engine.get_memory(written.memory.id)
    assert (caught.value.status, caught.value.code) == (401, "AUTHENTICATION_FAILED")


@pytest.mark.parametrize("key", ["", "   "])
def test_an_empty_key_is_an_api_error(key: str) -> None:
    with pytest.raises(ApiError) as caught:
        MemoryEngineClient("http://127.0.0.1:8000", api_key=key)
    assert (caught.value.status, caught.value.code) == (0, "API_KEY_MISSING")


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_transport_failures_are_api_errors_with_a_code() -> None:
    waits: list[float] = []
    with MemoryEngineClient(f"http://127.0.0.1:{closed_port()}", api_key="me_a_b", retries=2,
                            sleep=waits.append) as engine, pytest.raises(ApiError) as caught:
        engine.request("GET", "memories")
    assert (caught.value.status, caught.value.code, waits) == (0, "CONNECTION_FAILED", [0.5, 1.0])

    with pytest.raises(ApiError) as caught:
        MemoryEngineClient("http://[::1", api_key="me_a_b")
    assert caught.value.code == "INVALID_URL"
    with MemoryEngineClient("localhost:8000", api_key="me_a_b") as engine, pytest.raises(ApiError) as caught:
        engine.request("GET", "memories")  # no scheme
    assert (caught.value.status, caught.value.code) == (0, "INVALID_URL")

    def silent(method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[Any, ...]:
        import time

        time.sleep(1)
        return 200, {}

    def not_json(method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[Any, ...]:
        return 200, b"<html>a proxy's page</html>", {"Content-Type": "text/html"}

    with LocalServer(silent) as server, MemoryEngineClient(server.url, api_key="me_a_b", timeout=0.2, retries=1,
                                                           sleep=waits.append) as engine:
        with pytest.raises(ApiError) as caught:
            engine.request("GET", "memories")
        assert (caught.value.status, caught.value.code) == (0, "TIMEOUT")
    with LocalServer(not_json) as server, MemoryEngineClient(server.url, api_key="me_a_b") as engine:
        with pytest.raises(ApiError) as caught:
            engine.request("GET", "memories")
        assert (caught.value.status, caught.value.code) == (200, "INVALID_RESPONSE")
    assert {"API_KEY_MISSING", "INVALID_URL", "TIMEOUT", "CONNECTION_FAILED", "INVALID_RESPONSE"} <= set(CLIENT_CODES)


def test_retries_429_and_503_honouring_retry_after() -> None:
    answers = [(429, {"code": "THROTTLED", "message": "slow down"}, {"Retry-After": "2"}),
               (503, {"code": "UNAVAILABLE", "message": "busy"}),
               (200, {"kind": "fact"})]

    def handler(method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[Any, ...]:
        return answers.pop(0)

    waits: list[float] = []
    with LocalServer(handler) as server, \
            MemoryEngineClient(server.url, api_key="me_a_b", backoff=0.25, sleep=waits.append) as engine:
        assert engine.request("GET", "memory-schema") == {"kind": "fact"}
        assert [r["path"] for r in server.requests] == ["/api/v1/memory-schema"] * 3
        assert server.requests[0]["headers"]["Authorization"] == "Bearer me_a_b"
    assert waits == [2.0, 0.5]  # Retry-After, then the backoff of the second attempt


def test_gives_up_after_the_retries_with_the_api_error() -> None:
    def handler(method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[Any, ...]:
        return 503, {"code": "EMBEDDING_UNAVAILABLE", "message": "down", "details": {}}, {"Retry-After": "1"}

    waits: list[float] = []
    with LocalServer(handler) as server, \
            MemoryEngineClient(server.url, api_key="me_a_b", retries=2, sleep=waits.append) as engine, \
            pytest.raises(ApiError) as caught:
        engine.request("GET", "memories")
    assert (caught.value.status, caught.value.code, waits) == (503, "EMBEDDING_UNAVAILABLE", [1.0, 1.0])
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0
    assert retry_after_seconds("soon") is None
