"""The ``knowledge_config`` schema: an agent's retrieval scope (base layer: imports only conf and
exceptions), shared by the agents service, push injection and the agent tools.

``{memory_store_ids, document_ids, document_paths, tags, min_score, min_relevance, limit, rrf_k,
recency_half_life_days}``; ids are checked against the project by the search (and by
``services.agents.validate_agent_scope``), this module checks shape and types.
"""

from __future__ import annotations

from typing import Any

from memory_engine.conf import SEARCH_KNOBS
from memory_engine.exceptions import KnowledgeConfigInvalid, ValidationFailed

__all__ = [
    "ARRAY_KEYS",
    "CONFIG_KEYS",
    "DEFAULT_INJECTION_LIMIT",
    "SCALAR_KEYS",
    "merge_knowledge_config",
    "normalize_knowledge_config",
    "search_kwargs",
]

DEFAULT_INJECTION_LIMIT = 5
ARRAY_KEYS = ("memory_store_ids", "document_ids", "document_paths")
SCALAR_KEYS = ("min_score", "min_relevance", "limit", "rrf_k", "recency_half_life_days")
CONFIG_KEYS = (*ARRAY_KEYS, "tags", *SCALAR_KEYS)


def _unique(values: list[Any]) -> list[Any]:
    return list(dict.fromkeys(values))


def normalize_knowledge_config(config: Any, *, field: str = "knowledge_config") -> dict[str, Any]:
    """Validate shape and types (ids are checked against the project by the search)."""
    if config in (None, ""):
        return {}
    if not isinstance(config, dict):
        raise ValidationFailed(f"`{field}` must be a JSON object.", details={"field": field})
    unknown = sorted(set(config) - set(CONFIG_KEYS) - {"write_memory_store_id"})
    if unknown:
        raise KnowledgeConfigInvalid(f"`{field}` has unknown keys: {', '.join(unknown)}.",
                                     details={"unknown_keys": unknown})
    given = {key: value for key, value in config.items() if value is not None}
    out: dict[str, Any] = {key: _array(field, key, given[key]) for key in ARRAY_KEYS if key in given}
    if "tags" in given:
        if not isinstance(given["tags"], dict):
            raise KnowledgeConfigInvalid(f"`{field}.tags` must be a JSON object.",
                                         details={"key": "tags"})
        out["tags"] = dict(given["tags"])
    out.update({key: _scalar(field, key, given[key]) for key in SCALAR_KEYS if key in given})
    if "write_memory_store_id" in given:
        out["write_memory_store_id"] = given["write_memory_store_id"]
    return out


def _array(field: str, key: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise KnowledgeConfigInvalid(f"`{field}.{key}` must be a list of strings.", details={"key": key})
    return _unique(value)


def _scalar(field: str, key: str, value: Any) -> int | float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise KnowledgeConfigInvalid(f"`{field}.{key}` must be a number.",
                                     details={"key": key})
    if key == "min_relevance" and not SEARCH_KNOBS[key].fits(value):  # the relevance filter a search applies
        raise KnowledgeConfigInvalid(f"`{field}.min_relevance` must be {SEARCH_KNOBS[key].expected}.",
                                     details={"key": key})
    return value


def merge_knowledge_config(base: dict[str, Any] | None, override: dict[str, Any] | None) -> dict[str, Any]:
    """Arrays unioned (base order first), tags merged per key (override wins), scalars overridden."""
    merged = dict(base or {})
    for key, value in (override or {}).items():
        if key in ARRAY_KEYS:
            merged[key] = _unique([*(merged.get(key) or []), *value])
        elif key == "tags":
            merged[key] = {**(merged.get(key) or {}), **value}
        else:
            merged[key] = value
    return merged


def search_kwargs(config: dict[str, Any]) -> dict[str, Any]:
    """knowledge_config -> SearchRequest fields (min_score is a raw cosine floor;
    min_relevance, when set, the relevance threshold: injection supplies the deployment's otherwise)."""
    kwargs: dict[str, Any] = {key: config[key] for key in (*ARRAY_KEYS, "tags") if config.get(key)}
    if config.get("min_score") is not None:
        kwargs["min_similarity"] = config["min_score"]
    for key in ("min_relevance", "rrf_k", "recency_half_life_days"):
        if config.get(key) is not None:
            kwargs[key] = config[key]
    kwargs["limit"] = config.get("limit", DEFAULT_INJECTION_LIMIT)
    return kwargs
