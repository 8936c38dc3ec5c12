"""Settings for memory_engine: the host's ``MEMORY_ENGINE`` dict, read lazily and validated here, once.

Nothing is read at import time, so ``override_settings(MEMORY_ENGINE=...)`` works in tests.
Every key is declared once, in :data:`SETTINGS` (its default, its type and its row of
docs/settings.md, which ``make docs`` writes from there). The first read of a key merges the
host's value with its default, coerces it to that type (``"30"`` becomes ``30`` for an
integer) and caches the result, so callers read plain typed values and never coerce. A value
that does not fit raises ImproperlyConfigured naming the key and the expected type;
``manage.py check`` reports every such key at once (``memory_engine.E020``) and every unknown
key, with the closest known one (``memory_engine.W020``). The cache, and every cache
registered with :func:`reloads_with_settings` (providers, the funnel's scan mode), is dropped
on ``setting_changed``.

    MEMORY_ENGINE = {
        "EMBEDDING": {"PROVIDER": "onnx", "MODEL": "all-MiniLM-L6-v2", "DIMENSIONS": 384},
        "DUPLICATE_THRESHOLD": 0.95,
    }

The package, by seam: :mod:`.declaration` (the :class:`Setting` row, the coercers of this package's
own types, the nested dicts' keys), :mod:`.knobs` (:data:`SEARCH_KNOBS`, each search knob declared
once), the settings themselves by area in :mod:`.writing` (the embedder, the LLM, the write funnel,
the memory lifecycle, documents and their ingestion), :mod:`.reading` (lexical search, the fusion,
the vector and graph channels, ranking stage two, relevance, rerank) and :mod:`.operations`
(outbound HTTP, hardening, distillers, the entity graph, the instruction guard's sweep, memory
rules, webhooks, erasure receipts, read replicas), :mod:`.engine` (:data:`SETTINGS` in that order,
:data:`engine_settings`, :func:`reloads_with_settings`) and :mod:`.provider_aliases`
(:func:`resolve_provider`). Import from the package: the names below are its public API.
"""

from __future__ import annotations

from .declaration import (
    CONSENT_CATEGORY_NAMES,
    DEFAULT_DIMENSIONS,
    EMBEDDING_TYPES,
    LLM_OVERRIDABLE_NAMES,
    LLM_TYPES,
    RELEVANCE_MODEL_TYPES,
    RERANK_TYPES,
    SECTIONS,
    TIER_NAMES,
    Setting,
    consent_expiry_days,
    dimensions,
)
from .engine import (
    DEFAULTS,
    NESTED,
    SETTINGS,
    TYPES,
    EngineSettings,
    embedding_dimensions,
    engine_settings,
    reloads_with_settings,
)
from .knobs import SEARCH_KNOBS, Knob
from .provider_aliases import DOTTED_PATH_KINDS, EMBEDDING_PROVIDERS, PROVIDERS, resolve_provider

__all__ = [
    "CONSENT_CATEGORY_NAMES",
    "DEFAULTS",
    "DEFAULT_DIMENSIONS",
    "DOTTED_PATH_KINDS",
    "EMBEDDING_PROVIDERS",
    "EMBEDDING_TYPES",
    "LLM_OVERRIDABLE_NAMES",
    "LLM_TYPES",
    "NESTED",
    "PROVIDERS",
    "RELEVANCE_MODEL_TYPES",
    "RERANK_TYPES",
    "SEARCH_KNOBS",
    "SECTIONS",
    "SETTINGS",
    "TIER_NAMES",
    "TYPES",
    "EngineSettings",
    "Knob",
    "Setting",
    "consent_expiry_days",
    "dimensions",
    "embedding_dimensions",
    "engine_settings",
    "reloads_with_settings",
    "resolve_provider",
]
