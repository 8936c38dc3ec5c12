"""A search request's arguments checked before anything is read: each knob out of range has
its own error class (and so its own code), a malformed list or query is a VALIDATION_ERROR."""

from __future__ import annotations

import math
from typing import Any

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

from .results import MAX_LIMIT

#: The channels a search can run; a caller may switch one off (the evaluation harness does).
CHANNELS = ("vector", "lexical")


def _check_number(name: str, value: Any, error: type[SearchParameterInvalid], *, low: float | None,
                  high: float | None, integer: bool = False, low_open: bool = False) -> None:
    """Raise ``error`` naming the knob and its bounds unless ``value`` is a finite number in range."""
    bad = isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not isinstance(value, int))
    if not bad and isinstance(value, float) and not math.isfinite(value):
        bad = True
    if not bad:
        bad = (low is not None and (value <= low if low_open else value < low)) or (high is not None and value > high)
    if bad:
        bounds = {"min": low, "max": high, "exclusive_min": low_open}
        shown = value if isinstance(value, (int, float, str)) else repr(value)
        raise error(f"`{name}` is out of range.", details={name: shown, **bounds})


def validate_search_knobs(*, limit: Any, rrf_k: Any, min_similarity: Any, recency_half_life_days: Any,
                          vector_weight: Any = None, lexical_weight: Any = None, min_relevance: Any = None) -> None:
    """400 with a specific code for each knob out of range."""
    for name, weight in (("vector_weight", vector_weight), ("lexical_weight", lexical_weight)):
        if weight is not None:
            _check_number(name, weight, WeightInvalid, low=0, high=100)
    _check_number("limit", limit, LimitInvalid, low=1, high=MAX_LIMIT, integer=True)
    _check_number("rrf_k", rrf_k, RRFKInvalid, low=0, high=None, low_open=True)
    if min_similarity is not None:
        _check_number("min_similarity", min_similarity, MinSimilarityInvalid, low=-1, high=1)
    if min_relevance is not None:
        _check_number("min_relevance", min_relevance, MinRelevanceInvalid, low=0, high=1)
    _check_number("recency_half_life_days", recency_half_life_days, HalfLifeInvalid, low=0, high=None)


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
