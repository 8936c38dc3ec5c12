"""The settings of how the engine reaches out and defends itself, in the order of
docs/settings.md: outbound HTTP, hardening, resident distillers, the entity graph, the
instruction guard's sweep, memory rules, LLM overrides and outbound hosts, webhooks, erasure
receipts, read replicas."""

from __future__ import annotations

from memory_engine.setting_types import integer, names_of, number, optional, rate, string_list, text

from .declaration import LLM_OVERRIDABLE_NAMES, Setting

OPERATION_SETTINGS: tuple[Setting, ...] = (
    # HTTP providers. Every outbound call also ends after HTTP_MAX_SECONDS in total (a slow
    # drip of bytes cannot hold a worker) and refuses answers over HTTP_MAX_RESPONSE_BYTES.
    Setting("HTTP_TIMEOUT", 30.0, number,
            "number", "30.0",
            "seconds per call of an HTTP embedding provider (its `OPTIONS[\"TIMEOUT\"]` overrides)"),
    Setting("HTTP_RETRIES", 2, integer,
            "int", "2",
            "retries of an outbound call on timeouts, connection errors and retryable statuses"),
    Setting("HTTP_MAX_SECONDS", 600.0, number,
            "number", "600.0",
            "total seconds any outbound call may take"),
    Setting("HTTP_MAX_RESPONSE_BYTES", 64 * 1024 * 1024, integer,
            "int", "67108864",
            "largest answer an outbound call accepts"),
    # Hardening (docs/security.md). Request bodies over DATA_UPLOAD_MAX_MEMORY_SIZE (multipart:
    # MAX_UPLOAD_BYTES + MULTIPART_OVERHEAD_BYTES) get 413 before parsing, on these path prefixes
    # (ApiGuardMiddleware; empty = every path) and in every API view.
    Setting("API_PATH_PREFIXES", ["/api/"], string_list,
            "list", "`[\"/api/\"]`",
            "paths the request-size guard covers (empty: every path)"),
    Setting("MULTIPART_OVERHEAD_BYTES", 1024 * 1024, integer,
            "int", "1048576",
            "multipart bodies may exceed `MAX_UPLOAD_BYTES` by this much"),
    Setting("MAX_JSON_DEPTH", 64, integer,
            "int", "64",
            "deepest JSON body accepted"),
    # An oversized body up to this many bytes is read and thrown away (64 KiB at a time, never
    # buffered) before the 413 goes out, so a client that sends its whole body before reading
    # gets the answer; a larger one is left to the server. None: never read.
    Setting("MAX_DISCARD_BYTES", 256 * 1024 * 1024, optional(integer),
            "int or None", "268435456",
            "an oversized body up to this size is read and discarded before the 413; `None`: never read"),
    # At most this many keys in a `tags` filter (search, ?tags= on lists): 400 TAG_FILTER_TOO_LARGE.
    Setting("MAX_TAG_FILTER_KEYS", 64, integer,
            "int", "64",
            "most keys in a `tags` filter (`TAG_FILTER_TOO_LARGE`)"),
    # Failed API-key authentications per client address (DRF rate syntax); over it a failing key
    # gets 429 THROTTLED with Retry-After until the window passes (a valid key is never refused).
    # None disables. Counted in Django's default cache: share it (Redis, database) across workers.
    Setting("AUTH_FAILURE_RATE", "20/min", optional(rate),
            "rate or None", "`20/min`",
            "failed API-key authentications per client address; `None` disables"),
    # Trusted reverse proxies in front of the app that append to X-Forwarded-For: 0 = use
    # REMOTE_ADDR and ignore the header (a client can write anything into it).
    Setting("NUM_PROXIES", 0, optional(integer, none=0),
            "int or None", "0",
            "trusted reverse proxies appending to `X-Forwarded-For`; 0 (or `None`): use `REMOTE_ADDR`"),
    # Requests per project when the host's REST_FRAMEWORK names no 'project' throttle rate.
    Setting("PROJECT_RATE", "6000/min", optional(rate),
            "rate or None", "`6000/min`",
            "requests per project when `REST_FRAMEWORK` names no `project` rate"),
    # Resident distillers (memory_engine.services.distillers): how often the schedule ticks
    # (a django-q2 schedule counts whole minutes), the characters of a document one LLM call
    # reads, the most windows read of one version, the most versions one tick reads, and how
    # often a version whose call failed is tried again.
    Setting("DISTILLER_TICK_SECONDS", 300, integer,
            "int", "300",
            "how often the distillers' schedule ticks (rounded up to whole minutes)"),
    Setting("DISTILLER_WINDOW_CHARS", 12000, integer,
            "int", "12000",
            "characters of a document version one distiller LLM call reads"),
    Setting("DISTILLER_MAX_WINDOWS", 8, integer,
            "int", "8",
            "most windows read of one version (the rest of a longer document is not distilled)"),
    Setting("DISTILLER_BATCH_VERSIONS", 50, integer,
            "int", "50",
            "most document versions one tick reads"),
    Setting("DISTILLER_MAX_ATTEMPTS", 3, integer,
            "int", "3",
            "tries of a version whose LLM call failed before it is left as `failed`"),
    # The entity graph (memory_engine.services.entities, docs/entities.md).
    Setting("ENTITY_EXTRACTOR", "rules", optional(text),
            "str or None", "`\"rules\"`",
            "what reads entities out of memories and chunks: `rules` (memory_engine.mentions, offline), `llm` "
            "(the configured `LLM`, the rules when it fails), a dotted path to an `EntityExtractor` subclass, "
            "or `None` (no graph)"),
    Setting("ENTITY_SWEEP_MINUTES", 1, integer,
            "int", "1",
            "how often the scheduled sweep reads the memories (and documents) the graph has not read yet: a new "
            "memory is in the graph within this many minutes"),
    Setting("GUARD_SWEEP_MINUTES", 5, integer,
            "int", "5",
            "how often the scheduled sweep judges stored texts (memories, chunks) that hold no finding of the "
            "instruction guard's current version (after an upgrade that changed the guard; services.guard_sweep)"),
    Setting("GUARD_THREADS", 2, integer,
            "int", "2",
            "threads of the instruction guard's multilingual classifier (one text: about 40 ms on two threads, "
            "70 on one, on a two-core machine; its threads wait passively, so concurrent callers cost no more "
            "than on one thread); read when the classifier loads"),
    Setting("GUARD_SWEEP_ROWS", 5000, integer,
            "int", "5000",
            "most rows one run of that sweep judges (`manage.py memory_engine_guard_sweep` judges them all)"),
    Setting("ENTITY_BATCH", 500, integer,
            "int", "500",
            "most memories (or documents) one extraction task reads"),
    Setting("ENTITY_RESOLUTION_SIMILARITY", 0.92, number,
            "number", "0.92",
            "a new name of the same kind whose embedding is at least this close to a known entity's name joins "
            "it as an alias; 0: names resolve by key and alias only"),
    # Memory rules (memory_engine.services.rules).
    Setting("RULE_MAX_FACTS", 20, integer,
            "int", "20",
            "most facts one rule firing writes"),
    Setting("RULE_TRANSCRIPT_MAX_CHARS", 24000, integer,
            "int", "24000",
            "longest transcript given to a rule handler (the end is kept)"),
    Setting("RULE_HANDLER_TIMEOUT", 30.0, number,
            "number", "30.0",
            "seconds an `http` handler may take (a rule's `timeout` overrides)"),
    # A firing still pending this many seconds after it was enqueued lost its worker: the
    # scheduled sweep enqueues it again (keep it above Q_CLUSTER["timeout"] and the worst
    # queue delay), and records RULE_FIRING_STALLED after RULE_FIRING_MAX_ATTEMPTS.
    Setting("RULE_FIRING_TIMEOUT", 900, number,
            "number", "900",
            "seconds before the sweep re-enqueues a pending firing"),
    Setting("RULE_FIRING_MAX_ATTEMPTS", 3, integer,
            "int", "3",
            "firing attempts before `RULE_FIRING_STALLED`"),
    # Import-path prefixes that API callers and staff may name as `callable` rule handlers
    # (superusers may name any). Empty: callable handlers are for superusers only.
    Setting("RULE_CALLABLE_PREFIXES", [], string_list,
            "list", "`[]`",
            "import-path prefixes API callers and staff may name as `callable` rule handlers"),
    # Guards (memory_engine.guards, docs/security.md). Which LLM settings a builtin memory rule
    # may set on the deployment's LLM account: PROMPT, MODEL, MAX_TOKENS (the handler's prompt,
    # model, max_tokens) and BASE_URL, API_KEY, TIMEOUT, RETRIES (its `provider` object). A rule
    # whose BASE_URL differs from LLM["BASE_URL"] never receives LLM["API_KEY"].
    Setting("LLM_OVERRIDABLE", ["PROMPT", "MAX_TOKENS"], names_of(*LLM_OVERRIDABLE_NAMES),
            "list of `PROMPT`, `MODEL`, `MAX_TOKENS`, `BASE_URL`, `API_KEY`, `TIMEOUT`, `RETRIES` (any case)",
            "`[\"PROMPT\", \"MAX_TOKENS\"]`",
            "which LLM settings a builtin memory rule may set"),
    # Where URLs configured through the API or the admin (HTTP rule handlers, HTTP converters,
    # a rule's provider BASE_URL) may lead besides public addresses: host names and IP
    # addresses or networks ("10.0.0.0/8"). Link-local addresses (169.254.0.0/16, fe80::/10)
    # need an entry inside that range; no wider network opens them.
    Setting("OUTBOUND_ALLOW", [], string_list,
            "list", "`[]`",
            "private hosts or networks rule handlers, converters, provider overrides and webhooks may reach"),
    # Webhooks (docs/webhooks.md): how often the Schedule delivers, entries per POST, the
    # per-POST timeout, and the retry backoff after a failed POST (doubling from the base).
    Setting("WEBHOOK_DISPATCH_MINUTES", 1, integer,
            "int", "1",
            "how often the webhooks Schedule delivers (docs/webhooks.md)"),
    Setting("WEBHOOK_BATCH_SIZE", 100, integer,
            "int", "100",
            "feed entries read per webhook POST"),
    Setting("WEBHOOK_TIMEOUT_SECONDS", 10.0, number,
            "number", "10.0",
            "seconds a webhook POST may take (capped by `HTTP_MAX_SECONDS`)"),
    Setting("WEBHOOK_RETRY_SECONDS", 30, integer,
            "int", "30",
            "wait after a failed webhook POST; doubles per consecutive failure"),
    Setting("WEBHOOK_RETRY_MAX_SECONDS", 3600, integer,
            "int", "3600",
            "longest wait between webhook retries"),
    # The key of the HMAC erasure receipts keep of their selector (docs/retention.md); None: a
    # key derived from SECRET_KEY. Set it to keep receipts checkable across a SECRET_KEY rotation.
    Setting("ERASURE_RECEIPT_KEY", None, optional(text),
            "str or None", "`None`",
            "key of the HMAC an erasure receipt keeps of its selector; `None`: derived from `SECRET_KEY` "
            "(docs/retention.md)"),
    # Read replicas (docs/scaling.md): DATABASES aliases reads may run on (empty: off; the host also
    # adds memory_engine.replicas.ReplicaRouter to DATABASE_ROUTERS); how long a principal's reads
    # wait for a replica to replay its own last write; how long an unreachable replica is left alone.
    Setting("READ_REPLICAS", [], string_list,
            "list", "`[]`",
            "`DATABASES` aliases of streaming replicas that requests which only read may use (add "
            "`memory_engine.replicas.ReplicaRouter` to `DATABASE_ROUTERS`; docs/scaling.md)"),
    Setting("READ_YOUR_WRITES_SECONDS", 30, integer,
            "int", "30",
            "after a principal's write, how long its reads wait for a replica that replayed it (they read from "
            "the primary meanwhile)"),
    Setting("REPLICA_RETRY_SECONDS", 30, integer,
            "int", "30",
            "how long an unreachable replica is left alone (its reads go to the primary)"),
)
