"""A search request's arguments checked before anything is read: each knob out of range has
its own error class (and so its own code), a malformed list or query is a VALIDATION_ERROR."""

from __future__ import annotations

from typing import Any

from memory_engine.conf import SEARCH_KNOBS
from memory_engine.exceptions import (
    HalfLifeInvalid,
    LimitInvalid,
    MinRelevanceInvalid,
    MinSimilarityInvalid,
    RRFKInvalid,
    SearchParameterInvalid,
    ValidationFailed,
    WeightInvalid,
)
from memory_engine.text import expand_ligatures

#: The channels a search can run; a caller may switch one off (the evaluation harness does).
CHANNELS = ("vector", "lexical")


#: The error (and so the code) of each request knob out of range, in the order they are checked.
KNOB_ERRORS: dict[str, type[SearchParameterInvalid]] = {
    "vector_weight": WeightInvalid,
    "lexical_weight": WeightInvalid,
    "limit": LimitInvalid,
    "rrf_k": RRFKInvalid,
    "min_similarity": MinSimilarityInvalid,
    "min_relevance": MinRelevanceInvalid,
    "recency_half_life_days": HalfLifeInvalid,
}


def validate_search_knobs(**values: Any) -> None:
    """400 with a specific code for each knob out of its declared range (memory_engine.conf.SEARCH_KNOBS);
    None passes where a request may leave the knob unset."""
    for name, error in KNOB_ERRORS.items():
        if name not in values:
            continue
        knob, value = SEARCH_KNOBS[name], values[name]
        if (value is None and knob.nullable) or knob.fits(value):
            continue
        bounds = {"min": knob.low, "max": knob.high, "exclusive_min": knob.low_open}
        shown = value if isinstance(value, (int, float, str)) else repr(value)
        raise error(f"`{name}` is out of range.", details={name: shown, **bounds})


def validate_channels(channels: tuple[str, ...]) -> None:
    if not channels or not set(channels) <= set(CHANNELS):
        raise ValidationFailed("`channels` must name vector and/or lexical.", details={"channels": list(channels)})


def clean_query(query: Any) -> str | None:
    """The query without NUL characters and surrounding blanks, its typographic ligatures (ﬁ, ﬂ...)
    written as letters, as document text is; None when nothing is left."""
    if query is None:
        return None
    if not isinstance(query, str):
        raise ValidationFailed("`query` must be a string.", details={"field": "query"})
    return expand_ligatures(query.replace("\x00", " ")).strip() or None


def string_list(name: str, value: Any) -> list[str] | None:
    """``value`` as a list of distinct strings in their order, None when not given."""
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, (list, tuple, set)) or not all(
        isinstance(v, str) for v in value
    ):
        raise ValidationFailed(f"`{name}` must be a list of strings.", details={"field": name})
    return list(dict.fromkeys(value))


def boolean_option(name: str, value: Any, default: bool) -> bool:
    """A request's on/off option (None: the setting's default); VALIDATION_ERROR unless a boolean."""
    if value is None:
        return bool(default)
    if not isinstance(value, bool):
        raise ValidationFailed(f"`{name}` must be true or false.", details={"field": name})
    return value
