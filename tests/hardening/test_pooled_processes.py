"""The worker and the web server with a psycopg connection pool in every process (issue 64):
django-q2 forks its processes from one that opened the pool (qcluster's system checks), and
gunicorn ``--preload`` forks its workers from a master that loaded, and here used, the app.
Each forked process must open its own connections (memory_engine.fork_safety)."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from bench.loadgen import LiveApp, check_writes, run_load
from memory_engine.models import Document, Generation, Memory
from memory_engine.services.generations import complete_generation, record_generation

from ..conftest import ROOT, wait_for
from ..factories import AgentFactory, MemoryStoreFactory, ProjectFactory, make_key
from ..rules.conftest import make_rule

pytestmark = pytest.mark.slow

#: What django-q2 and the engine log when a task or the broker fails (the lines issue 64 saw).
ERROR_LINE = re.compile(r"\b(ERROR|CRITICAL)\b|Traceback|Failed '")


@pytest.fixture
def qcluster_env() -> dict[str, str]:
    return {"DB_POOL_MAX_SIZE": "10", "Q_WORKERS": "2",
            "MEMORY_ENGINE_EMBEDDING_PROVIDER": "tests.providers.HashingEmbeddingProvider"}


@pytest.fixture
def qcluster_log(tmp_path: Path) -> Path:
    return tmp_path / "qcluster.log"


def test_a_pooled_worker_ingests_fires_rules_and_stops_on_sigterm(qcluster: subprocess.Popen, qcluster_log: Path,
                                                                 client: Any, project: Any,
                                                                 hashing_embedder: None) -> None:
    store = MemoryStoreFactory(project=project)
    rule = make_rule(store, "callable", path="tests.rules.handlers.facts_from_output")
    agent = AgentFactory(project=project)
    documents = []
    for n in range(12):
        response = client.post("/api/v1/documents", {
            "path": f"/pooled/note-{n}.md", "content_type": "text/markdown",
            "content": f"# Note {n}\n\nThe lighthouse keeper {n} logs the weather every morning.",
        }, format="json")
        assert response.status_code == 202, response.content
        documents.append(response.json()["id"])
    generations = []
    for n in range(3):
        generation = record_generation(agent=agent, input_messages=[{"role": "user", "content": "hi"}])
        complete_generation(generation=generation,
                            output=f"The user owns {n + 1} boats.\nThe user lives in Bergen {n}.")
        generations.append(generation.pk)

    wait_for(lambda: not Document.objects.filter(pk__in=documents, status__in=["pending", "processing"]).exists(),
             timeout=120, interval=0.5)
    assert set(Document.objects.filter(pk__in=documents).values_list("status", flat=True)) == {"ready"}
    wait_for(lambda: all("created" in Generation.objects.get(pk=pk).extraction[rule.pk] for pk in generations),
             timeout=120, interval=0.5)
    for pk in generations:
        assert Generation.objects.get(pk=pk).extraction[rule.pk] == {
            "created": 2, "superseded": 0, "skipped": 0, "failed": 0, "error": None}
    assert Memory.objects.filter(store=store).count() == 6

    qcluster.send_signal(signal.SIGTERM)
    try:
        qcluster.wait(timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail(f"qcluster still running 20 s after SIGTERM:\n{qcluster_log.read_text()[-3000:]}")
    log = qcluster_log.read_text()
    assert "has stopped" in log
    assert [line for line in log.splitlines() if ERROR_LINE.search(line)] == [], log[-3000:]


def test_gunicorn_preload_with_the_pool_serves_concurrent_writes(transactional_db: Any, tmp_path: Path) -> None:
    """The master reads the database before it forks (tests/hardening/warm_wsgi.py); 2 workers
    x 4 threads share pools of 4 that must grow in each worker."""
    project = ProjectFactory()
    stores = [MemoryStoreFactory(project=project) for _ in range(2)]
    key = make_key(project)
    env = {"MEMORY_ENGINE_DB_NAME": connection.settings_dict["NAME"], "DB_POOL_MAX_SIZE": "4",
           "MEMORY_ENGINE_EMBEDDING_PROVIDER": "tests.providers.HashingEmbeddingProvider",
           "MEMORY_ENGINE_LOG_LEVEL": "WARNING", "PYTHONPATH": str(ROOT)}
    store_ids = [s.pk for s in stores]
    with LiveApp(env, web_workers=2, threads=4, wsgi="tests.hardening.warm_wsgi:application", preload=True,
                 log=tmp_path / "gunicorn.log") as app:
        result = run_load(app.url, key, store_ids, clients=8, seconds=8, timeout=60,
                          mix={"write_new": 3, "write_repeat": 1})
    assert result.server_errors() == [], [(c.op, c.status, c.body) for c in result.server_errors()[:5]]
    assert set(result.statuses()) <= {200, 201}, result.statuses()
    assert len(result.writes()) >= 8
    s = connection.settings_dict
    conninfo = {"dbname": s["NAME"], "user": s["USER"], "host": s["HOST"], "port": s["PORT"], "password": s["PASSWORD"]}
    assert check_writes(conninfo, result, store_ids) == []  # every acknowledged write has its assertion
