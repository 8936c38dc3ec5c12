"""Real HTTP servers on 127.0.0.1 standing in for an LLM endpoint and an HTTP rule handler."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = tuple[int, Any, float]  # (status, body: dict/list/str/bytes, delay seconds)


class FakeServer:
    """``responder(request) -> (status, body, delay)``; every request is kept in ``requests``."""

    def __init__(self, responder: Callable[[dict[str, Any]], Reply]) -> None:
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw or b"null")
                except ValueError:
                    body = None
                request = {"path": self.path, "headers": dict(self.headers), "raw": raw, "json": body}
                with server._lock:
                    server.requests.append(request)
                status, payload, delay = server.responder(request)
                if delay:
                    time.sleep(delay)
                data = payload if isinstance(payload, bytes) else (
                    payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
                )
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


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
