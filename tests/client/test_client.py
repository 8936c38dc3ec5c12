"""memory_engine.client: against the real API served by uvicorn, and against a small server that
answers 429/503 with Retry-After."""

from __future__ import annotations

from typing import Any

import pytest

from memory_engine.client import ApiError, MemoryEngineClient, retry_after_seconds
from memory_engine.models import MemoryAssertion

from ..httpserver import LocalServer
from ..mcp.conftest import Setup, live_url, setup  # noqa: F401 - fixtures

pytestmark = pytest.mark.timeout(120)


def test_round_trip_against_the_real_api(setup: Setup, live_url: str) -> None:  # noqa: F811
    with MemoryEngineClient(live_url, api_key=setup.key, timeout=30) as engine:
        written = engine.write_memory(memory_store_id=setup.store.pk, content="Grace keeps bees.", kind="fact")
        assert written.action == "created" and written.memory.content == "Grace keeps bees."
        again = engine.write_memory(memory_store_id=setup.store.pk, content="Grace keeps bees.")
        assert (again.action, again.memory.id) == ("skipped", written.memory.id)
        assert [m.id for m in engine.list_memories(memory_store_id=setup.store.pk)] == [written.memory.id]
        hits = engine.search("who keeps bees", memory_store_ids=[setup.store.pk]).results
        assert hits[0].id == written.memory.id
        tool = engine.search_knowledge(setup.agent.pk, "bees")
        assert written.memory.id in tool.content
        engine.forget_memory(written.memory.id)
        with pytest.raises(ApiError) as caught:
            engine.write_memory(memory_store_id="ms_nope", content="x")
        assert (caught.value.status, caught.value.code) == (404, "MEMORY_STORE_NOT_FOUND")
    assert MemoryAssertion.objects.get(memory_id=written.memory.id, outcome="forgotten").mechanism == "api"
    with MemoryEngineClient(live_url, api_key="me_nope_nope") as engine, pytest.raises(ApiError) as caught:
        engine.get_memory(written.memory.id)
    assert (caught.value.status, caught.value.code) == (401, "AUTHENTICATION_FAILED")


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
