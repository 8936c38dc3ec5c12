"""The rule-handler contract: a handler turns a transcript into candidate facts.

A memory rule names its handler by type (``builtin``, ``callable``, ``http``); each type
is one :class:`RuleHandler` subclass, chosen by :func:`~memory_engine.providers.rule_handlers.get_rule_handler`.
The handler only proposes: the rules service coerces what it returns
(:class:`Fact`, a string or ``{content, tags?, about?}``) and writes it through the funnel.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar
from urllib.parse import urlparse

from memory_engine.exceptions import HandlerInvalid
from memory_engine.guards import check_outbound_url
from memory_engine.models import Generation, MemoryRule

__all__ = ["COMMON_KEYS", "Fact", "RuleHandler", "validate_url"]

#: handler_config keys every type accepts: the agent that handles the rule (loop prevention).
COMMON_KEYS = frozenset({"agent_id"})


@dataclass
class Fact:
    """One candidate memory proposed by a handler."""

    content: str
    tags: dict[str, Any] = field(default_factory=dict)
    about: dict[str, Any] | None = None


class RuleHandler:
    """Base class of the rule handlers; one instance per type serves every rule.

    Subclasses set ``handler_type`` and ``config_keys`` and implement :meth:`extract`;
    :meth:`validate_config` adds the type's own checks to the generic ones of
    ``memory_engine.services.rules.validate_rule_handler``.
    """

    #: The ``MemoryRule.handler_type`` this class serves.
    handler_type: ClassVar[str] = ""
    #: The ``handler_config`` keys this type accepts (besides :data:`COMMON_KEYS`).
    config_keys: ClassVar[frozenset[str]] = frozenset()

    def extract(self, transcript: str, rule: MemoryRule, generation: Generation) -> list[Any]:
        """The candidate facts of ``transcript`` (raw items; the service coerces them).

        Raise a ``MemoryEngineError`` with a stable code (``RuleHandlerFailed``, ``LLMError``)
        for a failure the firing records; anything else is recorded as HANDLER_FAILED.
        """
        raise NotImplementedError(".extract() must be overridden")

    def validate_config(self, config: dict[str, Any], *, trusted: bool) -> dict[str, Any]:
        """Check the type's own keys of a (generically checked) configuration and return it,
        possibly normalised; raise ``HandlerInvalid`` (400) otherwise."""
        return config

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.handler_type}>"


def validate_url(url: Any, *, field: str) -> None:
    """An http(s) URL that passes the outbound guard (400 HANDLER_INVALID / URL_NOT_ALLOWED)."""
    parsed = urlparse(url if isinstance(url, str) else "")
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise HandlerInvalid(f"`{field}` must be an http(s) URL.", details={"field": field})
    check_outbound_url(url)
