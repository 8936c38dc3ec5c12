"""`make run` (python -m example_project.run) as a user meets it: it serves on the address it
was given and says so, it takes 8 concurrent writers without a 5xx (the example project's
own settings: a connection pool in the server and the worker alike), and interrupting it
(Ctrl-C = SIGINT, or SIGTERM) stops the web server, the worker and the embedded PostgreSQL it
started, leaving no dead pids in pgserver's handle list.

Each run uses a PostgreSQL of its own (a temporary MEMORY_ENGINE_PGDATA), never the suite's.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, deque
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from bench.loadgen import free_port

from .conftest import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]  # subprocesses with their own limits

WRITERS = 8
WRITES_EACH = 300
IDLE_CONNECTIONS = 16


@pytest.fixture(scope="module")
def pgdata() -> Iterator[Path]:
    """One data directory for the module (the second run reuses the first one's database)."""
    root = Path(tempfile.mkdtemp(prefix="merun"))  # short: the socket path must fit
    yield root / "pgdata"
    kill_postgres(root)
    shutil.rmtree(root, ignore_errors=True)


def postgres_processes(data_dir: Path) -> list[psutil.Process]:
    """Every postgres process started on ``data_dir`` (its command line names the directory)."""
    found = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        if proc.info["name"] == "postgres" and str(data_dir) in " ".join(proc.info["cmdline"] or ()):
            found.append(proc)
    return found


def kill_postgres(data_dir: Path) -> None:
    for proc in postgres_processes(data_dir):
        with contextlib.suppress(psutil.Error):
            proc.kill()


def handle_pids(data_dir: Path) -> list[int]:
    path = data_dir / ".handle_pids.json"
    return json.loads(path.read_text()) if path.exists() else []


class MakeRun:
    """``python -m example_project.run`` on a free port with the hashing embedder."""

    def __init__(self, data_dir: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.credentials = data_dir.parent / "demo-credentials.json"
        self.log = data_dir.parent / f"run-{self.port}.log"
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "MEMORY_ENGINE_DB_NAME")}
        env.update(MEMORY_ENGINE_PGDATA=str(data_dir), MEMORY_ENGINE_ADDRESS=f"127.0.0.1:{self.port}",
                   MEMORY_ENGINE_DEMO_CREDENTIALS=str(self.credentials), PYTHONUNBUFFERED="1",
                   MEMORY_ENGINE_EMBEDDING_PROVIDER="tests.providers.HashingEmbeddingProvider",
                   MEMORY_ENGINE_RATE="1000000/min", MEMORY_ENGINE_LOG_LEVEL="WARNING", Q_WORKERS="1")
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "example_project.run"], cwd=ROOT, env=env,
                                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_serving(self) -> None:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"run exited with {self.proc.returncode}:\n{self.output()[-3000:]}"
            try:
                if httpx.get(self.url + "/api/v1/memories", timeout=2).status_code == 401:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        pytest.fail(f"make run did not serve within 240 s:\n{self.output()[-3000:]}")

    def interrupt(self, signum: int) -> int:
        self.proc.send_signal(signum)
        try:
            return self.proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            pytest.fail(f"make run did not stop within 90 s of signal {signum}:\n{self.output()[-3000:]}")

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


