"""Settings for memory_engine, read lazily from the host's ``MEMORY_ENGINE`` dict.

Nothing is read at import time, so ``override_settings(MEMORY_ENGINE=...)`` works in
tests; the cache is dropped on ``setting_changed``.

    MEMORY_ENGINE = {
        "EMBEDDING": {"PROVIDER": "onnx", "MODEL": "all-MiniLM-L6-v2", "DIMENSIONS": 384},
        "DUPLICATE_THRESHOLD": 0.95,
    }
"""

from __future__ import annotations

import copy
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed

DEFAULTS: dict[str, Any] = {
    # One deployment-wide embedding model. PROVIDER is an alias (onnx,
    # sentence_transformers, ollama, openai) or a dotted path to an
    # EmbeddingProvider subclass; None disables embedding.
    "EMBEDDING": {
        "PROVIDER": "onnx",
        "MODEL": "all-MiniLM-L6-v2",
        "DIMENSIONS": 384,
        "OPTIONS": {},
    },
    # OpenAI-compatible chat endpoint for rule extraction and the same-fact judge:
    # {"BASE_URL": "http://localhost:11434/v1", "API_KEY": "", "MODEL": "...", "TIMEOUT": 30}
    "LLM": None,
    # Write funnel.
    "DUPLICATE_THRESHOLD": 0.95,
    "SUPERSEDE_THRESHOLD": 0.90,
    "MAX_MEMORY_CHARS": 32 * 1024,
    # Before skipping a near-duplicate, compare numbers, dates, names, negation...:
    # a changed detail turns the skip into a supersede (memory_engine.details).
    "CHANGED_DETAIL_GATE": True,
    # Optional same-fact judge (stores opt in with judge_enabled; needs LLM): asked only
    # when the best match's cosine lies in [JUDGE_FLOOR, supersede threshold).
    "JUDGE_FLOOR": 0.75,
    "JUDGE_TIMEOUT": 5.0,
    # Stores with at most this many contents are searched exactly for dedup; larger
    # stores use the HNSW index (with HNSW_EF_SEARCH).
    "DEDUP_EXACT_SCAN_MAX": 20000,
    # Quotas (None = unlimited); a Project may override both.
    "MAX_MEMORIES_PER_PROJECT": None,
    "MAX_DOCUMENT_BYTES_PER_PROJECT": None,
    # Documents.
    "MAX_UPLOAD_BYTES": 50 * 1024 * 1024,
    "SYNC_INGESTION_MAX_BYTES": 2 * 1024 * 1024,
    "MAX_PDF_PAGES": 2000,
    "EMBEDDING_BATCH_SIZE": 32,
    "INGESTION_HEARTBEAT_TIMEOUT": 300,
    "INGESTION_MAX_ATTEMPTS": 3,
    # How often the scheduled sweep looks for stalled ingestions (django-q2 Schedule).
    "INGESTION_SWEEP_MINUTES": 1,
    # Pending converters: how long the signed callback URL stays valid; file_delivery=download_url:
    # how long the signed download URL stays valid (seconds).
    "CONVERTER_CALLBACK_TTL": 3600,
    "DOWNLOAD_URL_TTL": 900,
    # Absolute base of the callback and download URLs given to HTTP converters, e.g.
    # "https://memory.example.com"; None = the base URL of the request that created the document.
    "PUBLIC_BASE_URL": None,
    # Import-path prefixes API callers may name as `callable` converters (admins may name
    # any). Empty: callable converters are admin-only.
    "CONVERTER_CALLABLE_PREFIXES": [],
    # Read side.
    # Text search config of the lexical indexes (stemming, stop words). Fixed when the
    # indexes are built (migration 0004, `manage.py memory_engine_rebuild_lexical`); a
    # different value later is system check error memory_engine.E010 (docs/retrieval.md).
    "KNOWLEDGE_TEXT_SEARCH_CONFIG": "english",
    # "auto": pg_textsearch BM25 when its indexes exist, else the tsvector fallback;
    # "tsvector": always the fallback (diagnosis, tests).
    "KNOWLEDGE_LEXICAL_BACKEND": "auto",
    # tsvector fallback: rows matching any query term, the top KNOWLEDGE_BM25_CANDIDATES by
    # ts_rank_cd re-scored by Okapi BM25 (IDF from the index's ANALYZE statistics); terms in
    # more than KNOWLEDGE_BM25_MAX_DF of the rows do not select candidates.
    "KNOWLEDGE_BM25_CANDIDATES": 200,
    "KNOWLEDGE_BM25_K1": 1.2,
    "KNOWLEDGE_BM25_B": 0.75,
    "KNOWLEDGE_BM25_MAX_DF": 0.1,
    # Fusion (docs/retrieval.md, chosen with bench/eval_retrieval.py: docs/benchmarks.md):
    # each channel contributes its top max(limit, depth) candidates; score = sum of
    # weight / (SEARCH_RRF_K + rank). A request may override rrf_k and both weights.
    "SEARCH_RRF_K": 5,
    "SEARCH_VECTOR_DEPTH": 20,
    "SEARCH_LEXICAL_DEPTH": 20,
    "SEARCH_VECTOR_WEIGHT": 1.0,
    "SEARCH_LEXICAL_WEIGHT": 1.25,
    # Vector channel: HNSW with pgvector 0.8 iterative index scans, so a filtered scan keeps
    # going until `limit` rows pass the scope (up to HNSW_MAX_SCAN_TUPLES visited tuples).
    "HNSW_EF_SEARCH": 100,
    "HNSW_ITERATIVE_SCAN": "relaxed_order",
    "HNSW_MAX_SCAN_TUPLES": 20000,
    # Search scopes (valid memories / chunks) up to this size are ranked by an exact cosine
    # scan instead: as fast as the iterative HNSW scan up to ~2,000 rows, and exact
    # (measured in docs/benchmarks.md, "Exact scan or HNSW").
    "SEARCH_EXACT_SCAN_MAX": 2000,
    # HTTP providers. Every outbound call also ends after HTTP_MAX_SECONDS in total (a slow
    # drip of bytes cannot hold a worker) and refuses answers over HTTP_MAX_RESPONSE_BYTES.
    "HTTP_TIMEOUT": 30.0,
    "HTTP_RETRIES": 2,
    "HTTP_MAX_SECONDS": 600.0,
    "HTTP_MAX_RESPONSE_BYTES": 64 * 1024 * 1024,
    # Hardening (docs/security.md). Request bodies over DATA_UPLOAD_MAX_MEMORY_SIZE (multipart:
    # MAX_UPLOAD_BYTES + MULTIPART_OVERHEAD_BYTES) get 413 before parsing, on these path prefixes
    # (ApiGuardMiddleware; empty = every path) and in every API view.
    "API_PATH_PREFIXES": ["/api/"],
    "MULTIPART_OVERHEAD_BYTES": 1024 * 1024,
    "MAX_JSON_DEPTH": 64,
    # At most this many keys in a `tags` filter (search, ?tags= on lists): 400 TAG_FILTER_TOO_LARGE.
    "MAX_TAG_FILTER_KEYS": 64,
    # Failed API-key authentications per client address (DRF rate syntax); over it -> 429
    # THROTTLED with Retry-After, even for a valid key, until the window passes. None disables.
    "AUTH_FAILURE_RATE": "20/min",
    # Requests per project when the host's REST_FRAMEWORK names no 'project' throttle rate.
    "PROJECT_RATE": "6000/min",
    # Memory rules (memory_engine.services.rules).
    "RULE_MAX_FACTS": 20,
    "RULE_TRANSCRIPT_MAX_CHARS": 24000,
    "RULE_HANDLER_TIMEOUT": 30.0,
    # A firing still pending this many seconds after it was enqueued lost its worker: the
    # scheduled sweep enqueues it again (keep it above Q_CLUSTER["timeout"] and the worst
    # queue delay), and records RULE_FIRING_STALLED after RULE_FIRING_MAX_ATTEMPTS.
    "RULE_FIRING_TIMEOUT": 900,
    "RULE_FIRING_MAX_ATTEMPTS": 3,
    # Import-path prefixes that API callers may name as `callable` rule handlers
    # (admins may name any). Empty: callable handlers are admin-only.
    "RULE_CALLABLE_PREFIXES": [],
}

