"""Embedding providers behind one interface, chosen by MEMORY_ENGINE['EMBEDDING']['PROVIDER'].

    provider = get_embedding_provider()     # None when no provider is configured
    vectors = provider.embed_documents(["a", "b"])
"""

from __future__ import annotations

import threading
from typing import Any

from memory_engine.conf import engine_settings, reloads_with_settings, resolve_provider
from memory_engine.exceptions import EmbeddingNotConfigured

from .base import EmbeddingError, EmbeddingProvider

__all__ = [
    "EmbeddingError",
    "EmbeddingProvider",
    "get_embedding_provider",
    "require_embedding_provider",
]

_lock = threading.Lock()
_provider: EmbeddingProvider | None = None
_loaded = False


def get_embedding_provider() -> EmbeddingProvider | None:
    """The deployment's provider, built once per process (again after MEMORY_ENGINE changes);
    None when none is configured."""
    global _provider, _loaded
    if _loaded:
        return _provider
    with _lock:
        if not _loaded:
            config = engine_settings.EMBEDDING
            name = config.get("PROVIDER")
            if name:
                _provider = resolve_provider("embedding", name)(
                    model=config["MODEL"], dimensions=config["DIMENSIONS"], options=dict(config["OPTIONS"]),
                )
            else:
                _provider = None
            _loaded = True
    return _provider


def require_embedding_provider() -> EmbeddingProvider:
    """The provider, or EmbeddingNotConfigured (503) where a vector is needed to read."""
    provider = get_embedding_provider()
    if provider is None:
        raise EmbeddingNotConfigured()
    return provider


@reloads_with_settings
def reset_embedding_provider(**kwargs: Any) -> None:
    global _provider, _loaded
    with _lock:
        _provider, _loaded = None, False
