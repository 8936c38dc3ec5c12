"""The settings of what is written, in the order of docs/settings.md: the embedder and the
LLM, the write funnel, the memory lifecycle (recall by tier, trash, retention, consent
categories, the memory map, confidence, quotas), documents and their ingestion."""

from __future__ import annotations

from memory_engine.setting_types import boolean, integer, mapping, number, one_of, optional, section, string_list, text

from .declaration import DEFAULT_DIMENSIONS, EMBEDDING_TYPES, LLM_TYPES, Setting, consent_expiry_days

WRITE_SETTINGS: tuple[Setting, ...] = (
    # One deployment-wide embedding model. PROVIDER is an alias (onnx,
    # sentence_transformers, ollama, openai) or a dotted path to an
    # EmbeddingProvider subclass; None disables embedding.
    Setting("EMBEDDING", {
            "PROVIDER": "onnx",
            "MODEL": "all-MiniLM-L6-v2",
            "DIMENSIONS": DEFAULT_DIMENSIONS,
            "OPTIONS": {},
        }, section(EMBEDDING_TYPES),
            "dict",
            "`{\"PROVIDER\": \"onnx\", \"MODEL\": \"all-MiniLM-L6-v2\", \"DIMENSIONS\": 384, \"OPTIONS\": {}}`",
            "the deployment-wide embedder. `PROVIDER` (str or None): `onnx`, `sentence_transformers`, `ollama`, "
            "`openai`, or a dotted path to an `EmbeddingProvider` subclass; `None` disables embedding. `MODEL` "
            "(str or None). `DIMENSIONS` (positive int; `None` or 0: 384) shapes the vector columns. `STORAGE` "
            "(`\"halfvec\"`, the default, or `\"vector\"`): the vector columns' type on a new installation "
            "(migration 0018; docs/embeddings.md). Changing the model or dimension goes through the "
            "embedding-model registry, not this setting (docs/embeddings.md). `OPTIONS` (dict): the provider's "
            "own (HTTP providers: `BASE_URL`, `API_KEY`, `TIMEOUT`, `RETRIES`, `BATCH_SIZE`; `onnx`: "
            "`MAX_TOKENS` 256, `BATCH_SIZE` 64, `TOKEN_BUDGET` 256 padded tokens per onnxruntime call "
            "(docs/benchmarks.md, \"Embedder batches\"), `THREADS`, `ALLOW_SPINNING`)"),
    # Other embedding models an operator may register and switch to (docs/embeddings.md):
    # {"large": {"PROVIDER": "openai", "MODEL": "text-embedding-3-large", "DIMENSIONS": 3072, "OPTIONS": {}}}
    Setting("EMBEDDING_MODELS", {}, optional(mapping, none={}),
            "dict", "`{}`",
            "other embedding models an operator may register and switch to, by name: `{\"large\": "
            "{\"PROVIDER\": ..., \"MODEL\": ..., \"DIMENSIONS\": ..., \"OPTIONS\": {...}}}` (keys as "
            "`EMBEDDING`, plus an optional `\"STORAGE\"`: `\"halfvec\"`, the default, or `\"vector\"`, the "
            "column type it gets). Only settings name provider code; `manage.py memory_engine_embedding_model "
            "register NAME` probes the model (docs/embeddings.md)"),
    # OpenAI-compatible chat endpoint for rule extraction and the same-fact judge:
    # {"BASE_URL": "http://localhost:11434/v1", "API_KEY": "", "MODEL": "...", "TIMEOUT": 30}
    Setting("LLM", None, optional(section(LLM_TYPES, any_case=True)),
            "dict or None", "`None`",
            "OpenAI-compatible chat endpoint for rule extraction and the same-fact judge: `BASE_URL` (str), "
            "`API_KEY` (str), `MODEL` (str), `TIMEOUT` (number), `RETRIES` (int) ([rules](rules.md))"),
    # Write funnel.
    Setting("DUPLICATE_THRESHOLD", 0.95, number,
            "number", "0.95",
            "write funnel: skip at or above this cosine ([write funnel](write-funnel.md))"),
    Setting("SUPERSEDE_THRESHOLD", 0.90, number,
            "number", "0.90",
            "write funnel: supersede at or above this cosine"),
    Setting("MAX_MEMORY_CHARS", 32 * 1024, integer,
            "int", "32768",
            "longest memory text"),
    # Before skipping a near-duplicate, compare numbers, dates, names, negation...:
    # a changed detail turns the skip into a supersede (memory_engine.details).
    Setting("CHANGED_DETAIL_GATE", True, boolean,
            "bool", "`True`",
            "a near-duplicate whose numbers, dates, names or negation changed supersedes instead of being "
            "skipped"),
    Setting("VALUE_CHANGE_GATE", True, boolean,
            "bool", "`True`",
            "below the supersede threshold, a write that states the nearest live memory's subject and attribute "
            "with another value (one changed span after a definite or named subject) supersedes it, reason "
            "`value_change` ([write funnel](write-funnel.md))"),
    Setting("VALUE_CHANGE_FLOOR", 0.55, number,
            "number", "0.55",
            "the value-change gate's cosine floor: a best match less similar than this is another statement"),
    Setting("SUBJECT_UPDATE_FLOOR", 0.55, number,
            "number", "0.55",
            "a live memory about one of the write's subjects (an identifier, the name it opens with, its about key) "
            "this similar, stating the same attribute, is superseded, reason `subject_update`; a memory about other "
            "subjects is never skipped into or superseded ([write funnel](write-funnel.md#subjects))"),
    # Optional same-fact judge (stores opt in with judge_enabled; needs LLM): asked only
    # when the best match's cosine lies in [JUDGE_FLOOR, supersede threshold).
    Setting("JUDGE_FLOOR", 0.75, number,
            "number", "0.75",
            "the same-fact judge is asked from this cosine up to the supersede threshold"),
    Setting("JUDGE_TIMEOUT", 5.0, number,
            "number", "5.0",
            "seconds the judge may take"),
    # In a content table of 100,000 rows, stores with at most this many contents are searched
    # exactly for dedup, larger ones through the HNSW index (iterative scan, HNSW_EF_SEARCH).
    # The limit scales with the square root of the table's rows (400,000: twice this), never
    # below 2,000: where the two cost about the same (bench/scan_mode.py, docs/benchmarks.md,
    # "Dedup shortlist: exact scan or HNSW"). 0: always HNSW.
    Setting("DEDUP_EXACT_SCAN_MAX", 6000, integer,
            "int", "6000",
            "in a content table of 100,000 rows, stores with at most this many contents are searched exactly "
            "for dedup, larger ones through HNSW; the limit scales with the square root of the table's rows "
            "(400,000: 12,000), never below 2,000 (or this, if lower; 0: always HNSW). Where the two cost the "
            "same: docs/benchmarks.md, \"Dedup shortlist: exact scan or HNSW\""),
    # The write funnel runs its content upsert and its candidates statement as statements
    # prepared once per database connection, planned once rather than on every write
    # (docs/write-funnel.md, "Prepared statements"). Needs client-side binding (Django's
    # default); behind a transaction-pooling proxy (PgBouncer in transaction mode) set False.
    Setting("WRITE_PREPARED_STATEMENTS", True, boolean,
            "bool", "`True`",
            "the write funnel runs its content upsert and candidates statement as statements prepared once per "
            "database connection, planned once instead of on every write; set `False` behind a "
            "transaction-pooling proxy (PgBouncer in transaction mode). Never with "
            "`OPTIONS[\"server_side_binding\"]` ([write funnel](write-funnel.md), \"Prepared statements\")"),
    # Memory lifecycle (docs/memory.md). Recall: each tier's recency half-life in days (0: none;
    # a store's recency_half_life_days overrides it) and its precedence multiplier on the fused
    # score (biases across tiers; the order within a tier is kept).
    Setting("TIER_HALF_LIFE_DAYS", {"user": 30, "agent": 90, "institutional": 0},
            section({"user": number, "agent": number, "institutional": number}),
            "dict", "`{\"user\": 30, \"agent\": 90, \"institutional\": 0}`",
            "recall: each tier's recency half-life in days (0: none); a store's `recency_half_life_days` "
            "overrides it ([memory](memory.md))"),
    Setting("TIER_PRECEDENCE", {"user": 1.15, "agent": 1.05, "institutional": 1.0},
            section({"user": number, "agent": number, "institutional": number}),
            "dict", "`{\"user\": 1.15, \"agent\": 1.05, \"institutional\": 1.0}`",
            "recall: each tier's multiplier on the fused score (biases across tiers, keeps the order within "
            "one)"),
    # Days a forgotten agent/institutional memory stays restorable (a store may override), and
    # how often the scheduled sweep deletes expired memories and purges the trash.
    Setting("TRASH_DAYS", 7, integer,
            "int", "7",
            "days a forgotten agent/institutional memory stays restorable (a store's `trash_days` overrides it)"),
    Setting("MEMORY_SWEEP_MINUTES", 60, integer,
            "int", "60",
            "how often the scheduled sweep deletes expired memories and purges the trash"),
    # Retention (docs/retention.md): the lifetime of an ephemeral memory written without
    # expires_at, and of an ephemeral document version (the retention sweep tombstones it).
    Setting("MEMORY_EPHEMERAL_TTL_SECONDS", 86400, integer,
            "int", "86400",
            "lifetime of an `ephemeral` memory written without `expires_at` (docs/retention.md)"),
    Setting("DOCUMENT_EPHEMERAL_TTL_SECONDS", 86400, integer,
            "int", "86400",
            "lifetime of an `ephemeral` document version; the retention sweep (every `MEMORY_SWEEP_MINUTES`) "
            "tombstones it"),
    # Consent categories (docs/memory.md, *Consent categories*): days a memory of a category may
    # live, per tier, from its write; the embedding pass's threshold.
    Setting("CONSENT_EXPIRY_DAYS", {}, optional(consent_expiry_days, none={}),
            "dict", "`{}`",
            "days a memory of a consent category may live from its write, per tier: `{\"memory:health\": "
            "{\"user\": 30, \"agent\": 30}}` (keys: the six categories; tiers `user`, `agent`, `institutional`; "
            "days a positive number, `None`: no limit). A store's `consent_expiry_days` (`{category: days}`) "
            "overrides it; the earlier of this and the memory's own expiry wins "
            "([memory](memory.md#consent-categories))"),
    Setting("CONSENT_EMBEDDING_MIN_SIMILARITY", 0.2, number,
            "number", "0.2",
            "the consent classifier's embedding pass names the nearest category when the memory's cosine to "
            "that category's exemplar centroid reaches this; chosen on the exemplars for all-MiniLM-L6-v2 "
            "(`bench/consent.py --sweep`; another embedder has another scale)"),
    # The memory map (docs/memory.md, *The memory map*).
    Setting("MEMORY_MAP_SYNC_MAX_MEMORIES", 500, integer,
            "int", "500",
            "the memory map of a store with at most this many live memories is computed in the request that "
            "first asks for it; a larger store's by a worker (`202` until it is ready) "
            "([memory](memory.md#the-memory-map))"),
    Setting("MEMORY_MAP_RECOMPUTE_CHANGE", 0.1, number,
            "number", "0.1",
            "a map is computed again (by a worker; the old one is served meanwhile, `stale: true`) when the "
            "store's live memories changed by more than this share of the count it was computed from"),
    Setting("MEMORY_MAP_MAX_AGE_MINUTES", 60, number,
            "number", "60",
            "… or when it is older than this"),
    Setting("MEMORY_MAP_MAX_POINTS", 20000, integer,
            "int", "20000",
            "the most memories one map places (the newest; `truncated: true` says that some were left out)"),
    # Confidence of a memory whose writer states none; a write that lands on an existing
    # memory reinforces it at most once per REINFORCE_INTERVAL_SECONDS.
    Setting("DEFAULT_CONFIDENCE", 0.7, number,
            "number", "0.7",
            "confidence of a memory whose writer states none"),
    Setting("REINFORCE_INTERVAL_SECONDS", 3600, number,
            "number", "3600",
            "a memory is reinforced at most once per this many seconds"),
    # Near matches from this cosine up to the supersede threshold come back as potential_duplicates.
    Setting("SURFACE_DUPLICATES_ABOVE", 0.85, number,
            "number", "0.85",
            "near matches from this cosine up to the supersede threshold come back as `potential_duplicates`"),
    # Recall shows a preview of bodies longer than this (UTF-8 bytes); open_memory gives the rest.
    Setting("INLINE_THRESHOLD_BYTES", 8192, integer,
            "int", "8192",
            "recall shows `content_preview` for longer bodies; `open` gives the whole"),
    # Quotas (None = unlimited); a Project may override both.
    Setting("MAX_MEMORIES_PER_PROJECT", None, optional(integer),
            "int or None", "`None`",
            "quota (a `Project` may override); `None`: unlimited"),
    Setting("MAX_DOCUMENT_BYTES_PER_PROJECT", None, optional(integer),
            "int or None", "`None`",
            "quota (a `Project` may override); `None`: unlimited"),
    # Documents.
    Setting("MAX_UPLOAD_BYTES", 50 * 1024 * 1024, integer,
            "int", "52428800",
            "largest document file ([documents](documents.md))"),
    # A document's title (the column holds 500; a larger value is capped there).
    Setting("MAX_TITLE_CHARS", 500, integer,
            "int", "500",
            "longest document title; longer is `400 TITLE_TOO_LONG` (the column holds 500)"),
    Setting("SYNC_INGESTION_MAX_BYTES", 2 * 1024 * 1024, integer,
            "int", "2097152",
            "`wait=true` ingests inline up to this size"),
    # Documents per POST /api/v1/documents/batch (413 BATCH_TOO_LARGE over it).
    Setting("MAX_BATCH_DOCUMENTS", 100, integer,
            "int", "100",
            "most documents in one `POST /api/v1/documents/batch`; more is `413 BATCH_TOO_LARGE` "
            "([documents](documents.md#many-small-documents-at-once))"),
    # Memories per POST /api/v1/memories/batch (413 BATCH_TOO_LARGE over it).
    Setting("MAX_BATCH_MEMORIES", 1000, integer,
            "int", "1000",
            "most memories in one `POST /api/v1/memories/batch` (and one batch of `memory_engine_import`); more is "
            "`413 BATCH_TOO_LARGE` ([memory](memory.md#many-memories-at-once))"),
    Setting("MAX_PDF_PAGES", 2000, integer,
            "int", "2000",
            "longest PDF"),
    # The PDF text library: "pypdf" (pure Python) or "pdfium" (the pdfium extra: faster, C).
    Setting("PDF_EXTRACTOR", "pypdf", one_of("pypdf", "pdfium"),
            "`\"pypdf\"` or `\"pdfium\"`", "`\"pypdf\"`",
            "the PDF text library; `\"pdfium\"` needs the `pdfium` extra (`pip install "
            "'./django-memory-engine[pdfium]'` from a clone, check `memory_engine.E008`) and is ~15× faster "
            "([documents](documents.md#faster-pdf-text-pdfium))"),
    Setting("EMBEDDING_BATCH_SIZE", 32, integer,
            "int", "32",
            "chunks embedded per call during ingestion"),
    # Chunking (docs/documents.md). `recursive` (text, Markdown) and `page` (a page longer
    # than this is cut like `recursive`) count chunk_size and chunk_overlap in the embedder's
    # tokens; these are their defaults when neither the request nor a rule sets them.
    Setting("CHUNK_SIZE_TOKENS", 200, integer,
            "int", "200",
            "default chunk size of `recursive` and `page` (embedder tokens)"),
    Setting("CHUNK_OVERLAP_TOKENS", 40, integer,
            "int", "40",
            "default chunk overlap of `recursive` and `page`"),
    # Hard caps: no chunk of any strategy is longer than MAX_CHUNK_CHARS characters (`whole`
    # fails CHUNK_TOO_LARGE, `size` windows over it are refused); a document that makes more
    # than MAX_CHUNKS_PER_DOCUMENT chunks fails TOO_MANY_CHUNKS before anything is embedded.
    Setting("MAX_CHUNK_CHARS", 32 * 1024, integer,
            "int", "32768",
            "hard cap on one chunk of any strategy"),
    Setting("MAX_CHUNKS_PER_DOCUMENT", 20000, integer,
            "int", "20000",
            "more chunks fail `TOO_MANY_CHUNKS` before anything is embedded"),
    Setting("INGESTION_HEARTBEAT_TIMEOUT", 300, number,
            "number", "300",
            "seconds without a heartbeat before the sweep retries an ingestion"),
    Setting("INGESTION_MAX_ATTEMPTS", 3, integer,
            "int", "3",
            "ingestion attempts before it fails"),
    # A worker's ingestion task of a small document (at most INGESTION_GROUP_MAX_BYTES) also
    # ingests other small documents of its project that wait for a worker, up to
    # INGESTION_GROUP_DOCUMENTS in all, so the embedder and the database see them in batches
    # (1: one document per task).
    Setting("INGESTION_GROUP_DOCUMENTS", 32, integer,
            "int", "32",
            "the most documents one worker ingestion task ingests together: its own and other small pending "
            "documents of its project (1: one per task; docs/documents.md)"),
    Setting("INGESTION_GROUP_MAX_BYTES", 64 * 1024, integer,
            "int", "65536",
            "documents at most this size (bytes) are grouped into a worker's task; larger ones are ingested "
            "alone"),
    # How often the scheduled sweep looks for stalled ingestions (django-q2 Schedule).
    Setting("INGESTION_SWEEP_MINUTES", 1, integer,
            "int", "1",
            "how often the scheduled sweeps run"),
    # Pending converters: how long the signed callback URL stays valid; file_delivery=download_url:
    # how long the signed download URL stays valid (seconds).
    Setting("CONVERTER_CALLBACK_TTL", 3600, number,
            "number", "3600",
            "seconds a pending converter's signed callback URL stays valid"),
    Setting("DOWNLOAD_URL_TTL", 900, number,
            "number", "900",
            "seconds a converter's signed download URL stays valid"),
    # Absolute base of the callback and download URLs given to HTTP converters, e.g.
    # "https://memory.example.com"; None = the base URL of the request that created the document.
    Setting("PUBLIC_BASE_URL", None, optional(text),
            "str or None", "`None`",
            "absolute base of those URLs; `None`: the base URL of the request that created the document"),
    # Import-path prefixes API callers and staff may name as `callable` converters (superusers
    # may name any). Empty: callable converters are for superusers only.
    Setting("CONVERTER_CALLABLE_PREFIXES", [], string_list,
            "list", "`[]`",
            "import-path prefixes API callers and staff may name as `callable` converters "
            "([security](security.md))"),
)
