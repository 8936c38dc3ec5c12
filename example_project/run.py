"""`make run`: migrate, create the demo data, start a django-q2 worker and the web server.

Runs until Ctrl-C, then stops both. The embedded PostgreSQL (pgserver, data in .pgdata/)
starts with the first process that needs it and stops after the last one exits; set
DATABASE_URL to use your own server instead.
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


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
    sys.path.insert(0, str(ROOT))
    step("starting PostgreSQL" + (" (DATABASE_URL)" if os.environ.get("DATABASE_URL") else " (embedded, .pgdata/)"))
    import django

    django.setup()  # holds a handle on the embedded server for the whole session
    step("applying migrations")
    subprocess.run([*MANAGE, "migrate", "--noinput"], check=True, cwd=ROOT)
    step("creating the demo project, key, superuser and sample data")
    subprocess.run([*MANAGE, "memory_engine_demo"], check=True, cwd=ROOT)
    address = os.environ.get("MEMORY_ENGINE_ADDRESS", "127.0.0.1:8000")
    step(f"starting the worker and the server on http://{address}/ (Ctrl-C stops both)")
    worker = subprocess.Popen([*MANAGE, "qcluster"], cwd=ROOT, start_new_session=True)
    server = subprocess.Popen([*MANAGE, "runserver", address, "--noreload"], cwd=ROOT, start_new_session=True)
    children = [worker, server]
    # `kill`, a CI timeout or a closed terminal stop the children too, like Ctrl-C does.
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGHUP, _stop)
    print(f"    API docs  http://{address}/api/docs/\n    Admin     http://{address}/admin/", flush=True)
    try:
        while all(child.poll() is None for child in children):
            time.sleep(0.5)
        return next(child.returncode for child in children if child.poll() is not None) or 1
    except KeyboardInterrupt:
        return 0
    finally:
        for child in children:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGTERM)
        for child in children:
            try:
                child.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
        step("stopped")


if __name__ == "__main__":
    sys.exit(main())
