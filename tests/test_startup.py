"""A healthy project starts quietly: the system checks speak only when there is something to do,
and each message once.

The subprocess test runs a PostgreSQL of its own (a temporary MEMORY_ENGINE_PGDATA), never the
suite's: a fresh data directory, `migrate`, then `check` in a new process, as a newcomer does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core import checks

from .conftest import ROOT
from .test_make_run import kill_postgres

NO_ISSUES = "System check identified no issues (0 silenced)."


@pytest.mark.django_db
@pytest.mark.parametrize("databases", [None, ["default"]], ids=["check", "migrate"])
def test_a_database_message_is_reported_once(settings: Any, databases: list[str] | None) -> None:
    """`check` and `runserver` run the checks with databases=None, `migrate` with its alias:
    either way one database problem is one message."""
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "KNOWLEDGE_LEXICAL_BACKEND": "tsvector"}
    messages = checks.run_checks(databases=databases)
    assert [m.id for m in messages if m.id.startswith("memory_engine.")] == ["memory_engine.W010"]


@pytest.fixture
def pgdata() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="mestart"))  # short: the socket path must fit
    yield root / "pgdata"
    kill_postgres(root)
    shutil.rmtree(root, ignore_errors=True)


def manage(pgdata: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "MEMORY_ENGINE_DB_NAME")}
    env.update(MEMORY_ENGINE_PGDATA=str(pgdata), PYTHONUNBUFFERED="1")
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=240, check=False)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_freshly_migrated_project_checks_without_a_word(pgdata: Path) -> None:
    """Each command starts the embedded server anew (it stops when its last client exits), the
    state in which pg_textsearch 1.0.0 has lost its bm25 statistics: nothing to do, nothing said."""
    migrated = manage(pgdata, "migrate", "--no-input")
    assert migrated.returncode == 0, migrated.stderr[-3000:]
    assert "WARNINGS" not in migrated.stdout + migrated.stderr
    checked = manage(pgdata, "check")
    assert checked.returncode == 0, checked.stderr[-3000:]
    assert (checked.stdout + checked.stderr).strip() == NO_ISSUES
