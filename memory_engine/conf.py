"""Settings for memory_engine: the host's ``MEMORY_ENGINE`` dict, read lazily and validated here, once.

Nothing is read at import time, so ``override_settings(MEMORY_ENGINE=...)`` works in tests.
Every key has a default (:data:`DEFAULTS`) and a declared type (:data:`TYPES`). The first
read of a key merges the host's value with its default, coerces it to that type (``"30"``
becomes ``30`` for an integer) and caches the result, so callers read plain typed values
and never coerce. A value that does not fit raises ImproperlyConfigured naming the key and
the expected type; ``manage.py check`` reports every such key at once (``memory_engine.E020``)
and every unknown key, with the closest known one (``memory_engine.W020``). The cache, and
every cache registered with :func:`reloads_with_settings` (providers, the funnel's scan
mode), is dropped on ``setting_changed``.

    MEMORY_ENGINE = {
        "EMBEDDING": {"PROVIDER": "onnx", "MODEL": "all-MiniLM-L6-v2", "DIMENSIONS": 384},
        "DUPLICATE_THRESHOLD": 0.95,
    }
"""

from __future__ import annotations

import copy
import difflib
import functools
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.utils.module_loading import import_string

from memory_engine.setting_types import (
    Coerce,
    InvalidSetting,
    boolean,
    integer,
    mapping,
    names_of,
    number,
    number_map,
    one_of,
    optional,
    probability,
    rate,
    section,
    string_list,
    text,
)

#: The vector dimension when EMBEDDING names none (all-MiniLM-L6-v2's).
DEFAULT_DIMENSIONS = 384

