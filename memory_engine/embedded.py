"""A development database: PostgreSQL 16 + pgvector started from Python, no install needed.

Needs the ``[embedded]`` extra (the ``pgserver`` wheel). In a host's settings::

    from memory_engine.embedded import embedded_database

    DATABASES = {"default": embedded_database(BASE_DIR / ".pgdata")}

The first process that asks starts the server on a Unix socket inside ``data_dir``; later
processes (the web server, ``qcluster``, tests) join it, and the last one to exit stops it.
For production, point ``DATABASES`` at your own PostgreSQL with pgvector instead.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured

EXTRA_MISSING = (
    "memory_engine.embedded needs the embedded PostgreSQL from the [embedded] extra: "
    "`pip install 'django-memory-engine[embedded]'`, or point DATABASES at your own "
    "PostgreSQL with pgvector."
)


def embedded_database(data_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Start (or join) the embedded PostgreSQL whose data lives in ``data_dir``; return a
    ``DATABASES`` entry for it (connection parameters only: add ``CONN_HEALTH_CHECKS`` and
    the like as for any database).

    Raises ``ImproperlyConfigured`` when the ``[embedded]`` extra is not installed.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR on servers
        try:
            import pgserver
        except ImportError as exc:
            raise ImproperlyConfigured(EXTRA_MISSING) from exc
        path = Path(data_dir).expanduser().resolve()
        path.mkdir(parents=True, exist_ok=True)
        # "stop": the server stops when the last process using it exits.
        server = pgserver.get_server(str(path), cleanup_mode="stop")
    info = server.get_postmaster_info()
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "postgres",
        "USER": "postgres",
        "PASSWORD": "",
        # A Unix socket when the server has one (pgserver's default), else TCP.
        "HOST": str(info.socket_dir) if info.socket_dir is not None else (info.hostname or ""),
        "PORT": str(info.port or ""),
    }
