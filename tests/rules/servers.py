"""Real HTTP servers on 127.0.0.1 standing in for an LLM endpoint and an HTTP rule handler."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from ..httpserver import LocalServer

Reply = tuple[int, Any, float]  # (status, body: dict/list/str/bytes, delay seconds)


class FakeServer(LocalServer):
    """``responder(request) -> (status, body, delay)``; every request is kept in ``received``
    as ``{path, headers, raw, json}``. Started at once; ``close()`` stops it.

    Set ``hold`` to an unset :class:`threading.Event` to keep every answer back until the
    test sets it: a caller that waits for this server then blocks, whatever the machine's load.
    """

    def __init__(self, responder: Callable[[dict[str, Any]], Reply]) -> None:
        self.responder = responder
        self.received: list[dict[str, Any]] = []
        self.hold: threading.Event | None = None
        super().__init__(self._handle)
        self.__enter__()

    def _handle(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, Any]:
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = None
        request = {"path": path, "headers": headers, "raw": raw, "json": body}
        self.received.append(request)
        if self.hold is not None:
            self.hold.wait(timeout=60)
        status, payload, delay = self.responder(request)
        if delay:
            time.sleep(delay)
        return status, payload.encode() if isinstance(payload, str) else payload

    def close(self) -> None:
        if self.hold is not None:
            self.hold.set()  # release held handler threads before stopping
        self.__exit__(None, None, None)


def chat_reply(text: str) -> dict[str, Any]:
    """An OpenAI chat completion answer holding ``text``."""
    return {"id": "cmpl-test", "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}


class FakeLLM(FakeServer):
    """An OpenAI-compatible /v1/chat/completions; ``reply`` is the text (or a Reply tuple)."""

    def __init__(self) -> None:
        self.reply: str | Reply = "[]"
        super().__init__(self._respond)

    def _respond(self, request: dict[str, Any]) -> Reply:
        if not request["path"].endswith("/chat/completions"):
            return 404, {"error": "not found"}, 0
        reply = self.reply
        if isinstance(reply, tuple):
            return reply
        return 200, chat_reply(reply), 0

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"


def verify_signature(secret: str, headers: dict[str, str], raw: bytes) -> bool:
    """What an HTTP handler does: recompute the HMAC over ``timestamp.body``."""
    timestamp = headers.get("X-Memory-Engine-Timestamp", "")
    expected = "sha256=" + hmac.new(secret.encode(), timestamp.encode() + b"." + raw, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, headers.get("X-Memory-Engine-Signature", ""))