DEFAULTS: dict[str, Any] = {
    # One deployment-wide embedding model. PROVIDER is an alias (onnx,
    # sentence_transformers, ollama, openai) or a dotted path to an
    # EmbeddingProvider subclass; None disables embedding.
    "EMBEDDING": {
        "PROVIDER": "onnx",
        "MODEL": "all-MiniLM-L6-v2",
        "DIMENSIONS": DEFAULT_DIMENSIONS,
        "OPTIONS": {},
    },
    # Other embedding models an operator may register and switch to (docs/embeddings.md):
    # {"large": {"PROVIDER": "openai", "MODEL": "text-embedding-3-large", "DIMENSIONS": 3072, "OPTIONS": {}}}
    "EMBEDDING_MODELS": {},
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
    # In a content table of 100,000 rows, stores with at most this many contents are searched
    # exactly for dedup, larger ones through the HNSW index (iterative scan, HNSW_EF_SEARCH).
    # The limit scales with the square root of the table's rows (400,000: twice this), never
    # below 2,000: where the two cost about the same (bench/scan_mode.py, docs/benchmarks.md,
    # "Dedup shortlist: exact scan or HNSW"). 0: always HNSW.
    "DEDUP_EXACT_SCAN_MAX": 6000,
    # The write funnel runs its content upsert and its candidates statement as statements
    # prepared once per database connection, planned once rather than on every write
    # (docs/write-funnel.md, "Prepared statements"). Needs client-side binding (Django's
    # default); behind a transaction-pooling proxy (PgBouncer in transaction mode) set False.
    "WRITE_PREPARED_STATEMENTS": True,
    # Memory lifecycle (docs/memory.md). Recall: each tier's recency half-life in days (0: none;
    # a store's recency_half_life_days overrides it) and its precedence multiplier on the fused
    # score (biases across tiers; the order within a tier is kept).
    "TIER_HALF_LIFE_DAYS": {"user": 30, "agent": 90, "institutional": 0},
    "TIER_PRECEDENCE": {"user": 1.15, "agent": 1.05, "institutional": 1.0},
    # Days a forgotten agent/institutional memory stays restorable (a store may override), and
    # how often the scheduled sweep deletes expired memories and purges the trash.
    "TRASH_DAYS": 7,
    "MEMORY_SWEEP_MINUTES": 60,
    # Retention (docs/retention.md): the lifetime of an ephemeral memory written without
    # expires_at, and of an ephemeral document version (the retention sweep tombstones it).
    "MEMORY_EPHEMERAL_TTL_SECONDS": 86400,
    "DOCUMENT_EPHEMERAL_TTL_SECONDS": 86400,
    # Consent categories (docs/memory.md, *Consent categories*): days a memory of a category may
    # live, per tier, from its write ({"memory:health": {"user": 30}}; a store's
    # consent_expiry_days overrides it); the shorter of this and the memory's own expiry wins.
    "CONSENT_EXPIRY_DAYS": {},
    # The embedding pass names a category when the memory's cosine to its exemplars' centroid
    # reaches this (chosen on the exemplars by bench/consent.py --sweep, for all-MiniLM-L6-v2).
    "CONSENT_EMBEDDING_MIN_SIMILARITY": 0.2,
    # The memory map (docs/memory.md, *The memory map*): a store with at most this many live
    # memories gets its first map at once, a larger one from a worker (202 until then); a map is
    # computed again when the live memories changed by more than this share of the count it was
    # computed from, or when it is older than MEMORY_MAP_MAX_AGE_MINUTES; it places at most
    # MEMORY_MAP_MAX_POINTS memories (the newest).
    "MEMORY_MAP_SYNC_MAX_MEMORIES": 500,
    "MEMORY_MAP_RECOMPUTE_CHANGE": 0.1,
    "MEMORY_MAP_MAX_AGE_MINUTES": 60,
    "MEMORY_MAP_MAX_POINTS": 20000,
    # Confidence of a memory whose writer states none; a write that lands on an existing
    # memory reinforces it at most once per REINFORCE_INTERVAL_SECONDS.
    "DEFAULT_CONFIDENCE": 0.7,
    "REINFORCE_INTERVAL_SECONDS": 3600,
    # Near matches from this cosine up to the supersede threshold come back as potential_duplicates.
    "SURFACE_DUPLICATES_ABOVE": 0.85,
    # Recall shows a preview of bodies longer than this (UTF-8 bytes); open_memory gives the rest.
    "INLINE_THRESHOLD_BYTES": 8192,
    # Quotas (None = unlimited); a Project may override both.
    "MAX_MEMORIES_PER_PROJECT": None,
    "MAX_DOCUMENT_BYTES_PER_PROJECT": None,
    # Documents.
    "MAX_UPLOAD_BYTES": 50 * 1024 * 1024,
    # A document's title (the column holds 500; a larger value is capped there).
    "MAX_TITLE_CHARS": 500,
    "SYNC_INGESTION_MAX_BYTES": 2 * 1024 * 1024,
    # Documents per POST /api/v1/documents/batch (413 BATCH_TOO_LARGE over it).
    "MAX_BATCH_DOCUMENTS": 100,
    "MAX_PDF_PAGES": 2000,
    # The PDF text library: "pypdf" (pure Python) or "pdfium" (the pdfium extra: faster, C).
    "PDF_EXTRACTOR": "pypdf",
    "EMBEDDING_BATCH_SIZE": 32,
    # Chunking (docs/documents.md). `recursive` (text, Markdown) and `page` (a page longer
    # than this is cut like `recursive`) count chunk_size and chunk_overlap in the embedder's
    # tokens; these are their defaults when neither the request nor a rule sets them.
    "CHUNK_SIZE_TOKENS": 200,
    "CHUNK_OVERLAP_TOKENS": 40,
    # Hard caps: no chunk of any strategy is longer than MAX_CHUNK_CHARS characters (`whole`
    # fails CHUNK_TOO_LARGE, `size` windows over it are refused); a document that makes more
    # than MAX_CHUNKS_PER_DOCUMENT chunks fails TOO_MANY_CHUNKS before anything is embedded.
    "MAX_CHUNK_CHARS": 32 * 1024,
    "MAX_CHUNKS_PER_DOCUMENT": 20000,
    "INGESTION_HEARTBEAT_TIMEOUT": 300,
    "INGESTION_MAX_ATTEMPTS": 3,
    # A worker's ingestion task of a small document (at most INGESTION_GROUP_MAX_BYTES) also
    # ingests other small documents of its project that wait for a worker, up to
    # INGESTION_GROUP_DOCUMENTS in all, so the embedder and the database see them in batches
    # (1: one document per task).
    "INGESTION_GROUP_DOCUMENTS": 32,
    "INGESTION_GROUP_MAX_BYTES": 64 * 1024,
    # How often the scheduled sweep looks for stalled ingestions (django-q2 Schedule).
    "INGESTION_SWEEP_MINUTES": 1,
    # Pending converters: how long the signed callback URL stays valid; file_delivery=download_url:
    # how long the signed download URL stays valid (seconds).
    "CONVERTER_CALLBACK_TTL": 3600,
    "DOWNLOAD_URL_TTL": 900,
    # Absolute base of the callback and download URLs given to HTTP converters, e.g.
    # "https://memory.example.com"; None = the base URL of the request that created the document.
    "PUBLIC_BASE_URL": None,
    # Import-path prefixes API callers and staff may name as `callable` converters (superusers
    # may name any). Empty: callable converters are for superusers only.
    "CONVERTER_CALLABLE_PREFIXES": [],
    # Read side.
    # Text search config of the lexical indexes (stemming, stop words). Fixed when the
    # indexes are built (migration 0005, `manage.py memory_engine_rebuild_lexical`); a
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
    # Ranking stage two (docs/retrieval.md, *After the fusion*; measured in docs/benchmarks.md).
    # Each stage is on by default only where bench/eval_retrieval.py measured a gain.
    # One best chunk per document before the cut (request: dedupe_documents).
    "SEARCH_DEDUPE_DOCUMENTS": False,
    # Maximal marginal relevance over the stored vectors of the first SEARCH_MMR_POOL hits
    # (request: mmr); lambda weighs relevance against novelty.
    "SEARCH_MMR": False,
    "SEARCH_MMR_LAMBDA": 0.7,
    "SEARCH_MMR_POOL": 20,
    # The authority prior: a hit's fused score times 1 + w × authority (a chunk's version's
    # capture fields, a memory's confidence; selectors.search.boosts), clamped to [0.7, 1.3].
    # 0: off (the shared splits have uniform authority: no measurable gain).
    "SEARCH_AUTHORITY_WEIGHT": 0.0,
    # Bounded boosts: recency by class (events decay over SEARCH_BOOST_HALF_LIFE_DAYS, states
    # and lessons do not), each and their product clamped to [0.7, 1.3].
    "SEARCH_BOOSTS": False,
    "SEARCH_BOOST_HALF_LIFE_DAYS": 30.0,
    # Corroboration: a hit supported by N live items (evidence links) times 1 + SUPPORT × min(N,
    # CAP), contradicted times 1 − CONTRADICT × min(N, CAP), inside the same clamp. 0: off (the
    # shared splits record no links: nothing to measure).
    "SEARCH_CORROBORATION_SUPPORT": 0.0,
    "SEARCH_CORROBORATION_CONTRADICT": 0.0,
    "SEARCH_CORROBORATION_CAP": 3,
    # Relevance (memory_engine.relevance, docs/retrieval.md "Relevance"): each hit's relevance in
    # [0, 1] from a small model over what the search knows of it. A hit is relevant at or above
    # SEARCH_MIN_RELEVANCE (an agent's knowledge_config.min_relevance, a search's min_relevance
    # override it); push injection and the search_knowledge tool hand only relevant hits to a
    # model. Calibrated on the shared dev data (docs/benchmarks.md, "Relevance").
    "SEARCH_MIN_RELEVANCE": 0.35,
    # `evidence: strong` needs the first relevant hit at or above this relevance (else weak; none
    # when no hit is relevant).
    "EVIDENCE_STRONG_RELEVANCE": 0.94,
    # None: the built-in model, calibrated for all-MiniLM-L6-v2. Another embedder's cosines have
    # another scale: fit its own with bench/relevance.py --fit and paste what it prints:
    # {"VERSION": ..., "EMBEDDING_MODEL": ..., "GATE": {"intercept": ..., "top_cosine": ...},
    #  "WEIGHTS": {"intercept": ..., "cosine": ..., "cosine_gap": ..., ...}}.
    "RELEVANCE_MODEL": None,
    # A cross-encoder over the fused top TOP_N: {"PROVIDER": "tei" | "cohere" | "jina" | a dotted
    # path to a RerankProvider subclass, "MODEL": ..., "OPTIONS": {"BASE_URL": ..., "API_KEY": ...},
    # "TOP_N": 50, "TIMEOUT": 5}. None: no reranking (no offline cross-encoder comes with the package).
    "RERANK": None,
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
    # An oversized body up to this many bytes is read and thrown away (64 KiB at a time, never
    # buffered) before the 413 goes out, so a client that sends its whole body before reading
    # gets the answer; a larger one is left to the server. None: never read.
    "MAX_DISCARD_BYTES": 256 * 1024 * 1024,
    # At most this many keys in a `tags` filter (search, ?tags= on lists): 400 TAG_FILTER_TOO_LARGE.
    "MAX_TAG_FILTER_KEYS": 64,
    # Failed API-key authentications per client address (DRF rate syntax); over it a failing key
    # gets 429 THROTTLED with Retry-After until the window passes (a valid key is never refused).
    # None disables. Counted in Django's default cache: share it (Redis, database) across workers.
    "AUTH_FAILURE_RATE": "20/min",
    # Trusted reverse proxies in front of the app that append to X-Forwarded-For: 0 = use
    # REMOTE_ADDR and ignore the header (a client can write anything into it).
    "NUM_PROXIES": 0,
    # Requests per project when the host's REST_FRAMEWORK names no 'project' throttle rate.
    "PROJECT_RATE": "6000/min",
    # Resident distillers (memory_engine.services.distillers): how often the schedule ticks
    # (a django-q2 schedule counts whole minutes), the characters of a document one LLM call
    # reads, the most windows read of one version, the most versions one tick reads, and how
    # often a version whose call failed is tried again.
    "DISTILLER_TICK_SECONDS": 300,
    "DISTILLER_WINDOW_CHARS": 12000,
    "DISTILLER_MAX_WINDOWS": 8,
    "DISTILLER_BATCH_VERSIONS": 50,
    "DISTILLER_MAX_ATTEMPTS": 3,
    # Memory rules (memory_engine.services.rules).
    "RULE_MAX_FACTS": 20,
    "RULE_TRANSCRIPT_MAX_CHARS": 24000,
    "RULE_HANDLER_TIMEOUT": 30.0,
    # A firing still pending this many seconds after it was enqueued lost its worker: the
    # scheduled sweep enqueues it again (keep it above Q_CLUSTER["timeout"] and the worst
    # queue delay), and records RULE_FIRING_STALLED after RULE_FIRING_MAX_ATTEMPTS.
    "RULE_FIRING_TIMEOUT": 900,
    "RULE_FIRING_MAX_ATTEMPTS": 3,
    # Import-path prefixes that API callers and staff may name as `callable` rule handlers
    # (superusers may name any). Empty: callable handlers are for superusers only.
    "RULE_CALLABLE_PREFIXES": [],
    # Guards (memory_engine.guards, docs/security.md). Which LLM settings a builtin memory rule
    # may set on the deployment's LLM account: PROMPT, MODEL, MAX_TOKENS (the handler's prompt,
    # model, max_tokens) and BASE_URL, API_KEY, TIMEOUT, RETRIES (its `provider` object). A rule
    # whose BASE_URL differs from LLM["BASE_URL"] never receives LLM["API_KEY"].
    "LLM_OVERRIDABLE": ["PROMPT", "MAX_TOKENS"],
    # Where URLs configured through the API or the admin (HTTP rule handlers, HTTP converters,
    # a rule's provider BASE_URL) may lead besides public addresses: host names and IP
    # addresses or networks ("10.0.0.0/8"). Link-local addresses (169.254.0.0/16, fe80::/10)
    # need an entry inside that range; no wider network opens them.
    "OUTBOUND_ALLOW": [],
    # Webhooks (docs/webhooks.md): how often the Schedule delivers, entries per POST, the
    # per-POST timeout, and the retry backoff after a failed POST (doubling from the base).
    "WEBHOOK_DISPATCH_MINUTES": 1,
    "WEBHOOK_BATCH_SIZE": 100,
    "WEBHOOK_TIMEOUT_SECONDS": 10.0,
    "WEBHOOK_RETRY_SECONDS": 30,
    "WEBHOOK_RETRY_MAX_SECONDS": 3600,
    # The key of the HMAC erasure receipts keep of their selector (docs/retention.md); None: a
    # key derived from SECRET_KEY. Set it to keep receipts checkable across a SECRET_KEY rotation.
    "ERASURE_RECEIPT_KEY": None,
    # Read replicas (docs/scaling.md): DATABASES aliases reads may run on (empty: off; the host also
    # adds memory_engine.replicas.ReplicaRouter to DATABASE_ROUTERS); how long a principal's reads
    # wait for a replica to replay its own last write; how long an unreachable replica is left alone.
    "READ_REPLICAS": [],
    "READ_YOUR_WRITES_SECONDS": 30,
    "REPLICA_RETRY_SECONDS": 30,
}

