"""The built-in handler: the configured LLM extracts the facts, answering a JSON array."""

from __future__ import annotations

import json
from typing import Any

from memory_engine.exceptions import HandlerInvalid, UnparseableResponse
from memory_engine.guards import check_llm_overrides
from memory_engine.models import Generation, MemoryRule
from memory_engine.providers.llm import require_llm_provider

from .base import RuleHandler, validate_url

DEFAULT_PROMPT = """You extract durable memories from a conversation between a user and an AI assistant.

Return the facts worth remembering in later conversations: stable facts about the user \
(identity, preferences, constraints, circumstances, goals) and about the task or project \
(decisions, requirements, names, dates, numbers). Write each fact as one short, \
self-contained sentence in the third person ("The user prefers email over phone."). \
Skip greetings, small talk, questions, the assistant's own suggestions, anything \
temporary, and anything already marked as retrieved knowledge.

Answer with a JSON array only, no prose. Each item is either a string or an object \
{"content": "...", "tags": {"kind": "preference"}}. Return at most 20 items; return [] \
when nothing is worth remembering."""

#: The keys of a builtin handler's ``provider`` override.
PROVIDER_KEYS = {"BASE_URL", "API_KEY", "MODEL", "TIMEOUT", "RETRIES"}


def parse_fact_array(text: str) -> list[Any]:
    """The JSON array between the first ``[`` and the last ``]`` of a model reply."""
    start, end = text.find("["), text.rfind("]")
    if start < 0 or end < start:
        raise UnparseableResponse("The model's answer holds no JSON array.", details={"answer": text[:200]})
    try:
        value = json.loads(text[start:end + 1])
    except ValueError:
        raise UnparseableResponse("The model's answer is not a valid JSON array.",
                                  details={"answer": text[:200]}) from None
    if not isinstance(value, list):
        raise UnparseableResponse("The model's answer is not a JSON array.")
    return value


class BuiltinHandler(RuleHandler):
    """A tool-less, temperature-0 completion parsed leniently as a JSON array."""

    handler_type = "builtin"
    config_keys = frozenset({"prompt", "model", "provider", "max_tokens"})

    def extract(self, transcript: str, rule: MemoryRule, generation: Generation) -> list[Any]:
        config = rule.handler_config or {}
        # Again at call time: the rule may predate the operator narrowing LLM_OVERRIDABLE.
        check_llm_overrides(config)
        provider = require_llm_provider(config.get("provider") or None)
        reply = provider.complete(
            [
                {"role": "system", "content": config.get("prompt") or DEFAULT_PROMPT},
                {"role": "user", "content": f"Conversation:\n\n{transcript}"},
            ],
            model=config.get("model") or None,
            temperature=0.0,
            max_tokens=config.get("max_tokens"),
        )
        return parse_fact_array(reply)

    def validate_config(self, config: dict[str, Any], *, trusted: bool) -> dict[str, Any]:
        if "provider" in config:
            provider = config["provider"]
            if not isinstance(provider, dict) or set(map(str.upper, provider)) - PROVIDER_KEYS:
                raise HandlerInvalid("`provider` must be an object with BASE_URL, API_KEY, MODEL, TIMEOUT, "
                                     "RETRIES.", details={"field": "provider"})
            config["provider"] = {k.upper(): v for k, v in provider.items()}
        check_llm_overrides(config)
        base_url = (config.get("provider") or {}).get("BASE_URL")
        if base_url not in (None, ""):
            validate_url(base_url, field="provider.BASE_URL")
        return config
