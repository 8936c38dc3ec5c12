"""`make run`: migrate, create the demo data, start a django-q2 worker and the web server.

Runs until Ctrl-C (or SIGTERM, SIGHUP), then stops the worker, the server and the
embedded PostgreSQL it started (pgserver, data in .pgdata/; one that other processes still
use keeps running for them). Set DATABASE_URL to use your own server instead.

Environment: MEMORY_ENGINE_ADDRESS (host:port, default 127.0.0.1:8000),
MEMORY_ENGINE_DEMO_CREDENTIALS (the demo credentials file, default .demo-credentials.json),
DB_POOL_MAX_SIZE (each process's connection pool, default 10; 0: none).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MANAGE = [sys.executable, str(ROOT / "manage.py")]


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
        children.append(subprocess.Popen([*MANAGE, "qcluster"], cwd=ROOT, start_new_session=True))
        children.append(subprocess.Popen([*MANAGE, "runserver", address, "--noreload"], cwd=ROOT,
                                         start_new_session=True))
        print(f"    API docs  http://{address}/api/docs/\n    Admin     http://{address}/admin/", flush=True)
        while all(child.poll() is None for child in children):
            time.sleep(0.5)
        return next(child.returncode for child in children if child.poll() is not None) or 1
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