# --- declared types (coercers: memory_engine.setting_types) ------------------------------------


def dimensions(value: Any) -> int:
    """A positive vector dimension; unset (None, 0) is :data:`DEFAULT_DIMENSIONS`."""
    if value is None or (value == 0 and not isinstance(value, bool)):
        return DEFAULT_DIMENSIONS
    try:
        dims = integer(value)
    except InvalidSetting:
        dims = 0
    if dims < 1:
        raise InvalidSetting("a positive integer", value)
    return dims


#: The consent categories (memory_engine.consent.categories checks that it names the same) and the
#: tiers of a store, for CONSENT_EXPIRY_DAYS.
CONSENT_CATEGORY_NAMES = ("memory:context", "memory:preferences", "memory:history", "memory:location",
                          "memory:identity", "memory:health")
TIER_NAMES = ("user", "agent", "institutional")


def consent_expiry_days(value: Any) -> dict[str, dict[str, int | float | None]]:
    """``{category: {tier: days}}``: known categories and tiers, days a positive number or None (no limit)."""
    out: dict[str, dict[str, int | float | None]] = {}
    for category, tiers in mapping(value).items():
        if category not in CONSENT_CATEGORY_NAMES:
            raise InvalidSetting("keyed by consent categories (" + ", ".join(CONSENT_CATEGORY_NAMES) + ")", category)
        try:
            days_by_tier = mapping(tiers)
        except InvalidSetting:
            raise InvalidSetting("a dict of tiers to days", tiers, (category,)) from None
        out[category] = {}
        for tier, days in days_by_tier.items():
            if tier not in TIER_NAMES:
                raise InvalidSetting("keyed by tiers (" + ", ".join(TIER_NAMES) + ")", tier, (category,))
            try:
                parsed = None if days is None else number(days)
            except InvalidSetting:
                parsed = 0
            if parsed is not None and parsed <= 0:
                raise InvalidSetting("a positive number of days or None", days, (category, tier))
            out[category][tier] = parsed
    return out


