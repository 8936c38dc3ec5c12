"""How a ``MEMORY_ENGINE`` setting is declared: the :class:`Setting` row, the coercers of the
types this package defines (a vector dimension, consent expiry days) and the keys of the nested
dicts (EMBEDDING, LLM, RERANK, RELEVANCE_MODEL). The rows themselves are in :mod:`.writing`,
:mod:`.reading` and :mod:`.operations`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memory_engine.setting_types import (
    Coerce,
    InvalidSetting,
    integer,
    mapping,
    number,
    number_map,
    one_of,
    optional,
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


#: The consent categories (memory_engine.consent_categories.categories checks that it names the same) and the
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