#: Nested dicts merged key by key with their defaults rather than replaced whole.
NESTED = ("EMBEDDING",)

#: Embedding provider aliases -> dotted paths.
EMBEDDING_PROVIDERS = {
    "onnx": "memory_engine.providers.embeddings.onnx.OnnxEmbeddingProvider",
    "sentence_transformers": "memory_engine.providers.embeddings.sentence_transformers.SentenceTransformersProvider",
    "ollama": "memory_engine.providers.embeddings.http.OllamaEmbeddingProvider",
    "openai": "memory_engine.providers.embeddings.http.OpenAIEmbeddingProvider",
}


class EngineSettings:
    """Attribute access to MEMORY_ENGINE with defaults, e.g. ``engine_settings.DUPLICATE_THRESHOLD``."""

    def __init__(self) -> None:
        self._cache: dict[str, Any] = {}

    @property
    def user_settings(self) -> dict[str, Any]:
        return getattr(settings, "MEMORY_ENGINE", None) or {}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in DEFAULTS:
            raise AttributeError(f"Invalid memory_engine setting: {name!r}")
        if name in self._cache:
            return self._cache[name]
        value = copy.deepcopy(DEFAULTS[name])
        if name in self.user_settings:
            user_value = self.user_settings[name]
            if name in NESTED and isinstance(value, dict) and isinstance(user_value, dict):
                value.update(user_value)
            else:
                value = user_value
        self._cache[name] = value
        return value

    def reload(self) -> None:
        self._cache.clear()


engine_settings = EngineSettings()


def _reload(*, setting: str, **kwargs: Any) -> None:
    if setting == "MEMORY_ENGINE":
        engine_settings.reload()


setting_changed.connect(_reload)


def embedding_dimensions() -> int:
    """The configured vector dimension; shapes the vector columns (models and migrations)."""
    return int(engine_settings.EMBEDDING.get("DIMENSIONS") or 384)