#: The LLM settings a builtin memory rule may be allowed to change (LLM_OVERRIDABLE).
LLM_OVERRIDABLE_NAMES = ("PROMPT", "MODEL", "MAX_TOKENS", "BASE_URL", "API_KEY", "TIMEOUT", "RETRIES")

#: The keys of the nested dicts and their types; OPTIONS is the embedding provider's own.
EMBEDDING_TYPES: dict[str, Coerce] = {
    "PROVIDER": optional(text),
    "MODEL": optional(text),
    "DIMENSIONS": dimensions,
    "OPTIONS": optional(mapping, none={}),
    # The vectors' column type, "halfvec" (the default, up to 4,000 dimensions) or "vector" (up
    # to 2,000): an EMBEDDING_MODELS entry's is read by `register`, EMBEDDING's by migration 0018
    # on a new installation (docs/embeddings.md).
    "STORAGE": optional(one_of("vector", "halfvec")),
}
LLM_TYPES: dict[str, Coerce] = {
    "BASE_URL": text, "API_KEY": text, "MODEL": text, "TIMEOUT": number, "RETRIES": integer,
}
RERANK_TYPES: dict[str, Coerce] = {
    "PROVIDER": text, "MODEL": optional(text, none=""), "OPTIONS": optional(mapping, none={}),
    "TOP_N": integer, "TIMEOUT": number,
}
RELEVANCE_MODEL_TYPES: dict[str, Coerce] = {
    "VERSION": text, "EMBEDDING_MODEL": optional(text, none=""), "GATE": number_map, "WEIGHTS": number_map,
}
#: Nested dict -> (its keys' types, keys read in any case).
SECTIONS: dict[str, tuple[dict[str, Coerce], bool]] = {
    "EMBEDDING": (EMBEDDING_TYPES, False), "LLM": (LLM_TYPES, True), "RERANK": (RERANK_TYPES, False),
    "RELEVANCE_MODEL": (RELEVANCE_MODEL_TYPES, False),
}

