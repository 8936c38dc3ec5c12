"""A real server for the MCP tests: example_project's ASGI app under uvicorn (which the `mcp`
extra brings) on 127.0.0.1 in a thread, on the test database (tests using it commit their data)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import mcp  # noqa: F401  (a dev requirement: a missing SDK fails these tests, it does not skip them)
import pytest

from ..tool_setup import Setup, setup  # noqa: F401 - the fixture, and the name the tests import


@pytest.fixture
def live_url(transactional_db: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    import uvicorn
    from django.db import connection

    # Under ASGI each request's ORM work runs in a thread of its own: no persistent connections.
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 0)

    from example_project.asgi import application

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(application, host="127.0.0.1", port=port, log_level="warning",
                                           lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        with connection.cursor() as cursor:  # a connection a request thread left open
            cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                           "WHERE datname = current_database() AND pid <> pg_backend_pid()")
