"""The API behind real servers over a socket: Django's dev server (what ``make run`` starts),
gunicorn's sync worker (docker-compose) and gunicorn's threaded worker.

The in-process tests (test_hostile_input.py) never meet a server's own rules: a hop-by-hop
header the dev server refuses, a sync worker that resets a connection with unread data, a
server that buffers the unread rest of a body. These do.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from bench.loadgen import free_port
from example_project.run import stop_children

from ..conftest import ROOT

pytestmark = pytest.mark.slow

MEMORIES = "/api/v1/memories"
TWELVE_MB = 12 * 1024 * 1024
LIMIT = 10 * 1024 * 1024  # the example project's DATA_UPLOAD_MAX_MEMORY_SIZE

SERVERS = {
    "runserver": ["{manage}", "runserver", "{address}", "--noreload"],
    "gunicorn-sync": ["-m", "gunicorn", "example_project.wsgi:application", "--bind", "{address}",
                      "--workers", "1"],
    "gunicorn-gthread": ["-m", "gunicorn", "example_project.wsgi:application", "--bind", "{address}",
                         "--workers", "1", "--worker-class", "gthread", "--threads", "2"],
}


class Server:
    """One server process on a free 127.0.0.1 port against the test database."""

    def __init__(self, kind: str, db_name: str) -> None:
        self.kind = kind
        address = f"127.0.0.1:{free_port()}"
        self.url = f"http://{address}"
        args = [a.format(manage=str(ROOT / "manage.py"), address=address) for a in SERVERS[kind]]
        env = {**os.environ, "MEMORY_ENGINE_DB_NAME": db_name, "PYTHONUNBUFFERED": "1", "DJANGO_DEBUG": "1",
               "MEMORY_ENGINE_EMBEDDING_PROVIDER": "tests.providers.HashingEmbeddingProvider",
               "DB_POOL_MAX_SIZE": "4" if kind == "runserver" else ""}
        self.proc = subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)

    def wait_ready(self) -> None:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"{self.kind} exited with {self.proc.returncode}"
            try:
                httpx.get(self.url + MEMORIES, timeout=2)  # 401: the app answers
                return
            except httpx.HTTPError:
                time.sleep(0.3)
        pytest.fail(f"{self.kind} did not answer within 90 s")

    def app_pid(self) -> int:
        """The process that runs the application (gunicorn: its one worker)."""
        if self.kind == "runserver":
            return self.proc.pid
        out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(self.proc.pid)], capture_output=True, text=True)
        return int(out.stdout.split()[0])

    def stop(self) -> None:
        stop_children([self.proc])


@pytest.fixture(scope="module", params=list(SERVERS))
def server(request: Any, django_db_setup: Any) -> Iterator[Server]:
    from django.db import connection

    running = Server(request.param, connection.settings_dict["NAME"])
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


def reset_peak_rss(pid: int) -> int:
    """Reset the kernel's high-water mark of ``pid``'s resident memory; the current RSS in KiB."""
    with open(f"/proc/{pid}/clear_refs", "w") as handle:
        handle.write("5")
    return proc_status_kib(pid, "VmRSS")


def proc_status_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"{field} not in /proc/{pid}/status")


def test_oversized_json_answers_413_json_through_the_server(server: Server) -> None:
    """12 MB to POST /memories: a JSON 413 the client actually receives (it sends the whole
    body before it reads), without the server holding the body in memory, and the
    connection still serves the next request."""
    pid = server.app_pid()
    rss_before = reset_peak_rss(pid)
    body = b'{"content": "' + b"x" * (TWELVE_MB - 16) + b'"}'
    with httpx.Client(base_url=server.url, timeout=60) as client:
        response = client.post(MEMORIES, content=body, headers={"Content-Type": "application/json"})
        assert response.status_code == 413, response.text[:500]
        assert response.headers["Content-Type"] == "application/json"
        assert response.json()["code"] == "REQUEST_TOO_LARGE"
        assert response.json()["details"] == {"bytes": len(body), "max_bytes": LIMIT}
        after = client.get(MEMORIES)  # same client: a kept-alive connection or a clean new one
        assert (after.status_code, after.json()["code"]) == (401, "AUTHENTICATION_REQUIRED")
    peak_growth_mib = (proc_status_kib(pid, "VmHWM") - rss_before) / 1024
    assert peak_growth_mib < 8, f"{server.kind} grew {peak_growth_mib:.1f} MiB for a refused 12 MB body"


def test_swagger_ui_loads_only_local_assets(server: Server) -> None:
    """/api/docs/ works offline: every script, stylesheet and icon it names is on this server's
    static path, and the dev server (DEBUG) serves each (gunicorn leaves static files to the host)."""
    page = httpx.get(server.url + "/api/docs/", timeout=30)
    assert page.status_code == 200
    assets = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert assets, page.text[:500]
    assert [a for a in assets if re.match(r"(https?:)?//", a)] == [], assets
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in assets
    if server.kind != "runserver":
        return
    for asset in assets:
        response = httpx.get(server.url + asset, timeout=30)
        assert response.status_code == 200, asset
        assert len(response.content) > 100, asset
