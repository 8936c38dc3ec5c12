"""Suite 4, faults, against the real PostgreSQL (and, for the restart, a PostgreSQL of its own).

(a) the embedding endpoint times out / answers 500 / answers the wrong dimensions: writes and
    ingestion go on without vectors and are counted, search degrades with a reason, and
    ``memory_engine_reembed --missing`` repairs everything once the endpoint recovers;
(b) the LLM endpoint fails: the turn is kept, the error is recorded on the generation, and
    the rule can run again later;
(c) the worker is SIGKILLed mid-ingestion and mid-rule: the sweeps recover both, with no
    duplicate chunks or memories and counts that are not double-added;
(d) PostgreSQL is restarted under a live gunicorn: requests in flight answer 503
    DATABASE_UNAVAILABLE with Retry-After, the app reconnects by itself, no half-written rows.

(c) and (d) run with the example project's connection pool in every process (its default) and
without one (``DB_POOL_MAX_SIZE=0``: a kept connection per thread).
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from django.core.management import call_command
from django.utils import timezone

from bench.loadgen import LiveApp, check_writes, manage, run_load
from memory_engine.models import Chunk, Document, Generation, Memory, MemoryAssertion, MemoryContent
from memory_engine.services.documents import document_sweep
from memory_engine.services.generations import complete_generation, record_generation
from memory_engine.services.rules import enqueue_rule_firing, rule_firing_sweep

from ..conftest import ROOT, use_embedder
from ..factories import AgentFactory, MemoryStoreFactory
from ..rules.conftest import make_rule
from ..rules.servers import FakeLLM, chat_reply
from ..search.helpers import FILLER, write
from .faults import MODEL, EmbeddingEndpoint


def engine(settings: Any, **values: Any) -> None:
    settings.MEMORY_ENGINE = {**(getattr(settings, "MEMORY_ENGINE", {}) or {}), **values}


@pytest.fixture
def endpoint() -> Iterator[EmbeddingEndpoint]:
    with EmbeddingEndpoint() as server:
        yield server
        server.unblock()


def http_embedder(settings: Any, endpoint: EmbeddingEndpoint, provider: str = "openai", **options: Any) -> None:
    use_embedder(settings, provider, MODEL=MODEL, DIMENSIONS=384,
                 OPTIONS={"BASE_URL": endpoint.url, "TIMEOUT": 0.3, "RETRIES": 0, **options})


def search(client: Any, query: str, store: Any) -> dict[str, Any]:
    response = client.post("/api/v1/knowledge/search", {"query": query, "memory_store_ids": [store.pk],
                                                        "document_paths": ["/faults/"]}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


# --- (a) the embedder fails ---------------------------------------------------------------------


@pytest.mark.parametrize("provider", ["ollama", "openai"])
@pytest.mark.parametrize("fault", ["timeout", "500", "wrong_dimensions"])
def test_embedder_fault_degrades_and_reembed_repairs(client: Any, store: Any, settings: Any,
                                                     endpoint: EmbeddingEndpoint, provider: str, fault: str) -> None:
    http_embedder(settings, endpoint, provider)
    for text in FILLER:  # more rows than the limit: after the repair the vector channel must rank
        write(store, text)
    endpoint.mode = fault

    written = client.post("/api/v1/memories", {"memory_store_id": store.pk,
                                               "content": "The zebra enclosure opens at 9 am."}, format="json")
    assert written.status_code == 201 and written.json()["action"] == "created", written.content
    assertion = MemoryAssertion.objects.get(pk=written.json()["assertion_id"])
    assert assertion.details["embedding"] == "embedding_failed"  # counted on the ledger
    assert written.json()["degraded"] == ["embed_unavailable"]
    assert MemoryContent.objects.get(memories__pk=written.json()["id"]).embedding is None

    doc = client.post("/api/v1/documents", {
        "path": "/faults/zebra.md", "content_type": "text/markdown", "wait": True,
        "content": "# Zebras\n\nThe zebra keeper feeds them hay.\n\nZebras sleep standing up.",
    }, format="json")
    assert doc.status_code == 201, doc.content
    assert doc.json()["status"] == "ready"
    document = Document.objects.get(pk=doc.json()["id"])
    assert document.total_chunks >= 1 and document.unembedded_chunks == document.total_chunks

    degraded = search(client, "zebra", store)
    assert degraded["degraded"] == ["embed_unavailable", "lexical_only"]
    assert {hit["source"] for hit in degraded["results"]} == {"memory", "document"}  # lexically found

    endpoint.mode = "ok"
    call_command("memory_engine_reembed", "--missing", stdout=open(os.devnull, "w"))  # noqa: SIM115
    assert MemoryContent.objects.get(memories__pk=written.json()["id"]).embedding is not None
    document.refresh_from_db()
    assert document.unembedded_chunks == 0
    assert not Chunk.objects.filter(document=document, embedding__isnull=True).exists()
    repaired = search(client, "zebra enclosure", store)
    assert repaired["degraded"] == []
    by_vector = sorted((hit for hit in repaired["results"] if hit["ranks"]["vector"]),
                       key=lambda hit: hit["ranks"]["vector"])
    assert by_vector[0]["id"] == written.json()["id"]  # its repaired vector ranks it first of 13 memories
    assert any(hit["source"] == "document" for hit in by_vector)  # and the chunks' repaired vectors find them


# --- (b) the LLM endpoint fails -----------------------------------------------------------------


@pytest.mark.parametrize("reply, code", [
    ((500, {"error": "overloaded"}, 0.0), "LLM_HTTP_ERROR"),
    ((200, chat_reply('["late"]'), 1.5), "LLM_TIMEOUT"),
])
def test_llm_failure_keeps_the_turn_and_records_the_error(client: Any, project: Any, settings: Any,
                                                          django_capture_on_commit_callbacks: Any,
                                                          hashing_embedder: None, reply: Any, code: str) -> None:
    llm = FakeLLM()
    try:
        engine(settings, LLM={"BASE_URL": llm.base_url, "MODEL": "m", "TIMEOUT": 0.5, "RETRIES": 0})
        store = MemoryStoreFactory(project=project)
        rule = make_rule(store)
        agent = AgentFactory(project=project)
        llm.reply = reply
        messages = [{"role": "user", "content": "I moved to Bergen and prefer email."}]
        with django_capture_on_commit_callbacks(execute=True):
            created = client.post("/api/v1/generations", {"agent_id": agent.pk, "input_messages": messages,
                                                          "output": "Noted.", "status": "completed"}, format="json")
        assert created.status_code == 201, created.content
        generation = Generation.objects.get(pk=created.json()["id"])
        entry = generation.extraction[rule.pk]
        assert entry["error"]["code"] == code
        assert (entry["created"], entry["failed"]) == (0, 0)
        # Nothing lost: the turn is complete and intact, and no half-written memory exists.
        assert generation.status == "completed" and generation.input_messages == messages
        assert not Memory.objects.filter(store=store).exists()
        listed = client.get(f"/api/v1/generations/{generation.pk}").json()
        assert listed["extraction"][rule.pk]["error"]["code"] == code

        llm.reply = '["The user lives in Bergen.", "The user prefers email."]'  # the endpoint recovers
        # the admin's "run again"
        enqueue_rule_firing(project_id=generation.project_id, rule_id=rule.pk, generation_id=generation.pk)
        generation.refresh_from_db()
        assert generation.extraction[rule.pk] == {"created": 2, "superseded": 0, "skipped": 0, "failed": 0,
                                                  "error": None}
    finally:
        llm.close()


# --- (c) the worker is killed ------------------------------------------------------------------


#: Each process's connections: the example project's psycopg pool (its default), or none.
POOL_SIZES = pytest.mark.parametrize("pool_size", ["10", "0"], ids=["pool", "no-pool"])


@pytest.fixture(params=["10", "0"], ids=["pool", "no-pool"])
def qcluster_env(request: pytest.FixtureRequest, endpoint: EmbeddingEndpoint) -> dict[str, str]:
    """The worker embeds through the test's endpoint (which can hold a request), with a
    connection pool in each of its processes or without one."""
    return {"MEMORY_ENGINE_EMBEDDING_PROVIDER": "openai", "MEMORY_ENGINE_EMBEDDING_MODEL": MODEL,
            "MEMORY_ENGINE_EMBEDDING_BASE_URL": endpoint.url, "DB_POOL_MAX_SIZE": request.param}


def kill_cluster(qcluster: Any) -> None:
    os.killpg(qcluster.pid, signal.SIGKILL)  # the whole cluster dies, no cleanup code runs
    qcluster.wait(timeout=20)


def run_tasks_here(monkeypatch: pytest.MonkeyPatch) -> None:
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", True)  # run re-enqueued tasks here, as a new worker would


@pytest.mark.slow
def test_worker_killed_mid_ingestion_is_recovered_by_the_sweep(qcluster: Any, client: Any, settings: Any,
                                                               endpoint: EmbeddingEndpoint,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    http_embedder(settings, endpoint, TIMEOUT=30)
    endpoint.block_on = "BLOCKDOC"
    paragraphs = [f"Paragraph {i} about the lighthouse keeper's log." for i in range(5)] + ["BLOCKDOC marker."]
    response = client.post("/api/v1/documents", {"path": "/faults/lighthouse.md", "content_type": "text/markdown",
                                                 "content": "\n\n".join(paragraphs)}, format="json")
    assert response.status_code == 202, response.content
    document_id = response.json()["id"]
    assert endpoint.blocked.wait(60), "the worker never reached the embedder"
    kill_cluster(qcluster)
    endpoint.unblock()
    document = Document.objects.get(pk=document_id)
    assert (document.status, document.attempts) == ("processing", 1)  # stuck: nobody will finish it

    engine(settings, INGESTION_HEARTBEAT_TIMEOUT=1)
    time.sleep(1.2)
    run_tasks_here(monkeypatch)
    assert document_sweep()["requeued"] == 1
    document.refresh_from_db()
    assert (document.status, document.attempts, document.unembedded_chunks) == ("ready", 2, 0), document.error
    chunks = list(Chunk.objects.filter(document=document).values_list("chunk_index", flat=True))
    assert len(chunks) == len(set(chunks)) == document.total_chunks  # no duplicates of the dead run
    assert document_sweep() == {"requeued": 0, "failed": 0, "timed_out": 0, "skipped": 0}


@pytest.mark.slow
def test_worker_killed_mid_rule_is_recovered_without_duplicates(qcluster: Any, project: Any, settings: Any,
                                                                endpoint: EmbeddingEndpoint,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    http_embedder(settings, endpoint, TIMEOUT=30)
    store = MemoryStoreFactory(project=project)
    rule = make_rule(store, "callable", path="tests.rules.handlers.facts_from_output")
    agent = AgentFactory(project=project)
    endpoint.block_on = "BLOCKRULE"
    output = "The user lives in Bergen.\nThe user prefers email.\nThe user's BLOCKRULE cat is called Mons."
    generation = record_generation(agent=agent, input_messages=[{"role": "user", "content": "hi"}])
    complete_generation(generation=generation, output=output)  # commits: the rule is enqueued

    entry = Generation.objects.get(pk=generation.pk).extraction[rule.pk]
    assert entry["status"] == "pending" and entry["attempts"] == 1
    assert endpoint.blocked.wait(60), "the worker never reached the third fact"
    kill_cluster(qcluster)  # two facts written, the third in flight
    endpoint.unblock()
    assert Memory.objects.filter(store=store).count() == 2
    assert Generation.objects.get(pk=generation.pk).extraction[rule.pk]["status"] == "pending"  # lost so far

    assert rule_firing_sweep() == {"requeued": 0, "stalled": 0}  # not stale yet
    engine(settings, RULE_FIRING_TIMEOUT=0)
    run_tasks_here(monkeypatch)
    assert rule_firing_sweep() == {"requeued": 1, "stalled": 0}
    counts = Generation.objects.get(pk=generation.pk).extraction[rule.pk]
    # Counted as one uninterrupted run: the two restatements of the dead run's facts are not
    # counted as skips, and nothing is added on top of earlier counts.
    assert counts == {"created": 3, "superseded": 0, "skipped": 0, "failed": 0, "error": None}
    texts = list(Memory.objects.filter(store=store).values_list("content__text", flat=True))
    assert sorted(texts) == sorted(output.splitlines())  # no duplicate memories
    outcomes = list(MemoryAssertion.objects.filter(rule_id=rule.pk).values_list("outcome", flat=True))
    assert sorted(outcomes) == ["created"] * 3 + ["skipped"] * 2  # the ledger keeps both runs
    assert rule_firing_sweep() == {"requeued": 0, "stalled": 0}


def test_rule_sweep_gives_up_after_max_attempts_and_skips_fresh_and_finished(db: Any, project: Any,
                                                                             settings: Any) -> None:
    store = MemoryStoreFactory(project=project)
    rules = [make_rule(store, "callable", path="tests.rules.handlers.facts_from_output") for _ in range(3)]
    agent = AgentFactory(project=project)
    generation = record_generation(agent=agent, input_messages=[{"role": "user", "content": "hi"}])
    old = (timezone.now() - timedelta(hours=1)).isoformat()
    Generation.objects.filter(pk=generation.pk).update(extraction={
        rules[0].pk: {"status": "pending", "enqueued_at": old, "attempts": 3},
        rules[1].pk: {"status": "pending", "enqueued_at": timezone.now().isoformat(), "attempts": 1},
        rules[2].pk: {"created": 1, "superseded": 0, "skipped": 0, "failed": 0, "error": None},
    })
    assert rule_firing_sweep() == {"requeued": 0, "stalled": 1}
    extraction = Generation.objects.get(pk=generation.pk).extraction
    assert extraction[rules[0].pk]["error"]["code"] == "RULE_FIRING_STALLED"
    assert extraction[rules[1].pk]["status"] == "pending"
    assert extraction[rules[2].pk]["created"] == 1
    from django.contrib import admin

    table = admin.site._registry[Generation].extraction_table(Generation.objects.get(pk=generation.pk))
    assert "pending since" in table and "RULE_FIRING_STALLED" in table  # what the admin shows


def test_rule_sweep_is_scheduled_after_migrate(db: Any) -> None:
    from django_q.models import Schedule

    from memory_engine.queue import RULE_SWEEP_SCHEDULE_NAME, RULE_SWEEP_TASK

    assert Schedule.objects.get(name=RULE_SWEEP_SCHEDULE_NAME).func == RULE_SWEEP_TASK


# --- (d) PostgreSQL restarts under a live app -----------------------------------------------------


@pytest.fixture
def own_postgres() -> Iterator[Any]:
    """A PostgreSQL of this test's own (never the shared one): pgserver in a temp dir."""
    import pgserver

    data = Path(tempfile.mkdtemp(prefix="mefault"))  # short: the socket path must fit
    server = pgserver.get_server(str(data), cleanup_mode="delete")
    try:
        yield server
    finally:
        server.cleanup()


