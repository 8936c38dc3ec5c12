"""HTTP rerank providers in the styles people run: Hugging Face TEI (``POST /rerank``),
Cohere-compatible (``POST /v1/rerank``) and Jina-compatible (``POST /v1/rerank``).

OPTIONS: BASE_URL, API_KEY, RETRIES (default 0: a search waits for the answer). The URL comes
from the deployment's settings, as the embedder's does, so the calls are not guarded
(memory_engine.guards is for URLs API callers or staff configure).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memory_engine.providers.http import ProviderHTTPError, post_json

from .base import RerankError, RerankProvider


class HTTPRerankProvider(RerankProvider):
    default_base_url = ""
    path = ""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.base_url = (self.options.get("BASE_URL") or self.default_base_url).rstrip("/")
        self.api_key = self.options.get("API_KEY", "")
        self.retries = int(self.options.get("RETRIES", 0))

    def url(self) -> str:
        return f"{self.base_url}{self.path}"

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        try:
            answer = post_json(self.url(), self.payload(query, list(passages)), headers=self.headers(),
                               timeout=self.timeout, retries=self.retries, guarded=False)
            return self.scores_by_index(self.parse(answer), len(passages))
        except ProviderHTTPError as exc:
            raise RerankError(str(exc)) from exc
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise RerankError(f"{self.url()} answered an unexpected shape: {exc!r}") from exc

    def payload(self, query: str, passages: list[str]) -> dict[str, Any]:
        raise NotImplementedError(".payload() must be overridden")

    def parse(self, answer: Any) -> list[tuple[int, float]]:
        raise NotImplementedError(".parse() must be overridden")


class TEIRerankProvider(HTTPRerankProvider):
    """Hugging Face text-embeddings-inference: ``{"query", "texts"}`` -> ``[{"index", "score"}]``."""

    default_base_url = "http://localhost:8080"
    path = "/rerank"

    def payload(self, query: str, passages: list[str]) -> dict[str, Any]:
        return {"query": query, "texts": passages, "truncate": True, "raw_scores": False}

    def parse(self, answer: Any) -> list[tuple[int, float]]:
        return [(row["index"], row["score"]) for row in answer]


class CohereRerankProvider(HTTPRerankProvider):
    """Cohere-compatible: ``{"model", "query", "documents", "top_n"}`` ->
    ``{"results": [{"index", "relevance_score"}]}`` (also vLLM, LiteLLM, Infinity)."""

    default_base_url = "https://api.cohere.com"
    path = "/v1/rerank"

    def payload(self, query: str, passages: list[str]) -> dict[str, Any]:
        return {"model": self.model_name, "query": query, "documents": passages, "top_n": len(passages),
                "return_documents": False}

    def parse(self, answer: Any) -> list[tuple[int, float]]:
        return [(row["index"], row["relevance_score"]) for row in answer["results"]]


class JinaRerankProvider(CohereRerankProvider):
    """Jina-compatible: the Cohere request shape; results may echo each document as
    ``{"text": ...}`` (ignored) and ``usage``."""

    default_base_url = "https://api.jina.ai"
    default_model = "jina-reranker-v2-base-multilingual"
