"""Embedding providers behind one interface, chosen by MEMORY_ENGINE['EMBEDDING']['PROVIDER'].

    provider = get_embedding_provider()     # None when no provider is configured
    vectors = provider.embed_documents(["a", "b"])
"""

from __future__ import annotations

import threading
from typing import Any

from django.core.signals import setting_changed
from django.utils.module_loading import import_string

from memory_engine.conf import EMBEDDING_PROVIDERS, engine_settings
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
    """The deployment's provider, built once per process; None when none is configured."""
    global _provider, _loaded
    if _loaded:
        return _provider
    with _lock:
        if not _loaded:
            config = engine_settings.EMBEDDING
            name = config.get("PROVIDER")
            if name:
                cls = import_string(EMBEDDING_PROVIDERS.get(name, name))
                _provider = cls(
                    model=config.get("MODEL"),
                    dimensions=int(config.get("DIMENSIONS") or 384),
                    options=dict(config.get("OPTIONS") or {}),
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


def reset_embedding_provider(**kwargs: Any) -> None:
    global _provider, _loaded
    with _lock:
        _provider, _loaded = None, False


def _on_setting_changed(*, setting: str, **kwargs: Any) -> None:
    if setting == "MEMORY_ENGINE":
        reset_embedding_provider()


setting_changed.connect(_on_setting_changed)
