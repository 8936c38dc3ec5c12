"""memory_engine.embedded: the development database helper of the [embedded] extra."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from memory_engine.embedded import embedded_database


def test_without_the_extra_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "pgserver", None)  # what `import pgserver` meets when it is not installed
    with pytest.raises(ImproperlyConfigured) as raised:
        embedded_database(tmp_path / "pgdata")
    assert "pip install 'django-memory-engine[embedded]'" in str(raised.value)
    assert not (tmp_path / "pgdata").exists()


@pytest.mark.skipif("DATABASE_URL" in os.environ, reason="the suite runs on DATABASE_URL, not the embedded server")
def test_the_entry_reaches_postgresql_with_pgvector() -> None:
    """The suite's own server (the example project uses the helper): joining it gives an entry
    psycopg connects with, to a PostgreSQL that offers the vector extension."""
    data_dir = Path(os.environ.get("MEMORY_ENGINE_PGDATA", Path(settings.BASE_DIR) / ".pgdata"))
    entry = embedded_database(data_dir)
    assert entry["ENGINE"] == "django.db.backends.postgresql"
    with psycopg.connect(dbname=entry["NAME"], user=entry["USER"], host=entry["HOST"], port=entry["PORT"]) as conn:
        row = conn.execute("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'").fetchone()
    assert row is not None
