"""Embedding providers behind one interface, following the embedding-model registry.

    provider = get_embedding_provider()     # None when no provider is configured
    vectors = provider.embed_documents(["a", "b"])

The provider is the registry's active model (memory_engine.models.EmbeddingModel), reached
through the settings that name it: MEMORY_ENGINE['EMBEDDING'] when it names that model, else
the entry of MEMORY_ENGINE['EMBEDDING_MODELS'] that does. Provider code is only ever named in
settings. Each process re-reads the active model at most every RECHECK_SECONDS, so a switch
made by another process is followed within that time.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from django.db import DatabaseError, connection

from memory_engine.conf import (
    DEFAULT_DIMENSIONS,
    EMBEDDING_TYPES,
    engine_settings,
    reloads_with_settings,
    resolve_provider,
)
from memory_engine.exceptions import EmbeddingNotConfigured
from memory_engine.setting_types import InvalidSetting, section

from .base import EmbeddingError, EmbeddingProvider

__all__ = [
    "EmbeddingError",
    "EmbeddingProvider",
    "build_embedding_provider",
    "embedding_model_config",
    "get_embedding_provider",
    "refresh_embedding_provider",
    "require_embedding_provider",
]

#: How long a process trusts its idea of the active model before reading the registry again.
RECHECK_SECONDS = 1.0

_lock = threading.Lock()
_provider: EmbeddingProvider | None = None
_active: tuple[str, int] | None = None
_loaded = False
_checked_at = 0.0


def embedding_model_config(name: str) -> dict[str, Any] | None:
    """The settings of registry name ``name``: "EMBEDDING" is MEMORY_ENGINE['EMBEDDING'], any other
    name a key of MEMORY_ENGINE['EMBEDDING_MODELS']; None when settings hold no such name."""
    if name == "EMBEDDING":
        return dict(engine_settings.EMBEDDING)
    raw = engine_settings.EMBEDDING_MODELS.get(name)
    if not isinstance(raw, dict):
        return None
    try:
        config = section(EMBEDDING_TYPES)(raw)
    except InvalidSetting:
        return None
    return {"PROVIDER": None, "MODEL": None, "DIMENSIONS": DEFAULT_DIMENSIONS, "OPTIONS": {}, **config}


def build_embedding_provider(config: dict[str, Any]) -> EmbeddingProvider | None:
    """A provider from one settings dict (PROVIDER, MODEL, DIMENSIONS, OPTIONS); None without PROVIDER."""
    name = config.get("PROVIDER")
    if not name:
        return None
    provider: EmbeddingProvider = resolve_provider("embedding", name)(
        model=config.get("MODEL"), dimensions=config.get("DIMENSIONS") or DEFAULT_DIMENSIONS,
        options=dict(config.get("OPTIONS") or {}),
    )
    provider.provider_name = str(name)
    return provider


def _registry_active() -> tuple[str, int] | None:
    """(model, dimensions) of the registry's active row; None before the registry exists."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT to_regclass('memory_engine_embeddingmodel') IS NOT NULL")
            if not cursor.fetchone()[0]:
                return None
            cursor.execute("SELECT model, dimensions FROM memory_engine_embeddingmodel WHERE state = 'active'")
            row = cursor.fetchone()
    except DatabaseError:
        return None
    return (row[0], row[1]) if row else None


def _config_for(active: tuple[str, int] | None) -> dict[str, Any]:
    """The settings reaching the active model: EMBEDDING if it names it, else a matching
    EMBEDDING_MODELS entry, else EMBEDDING (the system check reports the mismatch)."""
    main = dict(engine_settings.EMBEDDING)
    if active is None or (main.get("MODEL"), main.get("DIMENSIONS")) == active:
        return main
    for name in engine_settings.EMBEDDING_MODELS:
        config = embedding_model_config(name)
        if config is not None and (config.get("MODEL"), config.get("DIMENSIONS")) == active:
            return config
    return main


def get_embedding_provider() -> EmbeddingProvider | None:
    """The active model's provider, built once per process and rebuilt when the registry's
    active model or MEMORY_ENGINE changes; None when EMBEDDING's PROVIDER is None."""
    global _provider, _active, _loaded, _checked_at
    if _loaded and time.monotonic() - _checked_at < RECHECK_SECONDS:
        return _provider
    with _lock:
        if _loaded and time.monotonic() - _checked_at < RECHECK_SECONDS:
            return _provider
        active = _registry_active()
        if not _loaded or active != _active:
            if not engine_settings.EMBEDDING.get("PROVIDER"):
                _provider = None  # embedding is off for this deployment
            else:
                _provider = build_embedding_provider(_config_for(active))
            _active, _loaded = active, True
        _checked_at = time.monotonic()
    return _provider


def require_embedding_provider() -> EmbeddingProvider:
    """The provider, or EmbeddingNotConfigured (503) where a vector is needed to read."""
    provider = get_embedding_provider()
    if provider is None:
        raise EmbeddingNotConfigured()
    return provider


def refresh_embedding_provider() -> EmbeddingProvider | None:
    """Read the registry now (after a switch, or a query that met the new columns)."""
    global _checked_at
    with _lock:
        _checked_at = 0.0
    return get_embedding_provider()


@reloads_with_settings
def reset_embedding_provider(**kwargs: Any) -> None:
    global _provider, _loaded, _active
    with _lock:
        _provider, _loaded, _active = None, False, None
