"""The HTTP handler: POST ``{transcript, rule, generation}``; the answer is ``{"facts": [...]}``.

Headers: ``X-Memory-Engine-Timestamp`` (unix seconds), ``X-Memory-Engine-Rule`` (the rule
id) and, when the rule has a ``secret``, ``X-Memory-Engine-Signature: sha256=<hex>`` =
HMAC-SHA256(secret, timestamp + "." + raw body), made by :mod:`memory_engine.providers.signing`.
"""

from __future__ import annotations

import json
import time
from typing import Any

from memory_engine.conf import engine_settings
from memory_engine.exceptions import HandlerBadResponse, HandlerHTTPError, HandlerTimeout
from memory_engine.models import Generation, MemoryRule
from memory_engine.providers.http import ProviderHTTPError, post_json
from memory_engine.providers.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, sign_body

from .base import RuleHandler, validate_url

RULE_HEADER = "X-Memory-Engine-Rule"


def rule_payload(rule: MemoryRule) -> dict[str, Any]:
    return {"id": rule.pk, "memory_store_id": rule.store_id, "on": rule.on, "handler_type": rule.handler_type}


def generation_payload(generation: Generation) -> dict[str, Any]:
    return {
        "id": generation.pk,
        "agent_id": generation.agent_id,
        "status": generation.status,
        "input_messages": generation.input_messages,
        "output": generation.output,
        "initiator_id": generation.initiator_id,
        "created_at": generation.created_at.isoformat(),
        "completed_at": generation.completed_at.isoformat() if generation.completed_at else None,
    }


class HttpHandler(RuleHandler):
    """POSTs the transcript (HMAC-signed when a secret is set); a bare list answer works too."""

    handler_type = "http"
    config_keys = frozenset({"url", "secret", "timeout", "retries"})

    def extract(self, transcript: str, rule: MemoryRule, generation: Generation) -> list[Any]:
        config = rule.handler_config or {}
        url = config.get("url", "")
        body = json.dumps(
            {"transcript": transcript, "rule": rule_payload(rule), "generation": generation_payload(generation)},
            ensure_ascii=False,
        ).encode()
        timestamp = str(int(time.time()))
        headers = {"Content-Type": "application/json", TIMESTAMP_HEADER: timestamp, RULE_HEADER: rule.pk}
        if config.get("secret"):
            headers[SIGNATURE_HEADER] = sign_body(str(config["secret"]), body, timestamp=timestamp)
        timeout = float(config.get("timeout") or engine_settings.RULE_HANDLER_TIMEOUT)
        retries = int(config.get("retries", engine_settings.HTTP_RETRIES))
        try:
            answer = post_json(url, {}, content=body, headers=headers, timeout=timeout, retries=retries)
        except ProviderHTTPError as exc:
            timed_out = exc.status is None and "timed out" in str(exc)
            error = HandlerTimeout if timed_out else HandlerHTTPError
            raise error(str(exc), details={"status": exc.status}) from exc
        facts = answer.get("facts") if isinstance(answer, dict) else answer
        if not isinstance(facts, list):
            raise HandlerBadResponse('The handler must answer {"facts": [...]}.')
        return facts

    def validate_config(self, config: dict[str, Any], *, trusted: bool) -> dict[str, Any]:
        validate_url(config.get("url", ""), field="url")
        return config
