"""The ranking knobs a transform config may carry (base layer: imports only conf and exceptions).

A config's ``search`` object holds any of :data:`CONFIG_KNOBS` (each declared once, with its type,
range and setting, in memory_engine.conf.SEARCH_KNOBS); :func:`validate_ranking_knobs`
checks it when the config is saved (TRANSFORM_CONFIG_INVALID, ``details.field`` =
``search.<knob>``), and :func:`ranking_knobs` gives the knobs a search runs with: the
deployment's settings, then the config's knobs (a search with ``generation=``), then the
request's own options. Live search uses the settings only (docs/retrieval.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from memory_engine.conf import SEARCH_KNOBS, Knob, engine_settings
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


#: The knobs a config's ``search`` object may hold (memory_engine.conf.SEARCH_KNOBS declares each).
CONFIG_KNOBS: dict[str, Knob] = {name: knob for name, knob in SEARCH_KNOBS.items() if knob.config}
assert set(CONFIG_KNOBS) == {f.name for f in fields(RankingKnobs)}


def validate_ranking_knobs(value: Any) -> dict[str, Any]:
    """A config's ``search`` object checked knob by knob; TransformConfigInvalid otherwise."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TransformConfigInvalid("`search` must be a JSON object of ranking knobs.", details={"field": "search"})
    for name, knob in value.items():
        field = f"search.{name}"
        if name not in CONFIG_KNOBS:
            raise TransformConfigInvalid(f"`search` accepts only {', '.join(CONFIG_KNOBS)}.", details={"field": field})
        if not CONFIG_KNOBS[name].fits(knob):
            raise TransformConfigInvalid(f"`{field}` must be {CONFIG_KNOBS[name].expected}.", details={"field": field})
    return dict(value)


def ranking_knobs(config: Mapping[str, Any] | None = None, **request: Any) -> RankingKnobs:
    """The settings' knobs, overridden by a config's ``search`` object, then by the request's
    options that are not None."""
    knobs: dict[str, Any] = {name: knob.default if knob.setting is None else getattr(engine_settings, knob.setting)
                             for name, knob in CONFIG_KNOBS.items()}
    knobs.update({k: v for k, v in (config or {}).items() if k in CONFIG_KNOBS})
    knobs.update({k: v for k, v in request.items() if v is not None})
    return RankingKnobs(**knobs)
