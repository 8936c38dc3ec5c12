"""The callable handler: ``fn(transcript, rule, generation) -> list[Fact | str | dict]``
named by import path (``handler_config["path"]``, limited by RULE_CALLABLE_PREFIXES)."""

from __future__ import annotations

from typing import Any

from django.utils.module_loading import import_string

from memory_engine.exceptions import HandlerBadResponse, HandlerInvalid, HandlerNotFound
from memory_engine.guards import check_callable_allowed
from memory_engine.models import Generation, MemoryRule

from .base import RuleHandler


class CallableHandler(RuleHandler):
    """Calls the host's function; ``{"facts": [...]}`` and ``None`` are accepted too."""

    handler_type = "callable"
    config_keys = frozenset({"path"})

    def extract(self, transcript: str, rule: MemoryRule, generation: Generation) -> list[Any]:
        path = (rule.handler_config or {}).get("path", "")
        try:
            fn = import_string(path)
        except ImportError as exc:
            raise HandlerNotFound(f"Cannot import {path!r}: {exc}") from exc
        result = fn(transcript, rule, generation)
        if isinstance(result, dict):
            result = result.get("facts")
        if result is None:
            return []
        if not isinstance(result, (list, tuple)):
            raise HandlerBadResponse("The callable must return a list of facts.")
        return list(result)

    def validate_config(self, config: dict[str, Any], *, trusted: bool) -> dict[str, Any]:
        path = config.get("path", "")
        if not path:
            raise HandlerInvalid("A callable handler needs `path`.", details={"field": "path"})
        check_callable_allowed(path, setting="RULE_CALLABLE_PREFIXES", trusted=trusted)  # before importing
        try:
            fn = import_string(path)
        except ImportError as exc:
            raise HandlerInvalid(f"Cannot import {path!r}.", details={"path": path}) from exc
        if not callable(fn):
            raise HandlerInvalid(f"{path!r} is not callable.", details={"path": path})
        return config