#: Each key's declared type. A new setting gets its default in DEFAULTS and its type here.
TYPES: dict[str, Coerce] = {
    "EMBEDDING": section(EMBEDDING_TYPES),
    "LLM": optional(section(LLM_TYPES, any_case=True)),
    "EMBEDDING_MODELS": optional(mapping, none={}),
    "DUPLICATE_THRESHOLD": number,
    "SUPERSEDE_THRESHOLD": number,
    "MAX_MEMORY_CHARS": integer,
    "CHANGED_DETAIL_GATE": boolean,
    "JUDGE_FLOOR": number,
    "JUDGE_TIMEOUT": number,
    "DEDUP_EXACT_SCAN_MAX": integer,
    "WRITE_PREPARED_STATEMENTS": boolean,
    "TIER_HALF_LIFE_DAYS": section({"user": number, "agent": number, "institutional": number}),
    "TIER_PRECEDENCE": section({"user": number, "agent": number, "institutional": number}),
    "TRASH_DAYS": integer,
    "MEMORY_SWEEP_MINUTES": integer,
    "MEMORY_EPHEMERAL_TTL_SECONDS": integer,
    "DOCUMENT_EPHEMERAL_TTL_SECONDS": integer,
    "CONSENT_EXPIRY_DAYS": optional(consent_expiry_days, none={}),
    "CONSENT_EMBEDDING_MIN_SIMILARITY": number,
    "MEMORY_MAP_SYNC_MAX_MEMORIES": integer,
    "MEMORY_MAP_RECOMPUTE_CHANGE": number,
    "MEMORY_MAP_MAX_AGE_MINUTES": number,
    "MEMORY_MAP_MAX_POINTS": integer,
    "DEFAULT_CONFIDENCE": number,
    "REINFORCE_INTERVAL_SECONDS": number,
    "SURFACE_DUPLICATES_ABOVE": number,
    "INLINE_THRESHOLD_BYTES": integer,
    "MAX_MEMORIES_PER_PROJECT": optional(integer),
    "MAX_DOCUMENT_BYTES_PER_PROJECT": optional(integer),
    "MAX_UPLOAD_BYTES": integer,
    "MAX_TITLE_CHARS": integer,
    "SYNC_INGESTION_MAX_BYTES": integer,
    "MAX_BATCH_DOCUMENTS": integer,
    "MAX_PDF_PAGES": integer,
    "PDF_EXTRACTOR": one_of("pypdf", "pdfium"),
    "EMBEDDING_BATCH_SIZE": integer,
    "CHUNK_SIZE_TOKENS": integer,
    "CHUNK_OVERLAP_TOKENS": integer,
    "MAX_CHUNK_CHARS": integer,
    "MAX_CHUNKS_PER_DOCUMENT": integer,
    "INGESTION_HEARTBEAT_TIMEOUT": number,
    "INGESTION_MAX_ATTEMPTS": integer,
    "INGESTION_GROUP_DOCUMENTS": integer,
    "INGESTION_GROUP_MAX_BYTES": integer,
    "INGESTION_SWEEP_MINUTES": integer,
    "CONVERTER_CALLBACK_TTL": number,
    "DOWNLOAD_URL_TTL": number,
    "PUBLIC_BASE_URL": optional(text),
    "CONVERTER_CALLABLE_PREFIXES": string_list,
    "KNOWLEDGE_TEXT_SEARCH_CONFIG": text,
    "KNOWLEDGE_LEXICAL_BACKEND": one_of("auto", "tsvector"),
    "KNOWLEDGE_BM25_CANDIDATES": integer,
    "KNOWLEDGE_BM25_K1": number,
    "KNOWLEDGE_BM25_B": number,
    "KNOWLEDGE_BM25_MAX_DF": number,
    "SEARCH_RRF_K": integer,
    "SEARCH_VECTOR_DEPTH": integer,
    "SEARCH_LEXICAL_DEPTH": integer,
    "SEARCH_VECTOR_WEIGHT": number,
    "SEARCH_LEXICAL_WEIGHT": number,
    "HNSW_EF_SEARCH": integer,  # interpolated into SET LOCAL: it must be an int
    "HNSW_ITERATIVE_SCAN": one_of("off", "relaxed_order", "strict_order"),
    "HNSW_MAX_SCAN_TUPLES": integer,
    "SEARCH_EXACT_SCAN_MAX": integer,
    "SEARCH_DEDUPE_DOCUMENTS": boolean,
    "SEARCH_MMR": boolean,
    "SEARCH_MMR_LAMBDA": number,
    "SEARCH_MMR_POOL": integer,
    "SEARCH_AUTHORITY_WEIGHT": number,
    "SEARCH_BOOSTS": boolean,
    "SEARCH_BOOST_HALF_LIFE_DAYS": number,
    "SEARCH_CORROBORATION_SUPPORT": number,
    "SEARCH_CORROBORATION_CONTRADICT": number,
    "SEARCH_CORROBORATION_CAP": integer,
    "SEARCH_MIN_RELEVANCE": probability,
    "EVIDENCE_STRONG_RELEVANCE": probability,
    "RELEVANCE_MODEL": optional(section(RELEVANCE_MODEL_TYPES)),
    "RERANK": optional(section(RERANK_TYPES)),
    "HTTP_TIMEOUT": number,
    "HTTP_RETRIES": integer,
    "HTTP_MAX_SECONDS": number,
    "HTTP_MAX_RESPONSE_BYTES": integer,
    "API_PATH_PREFIXES": string_list,
    "MULTIPART_OVERHEAD_BYTES": integer,
    "MAX_JSON_DEPTH": integer,
    "MAX_DISCARD_BYTES": optional(integer),
    "MAX_TAG_FILTER_KEYS": integer,
    "AUTH_FAILURE_RATE": optional(rate),
    "NUM_PROXIES": optional(integer, none=0),
    "PROJECT_RATE": optional(rate),
    "DISTILLER_TICK_SECONDS": integer,
    "DISTILLER_WINDOW_CHARS": integer,
    "DISTILLER_MAX_WINDOWS": integer,
    "DISTILLER_BATCH_VERSIONS": integer,
    "DISTILLER_MAX_ATTEMPTS": integer,
    "RULE_MAX_FACTS": integer,
    "RULE_TRANSCRIPT_MAX_CHARS": integer,
    "RULE_HANDLER_TIMEOUT": number,
    "RULE_FIRING_TIMEOUT": number,
    "RULE_FIRING_MAX_ATTEMPTS": integer,
    "RULE_CALLABLE_PREFIXES": string_list,
    "LLM_OVERRIDABLE": names_of(*LLM_OVERRIDABLE_NAMES),
    "OUTBOUND_ALLOW": string_list,
    "WEBHOOK_DISPATCH_MINUTES": integer,
    "WEBHOOK_BATCH_SIZE": integer,
    "WEBHOOK_TIMEOUT_SECONDS": number,
    "WEBHOOK_RETRY_SECONDS": integer,
    "WEBHOOK_RETRY_MAX_SECONDS": integer,
    "ERASURE_RECEIPT_KEY": optional(text),
    "READ_REPLICAS": string_list,
    "READ_YOUR_WRITES_SECONDS": integer,
    "REPLICA_RETRY_SECONDS": integer,
}
assert TYPES.keys() == DEFAULTS.keys(), sorted(TYPES.keys() ^ DEFAULTS.keys())

