"""A development database: PostgreSQL + pgvector started from Python, no install needed.

Needs the ``[embedded]`` extra (the ``pgserver`` wheel). In a host's settings::

    from memory_engine.embedded import embedded_database

    DATABASES = {"default": embedded_database(BASE_DIR / ".pgdata")}

The first process that asks starts the server on a Unix socket inside ``data_dir``; later
processes (the web server, ``qcluster``, tests) join it. Each holds a handle (its pid in
``data_dir/.handle_pids.json``) and the last one to let go stops the server. A process
that was killed cannot let go, so the pids of dead processes are dropped whenever a handle
is taken or released (:func:`prune_handle_pids`). For production, point ``DATABASES`` at
your own PostgreSQL with pgvector instead.
"""

from __future__ import annotations

import atexit
import os
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

from django.core.exceptions import ImproperlyConfigured

EXTRA_MISSING = (
    "memory_engine.embedded needs the embedded PostgreSQL from the [embedded] extra: "
    "`pip install 'django-memory-engine[embedded]'`, or point DATABASES at your own "
    "PostgreSQL with pgvector."
)

#: The embedded servers this process holds a handle on (released at exit, or explicitly).
_HELD: dict[Path, Any] = {}


def embedded_database(data_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Start (or join) the embedded PostgreSQL whose data lives in ``data_dir``; return a
    ``DATABASES`` entry for it (connection parameters only: add ``CONN_HEALTH_CHECKS`` and
    the like as for any database).

    Raises ``ImproperlyConfigured`` when the ``[embedded]`` extra is not installed.
    """
    info = start_embedded_server(data_dir).get_postmaster_info()
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "postgres",
        "USER": "postgres",
        "PASSWORD": "",
        # A Unix socket when the server has one (pgserver's default), else TCP.
        "HOST": str(info.socket_dir) if info.socket_dir is not None else (info.hostname or ""),
        "PORT": str(info.port or ""),
    }


def _pgserver() -> ModuleType:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR on servers
        try:
            import pgserver
        except ImportError as exc:
            raise ImproperlyConfigured(EXTRA_MISSING) from exc
    return pgserver


def start_embedded_server(data_dir: str | os.PathLike[str]) -> Any:
    """Take this process's handle on the embedded PostgreSQL in ``data_dir``, starting it if needed."""
    path = Path(data_dir).expanduser().resolve()
    if path in _HELD:
        return _HELD[path]
    pgserver = _pgserver()
    path.mkdir(parents=True, exist_ok=True)
    prune_handle_pids(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # "stop": the server stops when the last process using it lets go.
        server = pgserver.get_server(str(path), cleanup_mode="stop")
    if not _HELD:
        # Registered after pgserver's own exit hook, so it runs first (atexit is LIFO): the
        # dead pids are gone by the time pgserver decides whether this is the last handle.
        atexit.register(release_embedded_servers)
    _HELD[path] = server
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


def prune_handle_pids(data_dir: str | os.PathLike[str]) -> list[int]:
    """Drop the pids of exited processes from ``.handle_pids.json``; return the live pids.

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
