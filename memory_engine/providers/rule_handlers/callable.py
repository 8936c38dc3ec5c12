"""The callable handler: ``fn(transcript, rule, generation) -> list[Fact | str | dict]``
named by import path (``handler_config["path"]``, limited by RULE_CALLABLE_PREFIXES)."""

from __future__ import annotations

from typing import Any

from django.utils.module_loading import import_string

from memory_engine.exceptions import RuleHandlerFailed, ValidationFailed
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
            raise RuleHandlerFailed(f"Cannot import {path!r}: {exc}", code="HANDLER_NOT_FOUND") from exc
        result = fn(transcript, rule, generation)
        if isinstance(result, dict):
            result = result.get("facts")
        if result is None:
            return []
        if not isinstance(result, (list, tuple)):
            raise RuleHandlerFailed("The callable must return a list of facts.", code="HANDLER_BAD_RESPONSE")
        return list(result)

    def validate_config(self, config: dict[str, Any], *, trusted: bool) -> dict[str, Any]:
        path = config.get("path", "")
        if not path:
            raise ValidationFailed("A callable handler needs `path`.", code="HANDLER_INVALID",
                                   details={"field": "path"})
        check_callable_allowed(path, setting="RULE_CALLABLE_PREFIXES", trusted=trusted)  # before importing
        try:
            fn = import_string(path)
        except ImportError as exc:
            raise ValidationFailed(f"Cannot import {path!r}.", code="HANDLER_INVALID",
                                   details={"path": path}) from exc
        if not callable(fn):
            raise ValidationFailed(f"{path!r} is not callable.", code="HANDLER_INVALID", details={"path": path})
        return config
