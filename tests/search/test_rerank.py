"""knowledge_search with a rerank provider (RERANK) on a real local TEI-style server: the top
of the fused list comes back in the provider's order; on failure or timeout the fused order
stands and ``degraded`` says ``rerank_unavailable``."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from memory_engine.selectors.search import SearchRequest, knowledge_search
from tests.httpserver import LocalServer

from .helpers import make_document

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("lexical_backend")]

LEAVE = ["Employees accrue 25 days of paid vacation per year.",
         "Paid vacation days carry over into the next year up to 5 days.",
         "Unused paid vacation is paid out when employees leave.",
         "The office is closed on public holidays."]


class Reverser:
    """Scores the passages in reverse of the order sent (the fused order), or fails. ``slow``
    holds each request until ``release`` is set (30 s at most), then sets ``answered``."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.seen: list[list[str]] = []
        self.release = threading.Event()
        self.answered = threading.Event()

    def __call__(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[Any, ...]:
        texts = json.loads(body)["texts"]
        self.seen.append(texts)
        if self.mode == "slow":
            self.release.wait(timeout=30)
            self.answered.set()
        if self.mode == "500":
            return 500, {}
        return 200, [{"index": i, "score": float(i)} for i in range(len(texts))]


@pytest.fixture
def reranker(settings: Any) -> Iterator[Reverser]:
    backend = Reverser()
    with LocalServer(backend) as server:
        settings.MEMORY_ENGINE = {**(getattr(settings, "MEMORY_ENGINE", None) or {}),
                                  "RERANK": {"PROVIDER": "tei", "OPTIONS": {"BASE_URL": server.url},
                                             "TOP_N": 3, "TIMEOUT": 0.5}}
        yield backend
        backend.release.set()


def test_rerank_orders_the_fused_top(project, settings, reranker):
    make_document(project, "/handbook/leave.txt", LEAVE)
    result = knowledge_search(SearchRequest(project=project, query="paid vacation days", limit=10))
    fused = reranker.seen[-1]
    assert len(fused) == 3  # TOP_N passages go in
    assert [h.text for h in result.results[:3]] == fused[::-1]
    assert result.degraded == [] and "rerank_ms" in result.timings


@pytest.mark.parametrize("mode", ["slow", "500"])
def test_rerank_failure_keeps_the_fused_order(project, settings, reranker, mode, client):
    make_document(project, "/handbook/leave.txt", LEAVE)
    reranker.mode = mode
    result = knowledge_search(SearchRequest(project=project, query="paid vacation days", limit=10))
    assert not reranker.answered.is_set()  # the timeout, not the server, ended the call: it still holds it
    assert result.degraded == ["rerank_unavailable"]
    assert [h.text for h in result.results[:3]] == reranker.seen[-1]
    body = client.post("/api/v1/knowledge/search", {"query": "paid vacation days"}, format="json").json()
    assert body["degraded"] == ["rerank_unavailable"]


def test_capabilities_name_the_reranker(client, reranker):
    body = client.get("/api/v1/capabilities").json()
    assert body["rerank_configured"] is True and body["rerank_model"] is None  # TEI serves one model


def test_a_deployment_relevance_model_may_weigh_the_rerank_score(project, settings, reranker):
    """The rerank score is a feature of the relevance model: a model of the deployment's own that
    weighs only it keeps the hits the provider scores high (the reverser: the last sent, 2.0)."""
    make_document(project, "/handbook/leave.txt", LEAVE)
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "RELEVANCE_MODEL": {
        "VERSION": "rerank-only", "GATE": {"intercept": 50}, "WEIGHTS": {"intercept": -15, "rerank": 10}}}
    result = knowledge_search(SearchRequest(project=project, query="paid vacation days", limit=10, min_relevance=0.5))
    assert [h.text for h in result.results] == [reranker.seen[-1][-1]]
    assert result.results[0].rerank_score == 2.0