#: Nested dicts merged key by key with their defaults rather than replaced whole.
NESTED = ("EMBEDDING",)


class EngineSettings:
    """Attribute access to MEMORY_ENGINE with defaults and declared types, e.g.
    ``engine_settings.DUPLICATE_THRESHOLD``."""

    def __init__(self) -> None:
        self._cache: dict[str, Any] = {}

    @property
    def user_settings(self) -> dict[str, Any]:
        configured = getattr(settings, "MEMORY_ENGINE", None) or {}
        if not isinstance(configured, dict):
            raise ImproperlyConfigured(f"MEMORY_ENGINE must be a dict; got {type(configured).__name__}.")
        return configured

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
        try:
            value = TYPES[name](value)
        except InvalidSetting as exc:
            raise ImproperlyConfigured(exc.describe(name)) from None
        self._cache[name] = value
        return value

    def reload(self) -> None:
        self._cache.clear()

    def invalid_settings(self) -> list[str]:
        """What is wrong with each configured value that does not fit its type (E020)."""
        try:
            configured = self.user_settings
        except ImproperlyConfigured as exc:
            return [str(exc)]
        problems = []
        for name in DEFAULTS:
            if name in configured:
                try:
                    getattr(self, name)
                except ImproperlyConfigured as exc:
                    problems.append(str(exc))
        return problems

    def unknown_settings(self) -> list[tuple[str, str | None]]:
        """``(where, closest known key or None)`` for each configured key that is not a setting
        (W020): top-level keys and the keys of the nested dicts (EMBEDDING, LLM)."""
        try:
            configured = self.user_settings
        except ImproperlyConfigured:
            return []  # E020 says so
        unknown = _unknown(configured, DEFAULTS, "MEMORY_ENGINE")
        for name, (types, any_case) in SECTIONS.items():
            nested = configured.get(name)
            if isinstance(nested, dict):
                if any_case:
                    nested = {str(key).upper(): item for key, item in nested.items()}
                unknown += _unknown(nested, types, f"MEMORY_ENGINE[{name!r}]")
        return unknown


