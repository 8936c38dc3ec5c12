"""`make run`: migrate, create the demo data, start the worker (`memory_engine_worker`) and the web server.

Runs until Ctrl-C (or SIGTERM, SIGHUP), then stops the worker, the server and the
embedded PostgreSQL it started (pgserver, data in .pgdata/; one that other processes still
use keeps running for them). Set DATABASE_URL to use your own server instead.

A worker that exits while the server runs is started again, after 1, 2, 4, 8 and 16 s, and
the console says so; after WORKER_RESTARTS restarts in a row (none counted once a worker has
run WORKER_STABLE_SECONDS) everything stops. The server exiting stops everything.

Environment: MEMORY_ENGINE_ADDRESS (host:port, default 127.0.0.1:8000),
MEMORY_ENGINE_DEMO_CREDENTIALS (the demo credentials file, default .demo-credentials.json),
DB_POOL_MAX_SIZE (each process's connection pool, default 10; 0: none).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MANAGE = [sys.executable, str(ROOT / "manage.py")]

#: Restarts in a row of a worker that exits by itself before `make run` gives up (and stops).
WORKER_RESTARTS = 5
#: A worker that ran this long before it exited counts as a first failure again.
WORKER_STABLE_SECONDS = 60
#: How long the processes of a dead worker get to stop by themselves before they are killed
#: (its sentinel stops the cluster when the worker's main process is gone, requeueing its tasks).
WORKER_ORPHANS_TIMEOUT = 20


def step(message: str) -> None:
    print(f"\033[1m==> {message}\033[0m", flush=True)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def stop_children(children: list[subprocess.Popen]) -> None:
    """SIGTERM to each child's main process, then SIGKILL to whatever is left of its group.

    The worker's main process stops its own sentinel and workers in order; SIGTERM to its
    whole group would kill them under the sentinel, which then waits forever.
    """
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    for child in children:
        try:
            child.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        child.wait()


def start_worker() -> subprocess.Popen:
    return subprocess.Popen([*MANAGE, "memory_engine_worker"], cwd=ROOT, start_new_session=True)


def process_group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def end_process_group(pgid: int, *, timeout: float) -> None:
    """Wait up to ``timeout`` seconds for what is left of a dead worker's process group, then kill it."""
    deadline = time.monotonic() + timeout
    while process_group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
    sys.path.insert(0, str(ROOT))
    # Ctrl-C, `kill`, a CI timeout or a closed terminal all stop everything below. SIGINT is set
    # explicitly: a process started in the background may inherit it ignored.
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _interrupt)
    children: list[subprocess.Popen] = []
    try:
        where = "DATABASE_URL" if os.environ.get("DATABASE_URL") else \
            f"embedded, {os.environ.get('MEMORY_ENGINE_PGDATA', '.pgdata/')}"
        step(f"starting PostgreSQL ({where})")
        import django

        django.setup()  # holds a handle on the embedded server for the whole session
        step("applying migrations")
        subprocess.run([*MANAGE, "migrate", "--noinput"], check=True, cwd=ROOT)
        step("creating the demo project, key, superuser and sample data")
        address = os.environ.get("MEMORY_ENGINE_ADDRESS", "127.0.0.1:8000")
        demo = [*MANAGE, "memory_engine_demo", "--address", address]
        if os.environ.get("MEMORY_ENGINE_DEMO_CREDENTIALS"):
            demo += ["--credentials-file", os.environ["MEMORY_ENGINE_DEMO_CREDENTIALS"]]
        subprocess.run(demo, check=True, cwd=ROOT)
        step(f"starting the worker and the server on http://{address}/ (Ctrl-C stops both)")
        children.append(start_worker())
        server = subprocess.Popen([*MANAGE, "runserver", address, "--noreload"], cwd=ROOT, start_new_session=True)
        children.append(server)
        print(f"    API docs  http://{address}/api/docs/\n    Admin     http://{address}/admin/", flush=True)
        restarts, worker_started = 0, time.monotonic()
        while server.poll() is None:
            worker = children[0]
            if worker.poll() is not None:
                if time.monotonic() - worker_started >= WORKER_STABLE_SECONDS:
                    restarts = 0
                if restarts >= WORKER_RESTARTS:
                    step(f"the worker exited (code {worker.returncode}) after {restarts} restarts in a row: stopping; "
                         "its log is above")
                    return 1
                delay = 2 ** restarts
                restarts += 1
                step(f"the worker exited (code {worker.returncode}): documents and rules wait; restarting it in "
                     f"{delay} s (restart {restarts} of {WORKER_RESTARTS})")
                time.sleep(delay)
                end_process_group(worker.pid, timeout=WORKER_ORPHANS_TIMEOUT)
                children[0] = start_worker()
                worker_started = time.monotonic()
                step(f"worker restarted (pid {children[0].pid})")
            time.sleep(0.5)
        return server.returncode or 1
    except KeyboardInterrupt:
        return 0
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)  # a second Ctrl-C must not cut the cleanup short
        stop_children(children)
        from memory_engine.embedded import release_embedded_servers

        release_embedded_servers()  # the children are gone: stop PostgreSQL unless others use it
        step("stopped")


if __name__ == "__main__":
    sys.exit(main())
