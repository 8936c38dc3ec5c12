"""Database settings for the example project: DATABASE_URL, or an embedded PostgreSQL.

When DATABASE_URL is unset, the app's development helper (`memory_engine.embedded`, the
`[embedded]` extra) starts a real PostgreSQL 18 with pgvector and pg_textsearch whose data lives in `.pgdata/`
(or MEMORY_ENGINE_PGDATA). Several processes (web server, worker, tests) share it; the
last one to let go stops it (see `memory_engine.embedded`).

Each process keeps its connections in a psycopg pool of DB_POOL_MAX_SIZE connections (default
10): the dev server, which runs every request on a thread of its own, then shares a bounded
set of connections instead of opening one per request or keeping one open per thread, and
gunicorn's threads and django-q2's processes reuse theirs. Each process opens its own pool,
forked ones included (memory_engine.fork_safety). DB_POOL_MAX_SIZE=0 turns the pool off: a
connection per thread, kept CONN_MAX_AGE seconds (default 60).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

from memory_engine.embedded import embedded_database

#: Connections in one process's pool when DB_POOL_MAX_SIZE is unset or empty (0: no pool).
DEFAULT_POOL_MAX_SIZE = 10


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


def embedded_data_dir(base_dir: Path) -> Path:
    """The embedded server's data directory: MEMORY_ENGINE_PGDATA, else ``.pgdata/``.

    The test suite can run in several processes (pytest-xdist: ``make test`` runs two):
    worker ``gw0`` keeps that server, each other worker ``gwN`` gets one of its own beside it
    (``.pgdata-gwN/``), which the servers and workers its tests start inherit through
    MEMORY_ENGINE_PGDATA. The feed's horizon is the oldest transaction open anywhere on the server
    (docs/feed.md), and every test runs inside one: sharing a server, one worker's tests would
    hold back the other's feed."""
    data_dir = Path(os.environ.get("MEMORY_ENGINE_PGDATA", base_dir / ".pgdata"))
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    # xdist imported: the suite's worker itself, not a process one of its tests started
    if worker not in ("", "gw0") and "xdist" in sys.modules:
        data_dir = data_dir.with_name(f"{data_dir.name}-{worker}")
        os.environ["MEMORY_ENGINE_PGDATA"] = str(data_dir)
    return data_dir


def default_database(base_dir: Path) -> dict[str, Any]:
    url = os.environ.get("DATABASE_URL")
    if url:
        config = database_from_url(url)
    else:
        config = embedded_database(embedded_data_dir(base_dir))
    if os.environ.get("MEMORY_ENGINE_DB_NAME"):
        # Lets a worker started by the test suite use the suite's test database.
        config["NAME"] = os.environ["MEMORY_ENGINE_DB_NAME"]
    pool_size = int(os.environ.get("DB_POOL_MAX_SIZE") or DEFAULT_POOL_MAX_SIZE)
    if pool_size > 0:
        # Requests beyond the pool's size wait (up to 10 s) for a connection instead of
        # opening one more; a pool needs CONN_MAX_AGE=0 (connections go back to the pool).
        config.setdefault("OPTIONS", {})["pool"] = {"min_size": 1, "max_size": pool_size, "timeout": 10}
        config["CONN_MAX_AGE"] = 0
    else:
        config["CONN_MAX_AGE"] = int(os.environ.get("CONN_MAX_AGE", "60"))
    config["CONN_HEALTH_CHECKS"] = True
    config["TEST"] = {"NAME": os.environ.get("TEST_DB_NAME", "test_memory_engine")}
    return config
