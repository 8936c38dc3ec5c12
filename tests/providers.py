"""Test-only embedding providers: deterministic, failing, wrong-dimension.

Used where meaning does not matter, or to inject faults; anything about dedup
thresholds or ranking uses the real default model.
"""

from __future__ import annotations

import hashlib
import math
import re
import threading
from collections.abc import Sequence

from memory_engine.providers.embeddings.base import EmbeddingError, EmbeddingProvider

CALLS: list[int] = []
_lock = threading.Lock()


class HashingEmbeddingProvider(EmbeddingProvider):
    """Bag-of-words feature hashing: same words -> same vector; fast and offline."""

    default_model = "test-hashing"

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        with _lock:
            CALLS.append(len(texts))
        out = []
        for text in texts:
            vector = [0.0] * self.dimensions
            for word in re.findall(r"\w+", text.lower()):
                digest = hashlib.md5(word.encode()).digest()
                vector[int.from_bytes(digest[:4], "big") % self.dimensions] += 1.0
            norm = math.sqrt(sum(x * x for x in vector)) or 1.0
            out.append([x / norm for x in vector])
        return out


class FailingEmbeddingProvider(EmbeddingProvider):
    default_model = "test-failing"

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        with _lock:
            CALLS.append(len(texts))
        raise EmbeddingError("test provider always fails")


class WrongDimensionProvider(EmbeddingProvider):
    default_model = "test-wrong-dimension"

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return self.check_vectors([[0.1] * (self.dimensions + 1) for _ in texts], len(texts))


class FailAfterEmbeddingProvider(HashingEmbeddingProvider):
    """The hashing embedder, until ``FailAfterEmbeddingProvider.calls_left`` (when set) runs out:
    then every call fails (a provider that breaks in the middle of a long run)."""

    default_model = "test-fail-after"
    calls_left: int | None = None

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        cls = FailAfterEmbeddingProvider
        with _lock:
            if cls.calls_left is not None:
                if cls.calls_left <= 0:
                    raise EmbeddingError("test provider broke mid-run")
                cls.calls_left -= 1
        return super().embed_documents(texts)


class RefusingEmbeddingProvider(HashingEmbeddingProvider):
    """The hashing embedder, except that a call whose texts include one containing ``REFUSED``
    fails as a whole (a provider that rejects one input of a batch)."""

    default_model = "test-refusing"

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if any("REFUSED" in text for text in texts):
            with _lock:
                CALLS.append(len(texts))
            raise EmbeddingError("test provider refuses a text of this call")
        return super().embed_documents(texts)
