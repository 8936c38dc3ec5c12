"""Rule handlers: the providers a memory rule runs to turn a transcript into facts.

One :class:`~.base.RuleHandler` subclass per ``MemoryRule.handler_type``, named by dotted
path in :data:`HANDLER_CLASSES` and built once (cached) by :func:`get_rule_handler`.
Every handler passes the contract in ``tests/providers_contract/test_rule_handlers.py``.
"""

from __future__ import annotations

from functools import cache

from memory_engine.conf import PROVIDERS, reloads_with_settings, resolve_provider

from .base import COMMON_KEYS, Fact, RuleHandler, validate_url

__all__ = ["COMMON_KEYS", "HANDLER_CLASSES", "Fact", "RuleHandler", "get_rule_handler", "validate_url"]

#: handler_type -> the class serving it (the provider aliases in memory_engine.conf).
HANDLER_CLASSES: dict[str, str] = PROVIDERS["rule_handler"]


@cache
def get_rule_handler(handler_type: str) -> RuleHandler:
    """The handler serving ``handler_type``; KeyError for a type that has none."""
    handler: RuleHandler = resolve_provider("rule_handler", handler_type)()
    assert handler.handler_type == handler_type, handler
    return handler


reloads_with_settings(get_rule_handler.cache_clear)
