"""The embedded database refuses a data directory of another PostgreSQL major."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from memory_engine.embedded import refuse_old_data_dir

ROOT = Path(__file__).resolve().parents[1]


def test_a_postgresql_16_data_directory_is_refused_with_instructions(tmp_path):
    data = tmp_path / ".pgdata"
    data.mkdir()
    (data / "PG_VERSION").write_text("16\n")
    with pytest.raises(ImproperlyConfigured) as info:
        refuse_old_data_dir(data)
    message = str(info.value)
    assert "PostgreSQL 16" in message and "PostgreSQL 18" in message
    assert "make clean-db" in message
    assert "docs/operations.md" in message


def test_an_empty_or_current_directory_passes(tmp_path):
    refuse_old_data_dir(tmp_path)  # no PG_VERSION yet: initdb will make an 18 one
    (tmp_path / "PG_VERSION").write_text("18\n")
    refuse_old_data_dir(tmp_path)


def test_the_settings_stop_before_starting_a_server(tmp_path):
    """Through the real entry point: `manage.py check` exits 1 with the advice, no postgres started."""
    data = tmp_path / "old"
    data.mkdir()
    (data / "PG_VERSION").write_text("16\n")
    env = {"PATH": "/usr/bin:/bin", "MEMORY_ENGINE_PGDATA": str(data), "HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, str(ROOT / "manage.py"), "check"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "make clean-db" in proc.stderr
    assert not (data / "postmaster.pid").exists()


def test_each_worker_of_a_parallel_suite_gets_a_server_of_its_own(tmp_path, monkeypatch):
    """`make test` runs two pytest-xdist workers: gw0 keeps the suite's data directory, gw1 gets
    one beside it, and the processes gw1's tests start (xdist not imported there) inherit gw1's
    without deriving another from it."""
    from example_project.database import embedded_data_dir

    monkeypatch.setenv("MEMORY_ENGINE_PGDATA", str(tmp_path / "pgdata"))
    monkeypatch.setitem(sys.modules, "xdist", sys.modules.get("xdist") or type(sys)("xdist"))
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    assert embedded_data_dir(tmp_path) == tmp_path / "pgdata"
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    assert embedded_data_dir(tmp_path) == tmp_path / "pgdata-gw1"
    assert os.environ["MEMORY_ENGINE_PGDATA"] == str(tmp_path / "pgdata-gw1")  # what its subprocesses read
    monkeypatch.delitem(sys.modules, "xdist")
    assert embedded_data_dir(tmp_path) == tmp_path / "pgdata-gw1"  # such a subprocess
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    monkeypatch.delenv("MEMORY_ENGINE_PGDATA")
    assert embedded_data_dir(tmp_path) == tmp_path / ".pgdata"  # one process, no setting
