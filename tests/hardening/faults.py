"""Fault injection helpers for suite 4: an embedding endpoint that fails on demand."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from ..httpserver import LocalServer
from ..providers import HashingEmbeddingProvider

#: Model name the fault tests configure (the vectors come from the hashing embedder).
MODEL = "fault-test-model"


class EmbeddingEndpoint(LocalServer):
    """Ollama ``/api/embed`` and OpenAI ``/embeddings`` on 127.0.0.1.

    ``mode``: ``ok``, ``500``, ``timeout`` (answers after ``delay`` seconds) or
    ``wrong_dimensions`` (383-dimensional vectors). ``block_on``: a request holding a text
    with that marker waits until ``release`` is set (``blocked`` is set meanwhile) — the
    worker is then stuck at a known point and can be killed there.
    """

    def __init__(self) -> None:
        self.mode = "ok"
        self.delay = 1.0
        self.block_on: str | None = None
        self.blocked = threading.Event()
        self.release = threading.Event()
        self.vectors = HashingEmbeddingProvider(model=MODEL, dimensions=384)
        super().__init__(self._answer)

    def _answer(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, Any]:
        payload = json.loads(body or b"{}")
        texts = payload.get("input") or []
        texts = [texts] if isinstance(texts, str) else texts
        if self.block_on and any(self.block_on in text for text in texts):
            self.blocked.set()
            self.release.wait(60)
        if self.mode == "500":
            return 500, {"error": "the embedding backend fell over"}
        if self.mode == "timeout":
            time.sleep(self.delay)
        vectors = self.vectors.embed_documents(texts)
        if self.mode == "wrong_dimensions":
            vectors = [vector[:-1] for vector in vectors]
        if path.endswith("/api/embed"):
            return 200, {"model": MODEL, "embeddings": vectors}
        return 200, {"object": "list", "model": MODEL,
                     "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]}

    def unblock(self) -> None:
        self.block_on = None
        self.release.set()
