"""The ranking knobs a transform config may carry (base layer: imports only conf and exceptions).

A config's ``search`` object holds any of :data:`KNOB_TYPES`; :func:`validate_ranking_knobs`
checks it when the config is saved (TRANSFORM_CONFIG_INVALID, ``details.field`` =
``search.<knob>``), and :func:`ranking_knobs` gives the knobs a search runs with: the
deployment's settings, then the config's knobs (a search with ``generation=``), then the
request's own options. Live search uses the settings only (docs/retrieval.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from memory_engine.conf import engine_settings
from memory_engine.exceptions import TransformConfigInvalid


@dataclass(frozen=True)
class RankingKnobs:
    """The fusion's knobs and what the stages after it do (docs/retrieval.md)."""

    dedupe_documents: bool
    mmr: bool
    authority_weight: float
    boosts: bool
    corroboration_support: float
    corroboration_contradict: float
    corroboration_cap: int
    rerank: bool
    rrf_k: float
    vector_weight: float
    lexical_weight: float


#: knob -> (type, lowest, highest) accepted in a config's ``search`` object.
KNOB_TYPES: dict[str, tuple[type, float | None, float | None]] = {
    "dedupe_documents": (bool, None, None),
    "mmr": (bool, None, None),
    "authority_weight": (float, 0.0, 1.0),
    "boosts": (bool, None, None),
    "corroboration_support": (float, 0.0, 1.0),
    "corroboration_contradict": (float, 0.0, 1.0),
    "corroboration_cap": (int, 1, 100),
    "rerank": (bool, None, None),
    "rrf_k": (float, 0.01, 1000.0),
    "vector_weight": (float, 0.0, 100.0),
    "lexical_weight": (float, 0.0, 100.0),
}
assert set(KNOB_TYPES) == {f.name for f in fields(RankingKnobs)}


def validate_ranking_knobs(value: Any) -> dict[str, Any]:
    """A config's ``search`` object checked knob by knob; TransformConfigInvalid otherwise."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TransformConfigInvalid("`search` must be a JSON object of ranking knobs.", details={"field": "search"})
    for name, knob in value.items():
        field = f"search.{name}"
        if name not in KNOB_TYPES:
            raise TransformConfigInvalid(f"`search` accepts only {', '.join(KNOB_TYPES)}.", details={"field": field})
        kind, low, high = KNOB_TYPES[name]
        if kind is bool:
            ok = isinstance(knob, bool)
        else:
            number = isinstance(knob, (int, float)) and not isinstance(knob, bool)
            ok = (number and (kind is float or isinstance(knob, int)) and math.isfinite(knob)
                  and (low is None or knob >= low) and (high is None or knob <= high))
        if not ok:
            wanted = "true or false" if kind is bool else f"a {kind.__name__} in [{low}, {high}]"
            raise TransformConfigInvalid(f"`{field}` must be {wanted}.", details={"field": field})
    return dict(value)


def ranking_knobs(config: Mapping[str, Any] | None = None, **request: Any) -> RankingKnobs:
    """The settings' knobs, overridden by a config's ``search`` object, then by the request's
    options that are not None."""
    knobs: dict[str, Any] = {
        "dedupe_documents": engine_settings.SEARCH_DEDUPE_DOCUMENTS,
        "mmr": engine_settings.SEARCH_MMR,
        "authority_weight": engine_settings.SEARCH_AUTHORITY_WEIGHT,
        "boosts": engine_settings.SEARCH_BOOSTS,
        "corroboration_support": engine_settings.SEARCH_CORROBORATION_SUPPORT,
        "corroboration_contradict": engine_settings.SEARCH_CORROBORATION_CONTRADICT,
        "corroboration_cap": engine_settings.SEARCH_CORROBORATION_CAP,
        "rerank": True,  # whenever RERANK configures a provider
        "rrf_k": engine_settings.SEARCH_RRF_K,
        "vector_weight": engine_settings.SEARCH_VECTOR_WEIGHT,
        "lexical_weight": engine_settings.SEARCH_LEXICAL_WEIGHT,
    }
    knobs.update({k: v for k, v in (config or {}).items() if k in KNOB_TYPES})
    knobs.update({k: v for k, v in request.items() if v is not None})
    return RankingKnobs(**knobs)