def children_of(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def write_concurrently(url: str, key: str, store_id: str) -> Counter:
    """WRITERS threads x WRITES_EACH distinct facts; the statuses (0: no HTTP answer).

    Each write opens a new connection, and each writer leaves its last IDLE_CONNECTIONS
    open, like clients that close late: the dev server keeps a thread per open connection
    (8 x 16 = 128 threads, more than PostgreSQL's 100 connections), and no thread may hold
    a database connection while it waits for its client.
    """
    statuses: Counter = Counter()
    lock = threading.Lock()

    def writer(n: int) -> None:
        clients: deque[httpx.Client] = deque()
        try:
            for i in range(WRITES_EACH):
                client = httpx.Client(base_url=url, timeout=60, headers={"Authorization": f"Bearer {key}"})
                clients.append(client)
                body = {"memory_store_id": store_id, "content": f"Writer {n} recorded reading {i} of sensor w{n}r{i}."}
                try:
                    status = client.post("/api/v1/memories", json=body).status_code
                except httpx.HTTPError:
                    status = 0
                with lock:
                    statuses[status] += 1
                if len(clients) > IDLE_CONNECTIONS:
                    clients.popleft().close()
        finally:
            for client in clients:
                client.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return statuses


def assert_everything_stopped(run: MakeRun, data_dir: Path, children: list[psutil.Process]) -> None:
    assert [c.pid for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE] == [], \
        "the web server or the worker outlived make run"
    assert postgres_processes(data_dir) == [], "the embedded PostgreSQL outlived make run"
    assert not (data_dir / "postmaster.pid").exists()
    assert handle_pids(data_dir) == [], "pids of exited processes left in .handle_pids.json"
    assert "stopped" in run.output()


def test_make_run_serves_8_writers_and_ctrl_c_stops_everything(pgdata: Path) -> None:
    run = MakeRun(pgdata)
    try:
        run.wait_serving()
        # The banner names the address it serves on, never a port it does not use.
        assert f"http://127.0.0.1:{run.port}/api/docs/" in run.output()
        assert f"(http://127.0.0.1:{run.port}/admin/)" in run.output()
        assert ":8000" not in run.output()
        credentials = json.loads(run.credentials.read_text())
        statuses = write_concurrently(run.url, credentials["api_key"], credentials["memory_store_id"])
        assert sum(statuses.values()) == WRITERS * WRITES_EACH
        assert set(statuses) <= {200, 201}, statuses  # no 5xx, no dropped connection
        children = children_of(run.proc.pid)
        assert len(children) >= 2  # the worker and the server
        assert run.interrupt(signal.SIGINT) == 0
        assert_everything_stopped(run, pgdata, children)
    finally:
        run.kill()


def test_sigterm_stops_everything_and_drops_dead_handle_pids(pgdata: Path) -> None:
    """A pid left by a killed process (e.g. a previous run's SIGKILLed server) must neither
    keep PostgreSQL running nor stay in the handle list."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    pgdata.mkdir(parents=True, exist_ok=True)
    (pgdata / ".handle_pids.json").write_text(json.dumps([dead.pid]))
    run = MakeRun(pgdata)
    try:
        run.wait_serving()
        children = children_of(run.proc.pid)
        assert run.interrupt(signal.SIGTERM) == 0
        assert_everything_stopped(run, pgdata, children)
    finally:
        run.kill()


def worker_processes(run: MakeRun) -> list[psutil.Process]:
    """make run's worker (the main process of `manage.py memory_engine_worker`)."""
    return [c for c in psutil.Process(run.proc.pid).children() if "memory_engine_worker" in " ".join(c.cmdline())]


def test_a_dead_worker_cluster_is_restarted_and_the_console_says_so(pgdata: Path) -> None:
    """The worker's whole cluster dies (SIGKILL to its process group) while the server runs: make
    run notices, says so, starts a new one that takes work, and Ctrl-C still stops everything."""
    run = MakeRun(pgdata)
    try:
        run.wait_serving()
        workers = worker_processes(run)
        assert len(workers) == 1, [c.cmdline() for c in psutil.Process(run.proc.pid).children()]
        first = workers[0]
        deadline = time.monotonic() + 120
        while not first.children() and time.monotonic() < deadline:  # its cluster is up
            time.sleep(0.2)
        os.killpg(first.pid, signal.SIGKILL)
        deadline = time.monotonic() + 120
        while "worker restarted" not in run.output() and time.monotonic() < deadline:
            assert run.proc.poll() is None, run.output()[-3000:]
            time.sleep(0.2)
        assert "the worker exited (code -9): documents and rules wait; restarting it in 1 s (restart 1 of 5)" \
            in run.output(), run.output()[-3000:]
        restarted = worker_processes(run)
        assert len(restarted) == 1 and restarted[0].pid != first.pid
        deadline = time.monotonic() + 120
        while not restarted[0].children() and time.monotonic() < deadline:  # the new cluster runs
            assert restarted[0].is_running(), run.output()[-3000:]
            time.sleep(0.2)
        assert restarted[0].children(), run.output()[-3000:]
        assert httpx.get(run.url + "/api/v1/memories", timeout=10).status_code == 401  # served throughout
        children = children_of(run.proc.pid)
        assert run.interrupt(signal.SIGINT) == 0
        assert_everything_stopped(run, pgdata, children)
    finally:
        run.kill()