def restart_postgres(server: Any, downtime: float) -> None:
    """Stop (fast: open sessions are terminated), stay down ``downtime`` s, start again with
    the same socket and the same preloaded libraries (pg_textsearch: without it every write
    to a table with a bm25 index fails)."""
    import psycopg
    from pgserver._commands import pg_ctl

    socket_dir = parse_qs(urlparse(server.get_uri()).query)["host"][0]
    with psycopg.connect(server.get_uri()) as conn:
        preload = conn.execute("SHOW shared_preload_libraries").fetchone()[0]
    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=server.pgdata, user=server.system_user, timeout=30)
    time.sleep(downtime)
    options = ["-o", f"-c shared_preload_libraries={preload}"] if preload else []
    pg_ctl(["-w", "-o", '-h ""', "-o", f"-k {socket_dir}", *options, "-l", str(server.log), "start"],
           pgdata=server.pgdata, user=server.system_user, timeout=30)


@pytest.mark.slow
@POOL_SIZES
def test_postgres_restart_mid_run(own_postgres: Any, pool_size: str) -> None:
    url = own_postgres.get_uri().replace("/postgres?", "/faults?")
    own_postgres.psql("CREATE DATABASE faults;")
    env = {"DATABASE_URL": url, "MEMORY_ENGINE_DB_NAME": "", "DB_POOL_MAX_SIZE": pool_size, "CONN_MAX_AGE": "60",
           "MEMORY_ENGINE_EMBEDDING_PROVIDER": "tests.providers.HashingEmbeddingProvider"}
    manage(env, "migrate", "--noinput")
    made = json.loads(manage(env, "shell", "-c", (
        "import json; from tests.factories import ProjectFactory, MemoryStoreFactory, make_key; "
        "p = ProjectFactory(); print(json.dumps({'store': MemoryStoreFactory(project=p).pk, 'key': make_key(p)}))"
    )).strip().splitlines()[-1])
    log = ROOT / ".pytest_cache" / "faults-restart.log" if (ROOT / ".pytest_cache").is_dir() else None
    with LiveApp(env, web_workers=2, threads=4, log=log) as app:
        pids = app.web_pids()
        restarted: dict[str, float] = {}

        def restart() -> None:
            time.sleep(3)
            restarted["down"] = time.monotonic()
            restart_postgres(own_postgres, downtime=1.5)
            restarted["up"] = time.monotonic()

        thread = threading.Thread(target=restart)
        thread.start()
        result = run_load(app.url, made["key"], [made["store"]], clients=6, seconds=14, timeout=20,
                          mix={"write_new": 4, "write_repeat": 1})
        thread.join()
        assert app.web_pids() == pids  # the same gunicorn master and workers: no restart

    statuses = result.statuses()
    print(f"\nrestart: statuses {dict(statuses)}, outage {restarted['up'] - restarted['down']:.1f} s")
    assert set(statuses) <= {200, 201, 503}, statuses  # no 500, no dropped connection
    # requests in flight while the server was down: each answered, waiting for it (the pool) or 503
    met = [c for c in result.calls if c.started_at < restarted["up"] and c.started_at + c.seconds > restarted["down"]]
    assert met, "no request met the outage"
    failed = [c for c in result.calls if c.status == 503]
    for call in failed:
        assert call.body["code"] == "DATABASE_UNAVAILABLE" and int(call.headers["retry-after"]) > 0
        # only calls that met the outage: still in flight when it began (a loaded machine may
        # queue a call sent earlier), sent before the database was back
        assert call.started_at + call.seconds >= restarted["down"] and call.started_at <= restarted["up"] + 3
    after = [c for c in result.calls if c.started_at > restarted["up"] + 3]
    assert after and all(c.status in (200, 201) for c in after)  # reconnected by itself
    assert check_writes(url, result, [made["store"]]) == []  # every 2xx write has its assertion, no orphans


def test_database_unavailable_logs_the_databases_own_message(db: Any, caplog: Any) -> None:
    """The 503's log line says why ("too many clients already", "does not exist", ...), not
    just the exception's class: a real connection refused by the real server."""
    from django.db import OperationalError, connection
    from django.db.backends.postgresql.base import DatabaseWrapper

    from memory_engine.api.exceptions import exception_handler

    broken = DatabaseWrapper({**connection.settings_dict, "NAME": "memory_engine_no_such_db"}, alias="broken")
    with pytest.raises(OperationalError) as raised:
        broken.ensure_connection()
    with caplog.at_level("WARNING", logger="memory_engine.api"):
        response = exception_handler(raised.value, {})
    assert (response.status_code, response.data["code"]) == (503, "DATABASE_UNAVAILABLE")
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("database unavailable"))
    assert 'database "memory_engine_no_such_db" does not exist' in line, line
    assert "\n" not in line
