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
"""

from __future__ import annotations

import copy
import difflib
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
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


# --- the settings, each declared once ------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    """One key of ``MEMORY_ENGINE``: its default, its type (a coercer of memory_engine.setting_types)
    and its row of docs/settings.md (``kind``, ``shown``: the type and default columns, ``meaning``),
    which ``make docs`` writes from here (tests/settings_table.py)."""

    name: str
    default: Any
    coerce: Coerce
    kind: str
    shown: str
    meaning: str


# --- the search knobs, each declared once --------------------------------------------------------


def _plain(bound: float) -> str:
    return f"{bound:g}"


@dataclass(frozen=True)
class Knob:
    """One search knob, declared once: its type (bool, int or float), its range (``low`` / ``high``,
    None: unbounded; ``low_open``: ``low`` itself is out, for a knob without ``high``), its default
    and what it does.

    ``setting`` names the ``MEMORY_ENGINE`` key whose value a search runs with when the request
    leaves the knob unset (``default`` is then that setting's default); without one, ``default``
    is the request's own. ``request``: a search request may set it; ``config``: a transform
    config's ``search`` object may (memory_engine.ranking_knobs). ``unset`` says what an unset
    request value means where the default alone does not. Derived from here: the REST request's
    fields (memory_engine.api.search), the admin playground's (memory_engine.admin.console), the
    search's checks (selectors.search.validation), the config's (ranking_knobs) and the settings'
    (:meth:`coerce`, and their rows of docs/settings.md)."""

    name: str
    kind: type
    doc: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    setting: str | None = None
    default: Any = None
    request: bool = True
    config: bool = False
    unset: str = ""

    @property
    def nullable(self) -> bool:
        """A request may leave it unset (None): the setting's value, or no such filter, applies."""
        return self.setting is not None or self.default is None

    def fits(self, value: Any) -> bool:
        """``value`` is of the knob's type (an int is a number too, a bool never is) and in range."""
        if self.kind is bool:
            return isinstance(value, bool)
        if isinstance(value, bool) or not isinstance(value, int if self.kind is int else (int, float)):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return math.isfinite(value) and (self.high is None or value <= self.high)

    @property
    def bounds(self) -> str:
        """The range in a few characters: ``0–1``, ``> 0``, ``≥ 0``; "" when unbounded."""
        if self.low is not None and self.high is not None:
            return f"{_plain(self.low)}–{_plain(self.high)}"
        if self.low is not None:
            return f"{'>' if self.low_open else '≥'} {_plain(self.low)}"
        return "" if self.high is None else f"≤ {_plain(self.high)}"

    @property
    def expected(self) -> str:
        """What a value must be, in words: ``a number > 0``, ``an integer from 1 to 100``."""
        if self.kind is bool:
            return "true or false"
        noun = "an integer" if self.kind is int else "a number"
        if self.low is not None and self.high is not None:
            return f"{noun} from {_plain(self.low)} to {_plain(self.high)}"
        return f"{noun} {self.bounds}".rstrip()

    @property
    def help_text(self) -> str:
        """The knob's line in the REST schema: what it does, its range, what unset means."""
        if self.unset:
            unset = self.unset
        elif self.setting is not None:
            shown = f"{self.default}".lower() if self.kind is bool else f"{self.default}"
            config = "a generation's config knob, else " if self.config else ""
            unset = f"default: {config}the {self.setting} setting ({shown})"
        else:
            unset = f"default: {self.default}"
        return f"{self.doc}: {self.expected}; {unset}." if self.kind is not bool else f"{self.doc}; {unset}."

    def coerce(self, value: Any) -> Any:
        """The setting's coercer: the knob's type (a numeric or boolean string too) and range."""
        coerced = {bool: boolean, int: integer, float: number}[self.kind](value)
        if not self.fits(coerced):
            raise InvalidSetting(self.expected, value)
        return coerced

    def setting_row(self, meaning: str) -> Setting:
        """The knob's setting: its default, type and range from here, ``meaning`` for docs/settings.md."""
        assert self.setting is not None
        kind = {bool: "bool", int: "int", float: "number"}[self.kind] + (f" ({self.bounds})" if self.bounds else "")
        shown = f"`{self.default}`" if self.kind is bool else f"{self.default}"
        return Setting(self.setting, self.default, self.coerce, kind, shown, meaning)


#: The knobs of a search, by name (docs/retrieval.md); the first nine a request may set.
SEARCH_KNOBS: dict[str, Knob] = {knob.name: knob for knob in (
    Knob("limit", int, "How many hits to return", low=1, high=100, default=10),
    Knob("min_similarity", float, "Cosine floor for vector candidates (they are dropped before the fusion)",
         low=-1, high=1, unset="unset: no floor"),
    Knob("min_relevance", float, "Keep only hits whose relevance reaches this; the order stays the ranking's",
         low=0, high=1, setting="SEARCH_MIN_RELEVANCE", default=0.35,
         unset="unset: keep every hit, each marked `relevant` at the SEARCH_MIN_RELEVANCE setting"),
    Knob("rrf_k", float, "RRF constant k", low=0, low_open=True, setting="SEARCH_RRF_K", default=5, config=True),
    Knob("recency_half_life_days", float, "Recency half-life in days of memories whose store and tier name none "
         "(0: no decay)", low=0, default=0),
    Knob("vector_weight", float, "Weight of the vector channel in the fusion", low=0, high=100,
         setting="SEARCH_VECTOR_WEIGHT", default=1.0, config=True),
    Knob("lexical_weight", float, "Weight of the lexical channel in the fusion", low=0, high=100,
         setting="SEARCH_LEXICAL_WEIGHT", default=1.25, config=True),
    Knob("dedupe_documents", bool, "One best chunk per document", setting="SEARCH_DEDUPE_DOCUMENTS", default=False,
         config=True),
    Knob("mmr", bool, "Maximal marginal relevance over the stored vectors", setting="SEARCH_MMR", default=False,
         config=True),
    Knob("authority_weight", float, "The authority prior's weight", low=0, high=1,
         setting="SEARCH_AUTHORITY_WEIGHT", default=0.0, request=False, config=True),
    Knob("boosts", bool, "Bounded boosts: recency by class", setting="SEARCH_BOOSTS", default=False,
         request=False, config=True),
    Knob("corroboration_support", float, "Corroboration: each supporting link's boost", low=0, high=1,
         setting="SEARCH_CORROBORATION_SUPPORT", default=0.0, request=False, config=True),
    Knob("corroboration_contradict", float, "Corroboration: each contradicting link's penalty", low=0, high=1,
         setting="SEARCH_CORROBORATION_CONTRADICT", default=0.0, request=False, config=True),
    Knob("corroboration_cap", int, "Corroboration: most links of each kind that count", low=1, high=100,
         setting="SEARCH_CORROBORATION_CAP", default=3, request=False, config=True),
    Knob("rerank", bool, "The rerank provider's order of the fused top, whenever RERANK configures one",
         default=True, request=False, config=True),
)}


SETTINGS: tuple[Setting, ...] = (
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
    # Read side.
    # Text search config of the lexical indexes (stemming, stop words). Fixed when the
    # indexes are built (migration 0005, `manage.py memory_engine_rebuild_lexical`); a
    # different value later is system check error memory_engine.E010 (docs/retrieval.md).
    Setting("KNOWLEDGE_TEXT_SEARCH_CONFIG", "english", text,
            "str", "`english`",
            "PostgreSQL text search config of the lexical indexes, fixed when they are built (`E010` on a "
            "mismatch; [retrieval](retrieval.md))"),
    # "auto": pg_textsearch BM25 when its indexes exist, else the tsvector fallback;
    # "tsvector": always the fallback (diagnosis, tests).
    Setting("KNOWLEDGE_LEXICAL_BACKEND", "auto", one_of("auto", "tsvector"),
            "`auto` or `tsvector`", "`auto`",
            "`auto`: pg_textsearch BM25 where its indexes exist, else the tsvector fallback; `tsvector`: always "
            "the fallback"),
    # tsvector fallback: rows matching any query term, the top KNOWLEDGE_BM25_CANDIDATES by
    # ts_rank_cd re-scored by Okapi BM25 (IDF from the index's ANALYZE statistics); terms in
    # more than KNOWLEDGE_BM25_MAX_DF of the rows do not select candidates.
    Setting("KNOWLEDGE_BM25_CANDIDATES", 200, integer,
            "int", "200",
            "tsvector fallback: rows re-scored by BM25"),
    Setting("KNOWLEDGE_BM25_K1", 1.2, number,
            "number", "1.2",
            "tsvector fallback: term-frequency saturation"),
    Setting("KNOWLEDGE_BM25_B", 0.75, number,
            "number", "0.75",
            "tsvector fallback: length normalisation"),
    Setting("KNOWLEDGE_BM25_MAX_DF", 0.1, number,
            "number", "0.1",
            "tsvector fallback: terms in more than this share of rows do not select candidates"),
    # Fusion (docs/retrieval.md, chosen with bench/eval_retrieval.py: docs/benchmarks.md):
    # each channel contributes its top max(limit, depth) candidates; score = sum of
    # weight / (SEARCH_RRF_K + rank). A request may override rrf_k and both weights.
    SEARCH_KNOBS["rrf_k"].setting_row(
        "RRF constant k (a request's `rrf_k` overrides)"),
    Setting("SEARCH_VECTOR_DEPTH", 20, integer,
            "int", "20",
            "candidates the vector channel contributes (at least `limit`)"),
    Setting("SEARCH_LEXICAL_DEPTH", 20, integer,
            "int", "20",
            "candidates the lexical channel contributes (at least `limit`)"),
    SEARCH_KNOBS["vector_weight"].setting_row(
        "the vector channel's RRF weight (request `vector_weight` overrides)"),
    SEARCH_KNOBS["lexical_weight"].setting_row(
        "the lexical channel's RRF weight (request `lexical_weight` overrides)"),
    # The graph channel (docs/entities.md, *The graph channel*): the memories that mention the
    # entities a query names (and their neighbours), a third ranked list in the fusion.
    Setting("SEARCH_GRAPH_WEIGHT", 0.0, number,
            "number", "0.0",
            "the graph channel's RRF weight: memories that mention the entities a query names (and, with "
            "`SEARCH_GRAPH_HOPS`, their neighbours) as a third ranked list; 0: off ([entities](entities.md))"),
    Setting("SEARCH_GRAPH_DEPTH", 20, integer,
            "int", "20",
            "candidates the graph channel contributes (at least `limit`)"),
    Setting("SEARCH_GRAPH_HOPS", 0, integer,
            "int (0–2)", "0",
            "graph channel: 0 the query's entities only; 1 and 2 add the entities named most often with them "
            "(and with those), each hop weighing half the one before"),
    Setting("SEARCH_GRAPH_NEIGHBOURS", 5, integer,
            "int", "5",
            "graph channel: most neighbour entities one hop adds"),
    # Vector channel: HNSW with pgvector 0.8 iterative index scans, so a filtered scan keeps
    # going until `limit` rows pass the scope (up to HNSW_MAX_SCAN_TUPLES visited tuples).
    Setting("HNSW_EF_SEARCH", 100, integer,
            "int", "100",
            "HNSW `ef_search` for dedup and search"),
    Setting("HNSW_ITERATIVE_SCAN", "relaxed_order", one_of("off", "relaxed_order", "strict_order"),
            "`off`, `relaxed_order` or `strict_order`", "`relaxed_order`",
            "pgvector 0.8 iterative index scans: a filtered HNSW scan keeps going until `limit` rows pass the "
            "scope"),
    Setting("HNSW_MAX_SCAN_TUPLES", 20000, integer,
            "int", "20000",
            "most tuples one iterative scan visits"),
    # Search scopes (valid memories / chunks) up to this size are ranked by an exact cosine
    # scan instead: as fast as the iterative HNSW scan up to ~2,000 rows, and exact
    # (measured in docs/benchmarks.md, "Exact scan or HNSW").
    Setting("SEARCH_EXACT_SCAN_MAX", 2000, integer,
            "int", "2000",
            "search scopes up to this size are ranked by an exact scan (memories: read from the memory rows, "
            "content rows by key)"),
    # Ranking stage two (docs/retrieval.md, *After the fusion*; measured in docs/benchmarks.md).
    # Each stage is on by default only where bench/eval_retrieval.py measured a gain.
    # One best chunk per document before the cut (request: dedupe_documents).
    SEARCH_KNOBS["dedupe_documents"].setting_row(
        "keep one best chunk per document before the cut (request `dedupe_documents` overrides); off: no "
        "measured gain on the shared splits ([benchmarks](benchmarks.md), \"Ranking stage two\")"),
    # Maximal marginal relevance over the stored vectors of the first SEARCH_MMR_POOL hits
    # (request: mmr); lambda weighs relevance against novelty.
    SEARCH_KNOBS["mmr"].setting_row(
        "reorder the first `SEARCH_MMR_POOL` hits by maximal marginal relevance over their stored vectors "
        "(request `mmr` overrides); hits without a vector follow, never dropped"),
    Setting("SEARCH_MMR_LAMBDA", 0.7, number,
            "number", "0.7",
            "MMR: weight of relevance against novelty"),
    Setting("SEARCH_MMR_POOL", 20, integer,
            "int", "20",
            "MMR: how many of the first hits it reorders"),
    # The authority prior: a hit's fused score times 1 + w × authority (a chunk's version's
    # capture fields, a memory's confidence; selectors.search.boosts), clamped to [0.7, 1.3].
    # 0: off (the shared splits have uniform authority: no measurable gain).
    SEARCH_KNOBS["authority_weight"].setting_row(
        "authority prior: a hit's fused score × `1 + w × authority` (a chunk's version's capture fields, a "
        "memory's confidence), clamped to [0.7, 1.3]; 0: off — no measurable gain on the shared splits, "
        "whose authority is uniform ([retrieval](retrieval.md), *Authority and the bounded boosts*)"),
    # Bounded boosts: recency by class (events decay over SEARCH_BOOST_HALF_LIFE_DAYS, states
    # and lessons do not), each and their product clamped to [0.7, 1.3].
    SEARCH_KNOBS["boosts"].setting_row(
        "bounded boosts: recency by class (events decay, states do not), clamped to [0.7, 1.3] with the "
        "other multipliers"),
    Setting("SEARCH_BOOST_HALF_LIFE_DAYS", 30.0, number,
            "number", "30.0",
            "`SEARCH_BOOSTS`: an event's recency boost is 1.3 when new, 1.0 after this many days, towards 0.7"),
    # Corroboration: a hit supported by N live items (evidence links) times 1 + SUPPORT × min(N,
    # CAP), contradicted times 1 − CONTRADICT × min(N, CAP), inside the same clamp. 0: off (the
    # shared splits record no links: nothing to measure).
    SEARCH_KNOBS["corroboration_support"].setting_row(
        "corroboration: a hit supported by N live items (evidence links) × `1 + a × min(N, CAP)`; 0: off — "
        "the shared splits record no links ([retrieval](retrieval.md), *Evidence links*)"),
    SEARCH_KNOBS["corroboration_contradict"].setting_row(
        "corroboration: a hit contradicted by N live items × `1 − b × min(N, CAP)`; 0: off. Both inside the "
        "[0.7, 1.3] clamp"),
    SEARCH_KNOBS["corroboration_cap"].setting_row(
        "corroboration: at most this many links of each kind count"),
    # Relevance (memory_engine.relevance, docs/retrieval.md "Relevance"): each hit's relevance in
    # [0, 1] from a small model over what the search knows of it. A hit is relevant at or above
    # SEARCH_MIN_RELEVANCE (an agent's knowledge_config.min_relevance, a search's min_relevance
    # override it); push injection and the search_knowledge tool hand only relevant hits to a
    # model. Calibrated on the shared dev data (docs/benchmarks.md, "Relevance").
    SEARCH_KNOBS["min_relevance"].setting_row(
        "relevance threshold: a hit is `relevant` at or above it. Push injection and the `search_knowledge` "
        "tool hand on only relevant hits (an agent's `knowledge_config.min_relevance` overrides; a search's "
        "`min_relevance` filters). Chosen on the train half of the shared dev data for the built-in model "
        "([retrieval](retrieval.md#relevance), [benchmarks](benchmarks.md#relevance)); 0 lets every hit "
        "through"),
    # `evidence: strong` needs the first relevant hit at or above this relevance (else weak; none
    # when no hit is relevant).
    Setting("EVIDENCE_STRONG_RELEVANCE", 0.94, probability,
            "number (0–1)", "0.94",
            "`evidence: strong` needs the first relevant hit at or above this relevance (else `weak`; `none` "
            "when no hit is relevant)"),
    # None: the built-in model, calibrated for all-MiniLM-L6-v2. Another embedder's cosines have
    # another scale: fit its own with bench/relevance.py --fit and paste what it prints:
    # {"VERSION": ..., "EMBEDDING_MODEL": ..., "GATE": {"intercept": ..., "top_cosine": ...},
    #  "WEIGHTS": {"intercept": ..., "cosine": ..., "cosine_gap": ..., ...}}.
    Setting("RELEVANCE_MODEL", None, optional(section(RELEVANCE_MODEL_TYPES)),
            "dict or None", "`None`",
            "the relevance model. `None`: the built-in one (`minilm-l6-v2/1`), calibrated for all-MiniLM-L6-v2 "
            "and used only with that embedder (any runtime); with another embedder nothing is judged (every hit "
            "counts as relevant) and check `memory_engine.W014` says so. A dict is a model of your own, as "
            "`bench/relevance.py --fit` prints it: `{\"VERSION\": str, \"EMBEDDING_MODEL\": str, \"GATE\": "
            "{\"intercept\", \"top_cosine\"}, \"WEIGHTS\": {\"intercept\", \"cosine\", \"cosine_gap\", "
            "\"lexical_share\", \"vector_rank\", \"lexical_rank\", \"rerank\"}}` (numbers; a feature left out "
            "weighs 0; an unknown name is the error `memory_engine.E021`)"),
    # A cross-encoder over the fused top TOP_N: {"PROVIDER": "tei" | "cohere" | "jina" | a dotted
    # path to a RerankProvider subclass, "MODEL": ..., "OPTIONS": {"BASE_URL": ..., "API_KEY": ...},
    # "TOP_N": 50, "TIMEOUT": 5}. None: no reranking (no offline cross-encoder comes with the package).
    Setting("RERANK", None, optional(section(RERANK_TYPES)),
            "dict or None", "`None`",
            "a rerank provider over the fused top: `{\"PROVIDER\": \"tei\" \\| \"cohere\" \\| \"jina\" \\| "
            "dotted path, \"MODEL\", \"OPTIONS\": {\"BASE_URL\", \"API_KEY\", \"RETRIES\"}, \"TOP_N\": 50, "
            "\"TIMEOUT\": 5}`; off by default: no offline cross-encoder's weights come from the package "
            "registry ([retrieval](retrieval.md), \"Rerank\")"),
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

#: Every key's default and its type, from :data:`SETTINGS`.
DEFAULTS: dict[str, Any] = {s.name: s.default for s in SETTINGS}
TYPES: dict[str, Coerce] = {s.name: s.coerce for s in SETTINGS}

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
    # ENTITY_EXTRACTOR -> the EntityExtractor subclass; a dotted path also works.
    "entity_extractor": {
        "rules": "memory_engine.providers.entities.RuleExtractor",
        "llm": "memory_engine.providers.entities.LLMExtractor",
    },
    # IngestionRule.converter_type -> the function running it.
    "converter": {
        "http": "memory_engine.providers.converters.http.run_http_converter",
        "callable": "memory_engine.providers.converters.callable.run_callable_converter",
    },
}
EMBEDDING_PROVIDERS = PROVIDERS["embedding"]

#: Kinds whose configured name may be a dotted path instead of an alias.
DOTTED_PATH_KINDS = frozenset({"embedding", "rerank", "entity_extractor"})


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
