"""Rerank providers behind one interface, chosen by MEMORY_ENGINE['RERANK']['PROVIDER']
(``tei``, ``cohere``, ``jina`` or a dotted path to a RerankProvider subclass, e.g. a host's own
in-process ONNX cross-encoder). None configured (the default): searches are not reranked.

    provider = get_rerank_provider()     # None when RERANK is None
    scores = provider.score("query", ["passage", ...])
"""

from __future__ import annotations

import threading

from memory_engine.conf import engine_settings, reloads_with_settings, resolve_provider

from .base import RerankError, RerankProvider

__all__ = ["DEFAULT_TIMEOUT", "DEFAULT_TOP_N", "RerankError", "RerankProvider", "get_rerank_provider",
           "rerank_top_n"]

#: Passages sent per search (the fused top), and how long a search waits for the answer.
DEFAULT_TOP_N = 50
DEFAULT_TIMEOUT = 5.0

_lock = threading.Lock()
_provider: RerankProvider | None = None
_loaded = False


def get_rerank_provider() -> RerankProvider | None:
    """The deployment's rerank provider, built once per process (again after MEMORY_ENGINE
    changes); None when RERANK is not configured."""
    global _provider, _loaded
    if _loaded:
        return _provider
    with _lock:
        if not _loaded:
            config = engine_settings.RERANK
            if config and config.get("PROVIDER"):
                _provider = resolve_provider("rerank", config["PROVIDER"])(
                    model=config.get("MODEL") or None, options=dict(config.get("OPTIONS") or {}),
                    timeout=float(config.get("TIMEOUT", DEFAULT_TIMEOUT)),
                )
            _loaded = True
    return _provider


def rerank_top_n() -> int:
    return int((engine_settings.RERANK or {}).get("TOP_N", DEFAULT_TOP_N))


@reloads_with_settings
def reset_rerank_provider() -> None:
    global _provider, _loaded
    with _lock:
        _provider, _loaded = None, False
