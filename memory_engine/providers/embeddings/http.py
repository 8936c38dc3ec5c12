"""HTTP embedding providers: Ollama (/api/embed) and OpenAI-compatible (/v1/embeddings).

The OpenAI shape also serves vLLM, Hugging Face TEI, LiteLLM and most gateways.
OPTIONS: BASE_URL, API_KEY, TIMEOUT, RETRIES, BATCH_SIZE.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memory_engine.conf import engine_settings
from memory_engine.providers.http import ProviderHTTPError, post_json

from .base import EmbeddingError, EmbeddingProvider


class HTTPEmbeddingProvider(EmbeddingProvider):
    default_base_url = ""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.base_url = (self.options.get("BASE_URL") or self.default_base_url).rstrip("/")
        self.api_key = self.options.get("API_KEY", "")
        self.timeout = float(self.options.get("TIMEOUT", engine_settings.HTTP_TIMEOUT))
        self.retries = int(self.options.get("RETRIES", engine_settings.HTTP_RETRIES))
        self.batch_size = int(self.options.get("BATCH_SIZE", 64))

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start:start + self.batch_size])
            try:
                # The embedder's URL comes from the deployment's settings: not guarded.
                answer = post_json(self.url(), self.payload(batch), headers=self.headers(),
                                   timeout=self.timeout, retries=self.retries, guarded=False)
                vectors.extend(self.parse(answer))
            except ProviderHTTPError as exc:
                raise EmbeddingError(str(exc)) from exc
            except (KeyError, TypeError, ValueError, IndexError) as exc:
                raise EmbeddingError(f"{self.url()} answered an unexpected shape: {exc}") from exc
        return self.check_vectors(vectors, len(texts))

    def url(self) -> str:
        raise NotImplementedError(".url() must be overridden")

    def payload(self, texts: list[str]) -> dict[str, Any]:
        raise NotImplementedError(".payload() must be overridden")

    def parse(self, answer: Any) -> list[list[float]]:
        raise NotImplementedError(".parse() must be overridden")


class OllamaEmbeddingProvider(HTTPEmbeddingProvider):
    default_base_url = "http://localhost:11434"
    default_model = "all-minilm"

    def url(self) -> str:
        return f"{self.base_url}/api/embed"

    def payload(self, texts: list[str]) -> dict[str, Any]:
        return {"model": self.model_name, "input": texts}

    def parse(self, answer: Any) -> list[list[float]]:
        return answer["embeddings"]


class OpenAIEmbeddingProvider(HTTPEmbeddingProvider):
    default_base_url = "https://api.openai.com/v1"
    default_model = "text-embedding-3-small"

    def url(self) -> str:
        return f"{self.base_url}/embeddings"

    def payload(self, texts: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model_name, "input": texts}
        if self.options.get("SEND_DIMENSIONS"):
            body["dimensions"] = self.dimensions
        return body

    def parse(self, answer: Any) -> list[list[float]]:
        rows = sorted(answer["data"], key=lambda row: row["index"])
        return [row["embedding"] for row in rows]
