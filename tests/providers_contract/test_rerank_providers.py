"""One contract every rerank provider passes, plus each HTTP back-end's failure modes.

The HTTP back-ends (TEI, Cohere-compatible, Jina-compatible) run against real HTTP servers on
127.0.0.1 that score with the real default model (cosine of MiniLM vectors stands in for a
cross-encoder), so the contract checks meaning and the index bookkeeping, not just shapes.
The dotted-path provider is an in-process class, as a host's own ONNX cross-encoder would be.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from memory_engine.conf import resolve_provider
from memory_engine.providers.embeddings.onnx import OnnxEmbeddingProvider
from memory_engine.providers.rerank import RerankError, RerankProvider
from memory_engine.providers.rerank.http import CohereRerankProvider, JinaRerankProvider, TEIRerankProvider
from tests.httpserver import LocalServer

_reference = OnnxEmbeddingProvider(model="all-MiniLM-L6-v2", dimensions=384)
_reference.embed_query("warm the model up")  # its first call loads it: not part of a timeout

QUERY = "How many days of paid vacation do employees get?"
PASSAGES = [
    "Expense reports must be filed within 30 days.",
    "Employees accrue 25 days of paid vacation per year.",
    "The office is closed on public holidays.",
]


def relevance(query: str, passages: Sequence[str]) -> list[float]:
    q, *vectors = _reference.embed_documents([query, *passages])
    return [sum(a * b for a, b in zip(q, v, strict=True)) for v in vectors]


class InProcessReranker(RerankProvider):
    """A dotted-path provider: scores in the process (here with the default embedder)."""

    default_model = "in-process-test"

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        return relevance(query, passages) if passages else []


class Backend:
    """A local server speaking one back-end's dialect; ``mode`` switches it to a failure.
    ``slow`` holds each request until ``release`` is set (30 s at most), then sets ``answered``."""

    def __init__(self, style: str) -> None:
        self.style = style
        self.mode = "ok"
        self.release = threading.Event()
        self.answered = threading.Event()

    def __call__(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[Any, ...]:
        if self.mode == "slow":
            self.release.wait(timeout=30)
            self.answered.set()
        if self.mode == "500":
            return 500, {"error": "overloaded"}
        request = json.loads(body)
        if self.style == "tei":
            assert path == "/rerank" and set(request) >= {"query", "texts"}
            scores = relevance(request["query"], request["texts"])
            rows: list[dict[str, Any]] = [{"index": i, "score": s} for i, s in enumerate(scores)]
            rows.sort(key=lambda row: -row["score"])  # TEI answers best first
            if self.mode == "malformed":
                rows = rows[:1]
            return 200, rows
        assert path == "/v1/rerank" and set(request) >= {"model", "query", "documents"}
        scores = relevance(request["query"], request["documents"])
        results: list[dict[str, Any]] = [{"index": i, "relevance_score": s} for i, s in enumerate(scores)]
        if self.style == "jina":
            for row in results:
                row["document"] = {"text": request["documents"][row["index"]]}
        results.sort(key=lambda row: -row["relevance_score"])
        if self.mode == "malformed":
            results[0]["index"] = results[1]["index"]
        answer: dict[str, Any] = {"results": results, "model": request["model"]}
        if self.style == "jina":
            answer["usage"] = {"total_tokens": 42}
        return 200, answer


class RerankProviderContract:
    """Mixin: subclasses provide a ``provider`` fixture."""

    def test_scores_follow_meaning_in_passage_order(self, provider: RerankProvider) -> None:
        scores = provider.score(QUERY, PASSAGES)
        assert len(scores) == len(PASSAGES)
        assert max(range(len(scores)), key=scores.__getitem__) == 1
        assert scores == pytest.approx(relevance(QUERY, PASSAGES), abs=1e-5)

    def test_no_passages_no_call(self, provider: RerankProvider) -> None:
        assert provider.score(QUERY, []) == []

    def test_many_passages(self, provider: RerankProvider) -> None:
        passages = [f"Passage {i} about {'vacation days' if i == 37 else 'quarterly revenue'}." for i in range(50)]
        scores = provider.score("vacation days", passages)
        assert len(scores) == 50 and max(range(50), key=scores.__getitem__) == 37

    def test_model_name(self, provider: RerankProvider) -> None:
        assert provider.model_name
        assert type(provider)(options=provider.options).model_name == type(provider).default_model


class HTTPContract(RerankProviderContract):
    style = ""
    provider_class: type[RerankProvider] = RerankProvider
    base_path = ""

    @pytest.fixture
    def backend(self) -> Iterator[tuple[Backend, LocalServer]]:
        backend = Backend(self.style)
        with LocalServer(backend) as server:
            yield backend, server
            backend.release.set()

    @pytest.fixture
    def provider(self, backend: tuple[Backend, LocalServer]) -> RerankProvider:
        return self.provider_class(model="rerank-test", options={"BASE_URL": backend[1].url + self.base_path,
                                                                 "API_KEY": "sk-rerank-test"}, timeout=1.0)

    def test_timeout_is_a_rerank_error(self, provider: RerankProvider, backend: tuple[Backend, LocalServer]) -> None:
        backend[0].mode = "slow"
        with pytest.raises(RerankError):
            provider.score(QUERY, PASSAGES)
        assert not backend[0].answered.is_set()  # the timeout ended the call while the server held it

    def test_server_error_is_a_rerank_error(self, provider: RerankProvider,
                                            backend: tuple[Backend, LocalServer]) -> None:
        backend[0].mode = "500"
        with pytest.raises(RerankError, match="500"):
            provider.score(QUERY, PASSAGES)

    def test_an_answer_not_scoring_each_passage_once_is_a_rerank_error(
            self, provider: RerankProvider, backend: tuple[Backend, LocalServer]) -> None:
        backend[0].mode = "malformed"
        with pytest.raises(RerankError):
            provider.score(QUERY, PASSAGES)

    def test_sends_the_key_and_never_shows_it(self, provider: RerankProvider,
                                              backend: tuple[Backend, LocalServer]) -> None:
        provider.score(QUERY, PASSAGES)
        assert backend[1].requests[-1]["headers"]["Authorization"] == "Bearer sk-rerank-test"
        backend[0].mode = "500"
        with pytest.raises(RerankError) as raised:
            provider.score(QUERY, PASSAGES)
        assert "sk-rerank-test" not in str(raised.value)


class TestTEIRerank(HTTPContract):
    style, provider_class = "tei", TEIRerankProvider


class TestCohereRerank(HTTPContract):
    style, provider_class = "cohere", CohereRerankProvider


class TestJinaRerank(HTTPContract):
    style, provider_class = "jina", JinaRerankProvider


class TestDottedPathRerank(RerankProviderContract):
    @pytest.fixture
    def provider(self) -> RerankProvider:
        cls = resolve_provider("rerank", f"{__name__}.InProcessReranker")
        return cls(model="in-process-test", options={})


def test_aliases_name_the_http_back_ends() -> None:
    assert resolve_provider("rerank", "tei") is TEIRerankProvider
    assert resolve_provider("rerank", "cohere") is CohereRerankProvider
    assert resolve_provider("rerank", "jina") is JinaRerankProvider
