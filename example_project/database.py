"""Database settings for the example project: DATABASE_URL, or an embedded PostgreSQL.

When DATABASE_URL is unset, the `pgserver` wheel starts a real PostgreSQL 16 with
pgvector whose data lives in `.pgdata/` (or MEMORY_ENGINE_PGDATA). Several processes
(web server, worker, tests) share it: each holds a handle (its pid in
`.pgdata/.handle_pids.json`), and the last one to let go stops the server. A process that
was killed cannot let go, so the pids of dead processes are dropped whenever a handle is
taken or released (:func:`prune_handle_pids`).

DB_POOL_MAX_SIZE (a number) puts the connections of one process in a psycopg pool of that
size: servers that run each request on a new thread (runserver) then share a bounded set
of connections instead of keeping one open per thread.
"""

from __future__ import annotations

import atexit
import os
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse


def database_from_url(url: str) -> dict[str, Any]:
    parsed = urlparse(url)
    if parsed.scheme not in ("postgres", "postgresql", "postgresql+psycopg"):
        raise ValueError(f"DATABASE_URL must be a postgresql:// URL, not {parsed.scheme}://")
    query = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
    host = query.pop("host", None) or parsed.hostname or ""
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parsed.path.lstrip("/")) or "postgres",
        "USER": unquote(parsed.username or ""),
        "PASSWORD": unquote(parsed.password or ""),
        "HOST": host,
        "PORT": str(parsed.port or ""),
        "OPTIONS": query,
    }


def embedded_database(data_dir: Path) -> dict[str, Any]:
    """A DATABASES entry for the embedded server in ``data_dir`` (started if needed)."""
    return database_from_url(start_embedded_server(data_dir).get_uri())


#: The embedded servers this process holds a handle on (released at exit, or by run.py).
_HELD: dict[Path, Any] = {}


def _pgserver() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR on servers
        try:
            import pgserver
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise RuntimeError(
                "DATABASE_URL is unset and the embedded PostgreSQL is not installed; "
                "`pip install 'django-memory-engine[embedded]'` or set DATABASE_URL."
            ) from exc
    return pgserver


def start_embedded_server(data_dir: Path) -> Any:
    """Take this process's handle on the embedded PostgreSQL in ``data_dir``, starting it if needed."""
    data_dir = data_dir.expanduser().resolve()
    if data_dir in _HELD:
        return _HELD[data_dir]
    pgserver = _pgserver()
    data_dir.mkdir(parents=True, exist_ok=True)
    prune_handle_pids(data_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = pgserver.get_server(str(data_dir), cleanup_mode="stop")
    if not _HELD:
        # Registered after pgserver's own exit hook, so it runs first (atexit is LIFO): the
        # dead pids are gone by the time pgserver decides whether this is the last handle.
        atexit.register(release_embedded_servers)
    _HELD[data_dir] = server
    return server


def release_embedded_servers() -> None:
    """Let go of every embedded server this process holds; the last live handle stops it.

    The one place that stops the embedded PostgreSQL: at exit of every process that
    started or joined it, and explicitly by ``example_project.run`` once its children
    have exited.
    """
    while _HELD:
        data_dir, server = _HELD.popitem()
        prune_handle_pids(data_dir)
        server.cleanup()  # pgserver: drops our pid; stops the server if it was the last one


def prune_handle_pids(data_dir: Path) -> list[int]:
    """Drop the pids of exited processes from ``.handle_pids.json``; the live pids.

    pgserver counts one handle per process and stops the server when the last one exits;
    a process that was killed (SIGKILL, or SIGTERM without an exit hook) never removes its
    pid, which would keep the server running forever and pile up in the file.
    """
    import psutil
    from pgserver.postgres_server import PostgresServer
    from pgserver.utils import DiskList

    handles = DiskList(Path(data_dir) / ".handle_pids.json")
    with PostgresServer._lock:  # the lock pgserver itself holds while it reads and writes the list
        pids = handles.get()
        live = [pid for pid in pids if _process_alive(pid, psutil)]
        if live != pids:
            handles.put(live)
    return live


def _process_alive(pid: int, psutil: Any) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def default_database(base_dir: Path) -> dict[str, Any]:
    url = os.environ.get("DATABASE_URL")
    if url:
        config = database_from_url(url)
    else:
        config = embedded_database(Path(os.environ.get("MEMORY_ENGINE_PGDATA", base_dir / ".pgdata")))
    if os.environ.get("MEMORY_ENGINE_DB_NAME"):
        # Lets a worker started by the test suite use the suite's test database.
        config["NAME"] = os.environ["MEMORY_ENGINE_DB_NAME"]
    pool_size = int(os.environ.get("DB_POOL_MAX_SIZE") or 0)
    if pool_size > 0:
        # Requests beyond the pool's size wait (up to 30 s) for a connection instead of
        # opening one more; a pool needs CONN_MAX_AGE=0 (connections go back to the pool).
        config["OPTIONS"]["pool"] = {"min_size": 1, "max_size": pool_size, "timeout": 30}
        config["CONN_MAX_AGE"] = 0
    else:
        config["CONN_MAX_AGE"] = int(os.environ.get("CONN_MAX_AGE", "60"))
    config["CONN_HEALTH_CHECKS"] = True
    config["TEST"] = {"NAME": os.environ.get("TEST_DB_NAME", "test_memory_engine")}
    return config
