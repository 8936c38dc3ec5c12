"""The embedding provider interface."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from memory_engine.chunking import estimate_tokens
from memory_engine.conf import DEFAULT_DIMENSIONS


class EmbeddingError(Exception):
    """The provider could not embed; writes continue without a vector."""


class EmbeddingProvider(ABC):
    """Turns texts into L2-normalised vectors of ``dimensions`` floats.

    Subclasses implement :meth:`embed_documents`; :meth:`embed_query` defaults to it.
    :meth:`count_tokens` (used to size document chunks) estimates from the length unless
    the provider has its model's tokenizer at hand; ``max_tokens`` is the model's input
    window when known (text past it is not embedded).
    Implementations must be thread-safe and raise EmbeddingError on any failure,
    including an answer with the wrong dimension.
    """

    #: Name recorded with every stored vector (MemoryContent/Chunk.embedding_model).
    model_name: str
    dimensions: int

    def __init__(self, *, model: str | None = None, dimensions: int = DEFAULT_DIMENSIONS,
                 options: dict[str, Any] | None = None) -> None:
        self.model_name = model or self.default_model
        self.dimensions = dimensions
        self.options = options or {}

    default_model = ""
    max_tokens: int | None = None
    #: The PROVIDER setting it was built from (an alias or a dotted path).
    provider_name = ""

    @abstractmethod
    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        raise NotImplementedError(".embed_documents() must be overridden")

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """How many tokens the model sees in each text (no special tokens).

        This default estimates (``memory_engine.chunking.estimate_tokens``, four
        characters a token); providers with a tokenizer override it.
        """
        return estimate_tokens(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    def check_vectors(self, vectors: Sequence[Sequence[float]], expected: int) -> list[list[float]]:
        """Validate count and dimension of a provider's answer."""
        if len(vectors) != expected:
            raise EmbeddingError(f"{self.model_name} returned {len(vectors)} vectors for {expected} texts")
        out = []
        for vector in vectors:
            if len(vector) != self.dimensions:
                raise EmbeddingError(
                    f"{self.model_name} returned {len(vector)} dimensions; {self.dimensions} are configured"
                )
            out.append([float(x) for x in vector])
        return out