def _unknown(configured: dict[str, Any], known: Any, where: str) -> list[tuple[str, str | None]]:
    known = list(known)
    return [
        (f"{where}[{key!r}]", next(iter(difflib.get_close_matches(str(key), known, n=1)), None))
        for key in configured if key not in known
    ]


engine_settings = EngineSettings()

# --- caches that follow the settings -------------------------------------------------------------

_reload_hooks: list[Callable[[], Any]] = []


def reloads_with_settings(clear: Callable[[], Any]) -> Callable[[], Any]:
    """Register ``clear`` (a cache's reset) to run whenever MEMORY_ENGINE changes, so nothing
    built from the settings outlives them (``override_settings`` in tests, reloads)."""
    _reload_hooks.append(clear)
    return clear


def _reload(*, setting: str, **kwargs: Any) -> None:
    if setting == "MEMORY_ENGINE":
        engine_settings.reload()
        for clear in _reload_hooks:
            clear()


setting_changed.connect(_reload)

# --- providers ------------------------------------------------------------------------------------

#: Provider aliases by kind -> dotted paths. An EMBEDDING PROVIDER not listed here is taken as a
#: dotted path to an EmbeddingProvider subclass; rule handler and converter types must be listed.
PROVIDERS: dict[str, dict[str, str]] = {
    "embedding": {
        "onnx": "memory_engine.providers.embeddings.onnx.OnnxEmbeddingProvider",
        "sentence_transformers": (
            "memory_engine.providers.embeddings.sentence_transformers.SentenceTransformersProvider"
        ),
        "ollama": "memory_engine.providers.embeddings.http.OllamaEmbeddingProvider",
        "openai": "memory_engine.providers.embeddings.http.OpenAIEmbeddingProvider",
    },
    # MEMORY_ENGINE["RERANK"]["PROVIDER"] -> the RerankProvider subclass; a dotted path also works.
    "rerank": {
        "tei": "memory_engine.providers.rerank.http.TEIRerankProvider",
        "cohere": "memory_engine.providers.rerank.http.CohereRerankProvider",
        "jina": "memory_engine.providers.rerank.http.JinaRerankProvider",
    },
    # MemoryRule.handler_type -> the RuleHandler subclass serving it.
    "rule_handler": {
        "builtin": "memory_engine.providers.rule_handlers.builtin.BuiltinHandler",
        "callable": "memory_engine.providers.rule_handlers.callable.CallableHandler",
        "http": "memory_engine.providers.rule_handlers.http.HttpHandler",
    },
    # IngestionRule.converter_type -> the function running it.
    "converter": {
        "http": "memory_engine.providers.converters.http.run_http_converter",
        "callable": "memory_engine.providers.converters.callable.run_callable_converter",
    },
}
EMBEDDING_PROVIDERS = PROVIDERS["embedding"]

#: Kinds whose configured name may be a dotted path instead of an alias.
DOTTED_PATH_KINDS = frozenset({"embedding", "rerank"})


@functools.cache
def resolve_provider(kind: str, name: str) -> Any:
    """The class (or function) that provider ``name`` of ``kind`` stands for, imported once and
    cached until MEMORY_ENGINE changes; KeyError for an unknown alias of a kind without paths."""
    aliases = PROVIDERS[kind]
    path = aliases[name] if name in aliases or kind not in DOTTED_PATH_KINDS else name
    return import_string(path)


reloads_with_settings(resolve_provider.cache_clear)


def embedding_dimensions() -> int:
    """The configured vector dimension; shapes the vector columns (models and migrations)."""
    return engine_settings.EMBEDDING["DIMENSIONS"]
