"""Call the real WSGI stack in-process (middleware included) with a hand-made environ."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.core import signals
from django.core.handlers.wsgi import WSGIHandler
from django.db import close_old_connections


class RecordingInput(io.RawIOBase):
    """A wsgi.input of ``size`` zero bytes that records how it was read: whether anything
    read it before a decision, and the largest piece asked for (a buffered body shows here)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.bytes_read = 0
        self.largest_read = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        remaining = self.size - self.bytes_read
        size = remaining if size is None or size < 0 else min(size, remaining)
        self.largest_read = max(self.largest_read, size)
        self.bytes_read += size
        return b"\0" * size

    def readline(self, size: int = -1) -> bytes:
        return self.read(size)


@contextmanager
def keep_test_connection() -> Iterator[None]:
    """Like Django's test Client: the handler must not close the test transaction's connection."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


def wsgi_call(method: str, path: str, *, key: str | None = None, body: Any = b"", content_type: str = "",
              content_length: int | None = None, headers: dict[str, str] | None = None) -> tuple[int, dict, Any]:
    """(status, headers, parsed JSON body) from a fresh WSGIHandler (current MIDDLEWARE)."""
    stream = body if not isinstance(body, bytes) else io.BytesIO(body)
    environ = {
        "REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": "", "SERVER_NAME": "testserver",
        "SERVER_PORT": "80", "REMOTE_ADDR": "127.0.0.1", "wsgi.url_scheme": "http", "wsgi.input": stream,
        "wsgi.errors": io.StringIO(), "wsgi.version": (1, 0), "wsgi.multithread": False,
        "wsgi.multiprocess": False, "wsgi.run_once": False, "CONTENT_TYPE": content_type,
        "CONTENT_LENGTH": str(content_length if content_length is not None else
                              (len(body) if isinstance(body, bytes) else 0)),
    }
    if key:
        environ["HTTP_AUTHORIZATION"] = f"Bearer {key}"
    for name, value in (headers or {}).items():
        environ["HTTP_" + name.upper().replace("-", "_")] = value
    captured: dict[str, Any] = {}

    def start_response(status: str, response_headers: list[tuple[str, str]], exc_info: Any = None) -> None:
        captured["status"] = int(status.split()[0])
        captured["headers"] = dict(response_headers)

    with keep_test_connection():
        chunks = WSGIHandler()(environ, start_response)
        data = b"".join(chunks)
        getattr(chunks, "close", lambda: None)()
    try:
        parsed = json.loads(data) if data else None
    except ValueError:
        parsed = data
    return captured["status"], captured["headers"], parsed
