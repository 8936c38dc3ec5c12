"""pg_textsearch 1.0.0 loses its corpus statistics when the server restarts; the engine
rebuilds the bm25 indexes before the first search after each start (memory_engine.lexical).

These tests run a server of their own (a temporary data directory), stop it cleanly or
SIGKILL it with all its processes, start it again, and compare the answers of a fresh
process with the answers given before the restart.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pgserver  # a dev requirement: a missing one fails these tests, it does not skip them
import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from pgserver._commands import pg_ctl

    srv = pgserver.get_server(tmp_path_factory.mktemp("restart") / "pgdata", cleanup_mode="delete")
    srv.stop = lambda: pg_ctl(["-w", "stop", "-m", "fast"], pgdata=srv.pgdata, user=srv.system_user)  # type: ignore[attr-defined]
    try:
        yield srv
    finally:
        srv.cleanup()


def _start(srv: Any, attempts: int = 3) -> None:
    """Start the server again; on a loaded machine pg_ctl's start can fail while the killed
    server's resources are still being released, so it is tried again after a pause. The
    last failure is raised with the server's log."""
    for attempt in range(1, attempts + 1):
        try:
            with srv._lock:
                srv.ensure_postgres_running()
            return
        except subprocess.CalledProcessError:
            if attempt == attempts:
                log = Path(srv.pgdata) / "log"
                raise AssertionError("the server did not start again:\n"
                                     + (log.read_text()[-3000:] if log.exists() else "(no log)")) from None
            time.sleep(2 * attempt)


def _kill(srv: Any) -> None:
    """SIGKILL the postmaster and every backend, as an OOM killer or a power cut would."""
    import psutil

    postmaster = psutil.Process(srv.get_pid())
    victims = [postmaster, *postmaster.children(recursive=True)]
    for proc in victims:
        proc.send_signal(signal.SIGKILL)
    psutil.wait_procs(victims, timeout=30)


def _probe(srv: Any, phase: str) -> dict[str, list]:
    env = dict(os.environ, DATABASE_URL=srv.get_uri(),
               MEMORY_ENGINE_EMBEDDING_PROVIDER="tests.providers.HashingEmbeddingProvider",
               MEMORY_ENGINE_EMBEDDING_MODEL="test-hashing", MEMORY_ENGINE_LOG_LEVEL="WARNING")
    env.pop("MEMORY_ENGINE_DB_NAME", None)
    proc = subprocess.run([sys.executable, "-m", "tests.search.restart_probe", phase], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _raw_bm25_hits(srv: Any) -> int:
    """What pg_textsearch answers by itself, before the engine had a chance to rebuild (memory
    contents: the chunks' live bm25 index is partial, and the defect shows on a whole-table one)."""
    with psycopg.connect(srv.get_uri(), autocommit=True) as conn:
        return conn.execute(
            "SELECT count(*) FROM (SELECT id FROM memory_engine_memorycontent "
            "WHERE (text <@> to_bm25query('volcano', 'me_content_text_bm25')) < 0 "
            "ORDER BY text <@> to_bm25query('volcano', 'me_content_text_bm25') LIMIT 10) t").fetchone()[0]


def _extension_version(srv: Any) -> tuple[int, ...]:
    with psycopg.connect(srv.get_uri(), autocommit=True) as conn:
        row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'pg_textsearch'").fetchone()
    assert row, "the embedded server must offer pg_textsearch"
    return tuple(int(p) for p in row[0].split(".")[:2])


@pytest.mark.parametrize("how", ["clean", "sigkill"])
def test_search_answers_are_identical_across_a_restart(server, how):
    before = _probe(server, "setup")
    assert all(before.values()), before
    baseline = _raw_bm25_hits(server)
    assert baseline > 0
    if how == "clean":
        server.stop()
    else:
        _kill(server)
    time.sleep(0.5)
    _start(server)
    if _extension_version(server) < (1, 3) and how == "clean":
        # The defect is real on this build: without the guard every BM25 query answers nothing.
        assert _raw_bm25_hits(server) == 0
    after = _probe(server, "search")
    assert after == before
    assert _raw_bm25_hits(server) == baseline
