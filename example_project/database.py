"""Database settings for the example project: DATABASE_URL, or an embedded PostgreSQL.

When DATABASE_URL is unset, the app's development helper (`memory_engine.embedded`, the
`[embedded]` extra) starts a real PostgreSQL 16 with pgvector whose data lives in `.pgdata/`
(or MEMORY_ENGINE_PGDATA). Several processes (web server, worker, tests) share it; it stops
after the last one exits.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

from memory_engine.embedded import embedded_database


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


def default_database(base_dir: Path) -> dict[str, Any]:
    url = os.environ.get("DATABASE_URL")
    if url:
        config = database_from_url(url)
    else:
        config = embedded_database(Path(os.environ.get("MEMORY_ENGINE_PGDATA", base_dir / ".pgdata")))
    if os.environ.get("MEMORY_ENGINE_DB_NAME"):
        # Lets a worker started by the test suite use the suite's test database.
        config["NAME"] = os.environ["MEMORY_ENGINE_DB_NAME"]
    config["CONN_MAX_AGE"] = int(os.environ.get("CONN_MAX_AGE", "60"))
    config["CONN_HEALTH_CHECKS"] = True
    config["TEST"] = {"NAME": os.environ.get("TEST_DB_NAME", "test_memory_engine")}
    return config
