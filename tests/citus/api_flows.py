"""The API's per-project flows on the distributed scratch schema (tests/citus/schema.py), run in a
process of their own: Django set up against the cluster's coordinator (``example_project``
settings, ``DATABASE_URL``) with ``citus.multi_task_query_log_level = 'error'`` on the connection,
so a statement that reaches more than one shard fails.

    python -m tests.citus.api_flows postgres://postgres@127.0.0.1:PORT/DATABASE

prints one JSON object per step: its label, the HTTP status or what it returned (``outcome``), and
when it failed, the error with the statement Citus refused (``error``, ``statement``). Used by
tests/citus/test_single_shard.py and bench/citus_inventory.py.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: The repository (manage.py), where the worker runs.
ROOT = Path(__file__).resolve().parents[2]
#: The connection option that makes every multi-shard statement an error.
SINGLE_SHARD_OPTION = "options=-c%20citus.multi_task_query_log_level%3Derror"
TEXT = "The deploy runs on Fridays after the freeze."
#: The memory rule's ``callable`` handler (by the name a worker imports it by).
RULE_HANDLER = "tests.citus.api_flows.rule_facts"


def environment(database_url: str) -> dict[str, str]:
    """The environment of a process whose Django talks to ``database_url`` with multi-shard
    statements refused, with the offline test embedder."""
    separator = "&" if "?" in database_url else "?"
    return dict(os.environ, DATABASE_URL=f"{database_url}{separator}{SINGLE_SHARD_OPTION}", DB_POOL_MAX_SIZE="0",
                DJANGO_SETTINGS_MODULE="example_project.settings",
                MEMORY_ENGINE_EMBEDDING_PROVIDER="tests.providers.HashingEmbeddingProvider")


def error_text(exc: BaseException) -> str:
    """The innermost cause's class and PostgreSQL's primary message (and detail)."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    diag = getattr(exc, "diag", None)
    message = getattr(diag, "message_primary", None) or (str(exc).splitlines() or [""])[0]
    detail = getattr(diag, "message_detail", None)
    return f"{type(exc).__name__}: {message}" + (f" ({detail})" if detail else "")


class Steps:
    """Runs labelled steps on Django's connection, each recording its outcome, or the first
    statement that failed in it (a later one may be Django rendering the error)."""

    def __init__(self) -> None:
        from django.db import connection

        self.connection = connection
        self.results: list[dict[str, Any]] = []
        self._failed: list[str] = []

    def _remember(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        try:
            return execute(sql, params, many, context)
        except Exception:
            if not self._failed:
                self._failed.append(" ".join(sql.split()))
            raise

    def run(self, label: str, action: Callable[[], Any]) -> Any:
        self._failed.clear()
        result: dict[str, Any] = {"step": label}
        outcome = None
        try:
            with self.connection.execute_wrapper(self._remember):
                outcome = action()
            result["outcome"] = outcome
        except Exception as exc:  # noqa: BLE001 (the failure is the finding)
            result["error"] = error_text(exc)
        if self._failed:
            result["statement"] = self._failed[0]
        self.results.append(result)
        return outcome


def run_flows() -> list[dict[str, Any]]:
    """A project and its key (the ORM), then through the API with that key: a store, a memory
    written twice (the second a duplicate), the store's memories listed, a search of the store
    (the lexical channel on the tsvector fallback)."""
    import logging

    import django

    django.setup()
    logging.disable(logging.CRITICAL)  # the API logs each database error with its traceback
    from django.conf import settings
    from django.test import override_settings

    # pg_textsearch's bm25 query names its index, which each shard renames (docs/scaling.md): the
    # tsvector fallback until the lexical channel has a path on Citus
    override_settings(MEMORY_ENGINE={**settings.MEMORY_ENGINE, "KNOWLEDGE_LEXICAL_BACKEND": "tsvector",
                                     "RULE_CALLABLE_PREFIXES": [RULE_HANDLER]}).enable()
    from rest_framework.test import APIClient

    from memory_engine.services.keys import api_key_authenticate
    from tests.factories import ProjectFactory, make_key

    steps = Steps()
    client = APIClient()
    state: dict[str, Any] = {}

    def project() -> str:
        state["project"] = ProjectFactory(name=f"flows-{uuid.uuid4().hex[:12]}")  # a database reused by runs
        state["raw"] = make_key(state["project"])
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {state['raw']}")
        return "created"

    def authenticate() -> bool:
        return api_key_authenticate(state["raw"]).project_id == state["project"].id

    def call(method: str, path: str, body: Any = None, keep: str | None = None) -> Callable[[], Any]:
        """The request; ``keep``: the answer's ``id`` kept in ``state`` under that name."""
        def action() -> Any:
            target = path.format(**state)
            text = json.dumps(body)
            for name, value in state.items():
                text = text.replace(f"{{{name}}}", str(value))
            data = json.loads(text) if body else None
            response = getattr(client, method)(target, data, format="json")
            answer = response.json() if response.get("Content-Type", "").startswith("application/json") else {}
            if path == "/api/v1/memory-stores" and response.status_code == 201 and "store" not in state:
                state["store"] = answer["id"]
            if keep and response.status_code in (200, 201, 202):
                state[keep] = answer["id"]
            return {"status": response.status_code, "answer": answer}
        return action

    def sql(statement: str, params: Any = None) -> Any:
        with steps.connection.cursor() as cursor:
            cursor.execute(statement, params)
            return cursor.fetchone()[0] if cursor.description else cursor.rowcount

    def uncount(counted: str) -> Any:
        from django.db import transaction

        project = state["project"].id
        with transaction.atomic():
            sql("DELETE FROM memory_engine_memory WHERE project_id = %s AND id = 'mem_flow'", [project])
            sql("DELETE FROM memory_engine_memorycontent WHERE project_id = %s AND id = 'mc_flow'", [project])
        return sql(counted, [project])

    def feed_entries() -> Any:
        """A memory, its content and its assertion written by SQL with their project; the feed
        triggers run at commit, on the worker that holds the project's shards: the entries (kind,
        object, principal) in feed order."""
        from django.db import transaction

        project, store = state["project"].id, state["store"]
        with transaction.atomic():
            sql("INSERT INTO memory_engine_memorycontent (id, project_id, store_id, content_hash, text, "
                "embedding_model, created_at) VALUES ('mc_flow', %s, %s, 'flow', %s, '', now())",
                [project, store, TEXT])
            sql("INSERT INTO memory_engine_memory (id, project_id, store_id, content_id, tags, metadata, source_type, "
                "confidence, evidence_count, kind, summary, title, retention_class, created_at) VALUES "
                "('mem_flow', %s, %s, 'mc_flow', '{}', '{}', 'manual', 1, 1, 'fact', '', '', 'standard', now())",
                [project, store])
            sql("INSERT INTO memory_engine_memoryassertion (id, project_id, store_id, memory_id, content, outcome, "
                "decision_reason, details, principal, mechanism, created_at) VALUES "
                "('ma_flow', %s, %s, 'mem_flow', %s, 'created', '', '{}', 'flows', 'api', now())",
                [project, store, TEXT])
        with steps.connection.cursor() as cursor:
            cursor.execute("SELECT kind, object_id, principal FROM memory_engine_feedentry "
                           "WHERE project_id = %s AND object_id IN ('mem_flow', 'ma_flow') ORDER BY txid, seq",
                           [project])
            return [list(row) for row in cursor.fetchall()]

    steps.run("SHOW citus.multi_task_query_log_level", lambda: sql("SHOW citus.multi_task_query_log_level"))
    steps.run("every project's memories counted (a multi-shard statement)",
              lambda: sql("SELECT count(*) FROM memory_engine_memory"))
    steps.run("create a project and an API key (ORM)", project)
    steps.run("api_key_authenticate: the key looked up by its prefix", authenticate)
    steps.run("POST /api/v1/memory-stores", call("post", "/api/v1/memory-stores", {"name": "facts"}))
    memory = {"memory_store_id": "{store}", "content": TEXT}
    steps.run("POST /api/v1/memories", call("post", "/api/v1/memories", memory))
    steps.run("POST /api/v1/memories (the same text again: dedup)", call("post", "/api/v1/memories", memory))
    steps.run("GET /api/v1/memories?memory_store_id=…", call("get", "/api/v1/memories?memory_store_id={store}"))
    search = {"query": "when does the deploy run", "memory_store_ids": ["{store}"]}
    steps.run("POST /api/v1/knowledge/search", call("post", "/api/v1/knowledge/search", search))
    about = {"kind": "preference", "key": "release_day"}
    steps.run("POST /api/v1/memories (about release_day)", call("post", "/api/v1/memories", {
        "memory_store_id": "{store}", "content": "The release train leaves on Tuesdays.", "about": about}))
    steps.run("POST /api/v1/memories (about release_day, a new value: supersede)", call("post", "/api/v1/memories", {
        "memory_store_id": "{store}", "content": "The release train leaves on Thursdays.", "about": about}))
    steps.run("POST /api/v1/memories/batch", call("post", "/api/v1/memories/batch", {
        "memory_store_id": "{store}", "memories": [{"content": "The staging database is rebuilt every night."},
                                                   {"content": "Incident reviews happen within five days."}]}))
    steps.run("GET /api/v1/feed", call("get", "/api/v1/feed"))
    steps.run("POST /api/v1/memories (tags case: held)", call("post", "/api/v1/memories", {
        "memory_store_id": "{store}", "content": "The auditor asked for the March invoices.",
        "tags": {"case": "audit"}}, keep="held"))
    steps.run("POST /api/v1/memories/{held}/retention (legal_hold)",
              call("post", "/api/v1/memories/{held}/retention", {"retention_class": "legal_hold"}))
    steps.run("POST /api/v1/erasure (tags case: held: refused)",
              call("post", "/api/v1/erasure", {"tags": {"case": "audit"}}))
    steps.run("POST /api/v1/memories (tags team: gone)", call("post", "/api/v1/memories", {
        "memory_store_id": "{store}", "content": "The gone team met on Wednesdays.", "tags": {"team": "gone"}}))
    steps.run("POST /api/v1/erasure (tags team: gone)", call("post", "/api/v1/erasure", {"tags": {"team": "gone"}}))
    steps.run("GET /api/v1/erasure-receipts", call("get", "/api/v1/erasure-receipts"))
    steps.run("POST /api/v1/memories (to forget)", call("post", "/api/v1/memories", {
        "memory_store_id": "{store}", "content": "The old wiki moved to the handbook."}, keep="forgotten"))
    steps.run("DELETE /api/v1/memories/{forgotten} (to the trash)", call("delete", "/api/v1/memories/{forgotten}"))
    steps.run("POST /api/v1/memories/{forgotten}/restore", call("post", "/api/v1/memories/{forgotten}/restore"))
    steps.run("POST /api/v1/memory-stores (to delete)", call("post", "/api/v1/memory-stores", {"name": "scratch"},
                                                            keep="scratch"))
    steps.run("POST /api/v1/memories (into the store to delete)", call("post", "/api/v1/memories", {
        "memory_store_id": "{scratch}", "content": "A note nobody needs."}))
    steps.run("DELETE /api/v1/memory-stores/{scratch}", call("delete", "/api/v1/memory-stores/{scratch}"))
    steps.run("POST /api/v1/documents (text, wait: ingested inline)", call("post", "/api/v1/documents", {
        "content": "# Runbook\n\nThe on-call engineer rotates the database credentials every quarter.",
        "path": "/runbook.md", "wait": True}, keep="document"))
    steps.run("GET /api/v1/documents/{document}", call("get", "/api/v1/documents/{document}"))
    steps.run("GET /api/v1/documents/{document}/chunks", call("get", "/api/v1/documents/{document}/chunks"))
    steps.run("GET /api/v1/documents", call("get", "/api/v1/documents"))
    steps.run("POST /api/v1/knowledge/search (the project's documents)", call("post", "/api/v1/knowledge/search", {
        "query": "who rotates the database credentials"}))
    steps.run("POST /api/v1/documents/{document}/forget", call("post", "/api/v1/documents/{document}/forget",
                                                                {"reason": "superseded runbook"}))
    steps.run("DELETE /api/v1/documents/{document}", call("delete", "/api/v1/documents/{document}"))
    steps.run("POST /api/v1/documents (tags team: archived)", call("post", "/api/v1/documents", {
        "content": "The archived team kept its notes in the old wiki.", "path": "/archived.md", "wait": True,
        "tags": {"team": "archived"}}))
    steps.run("POST /api/v1/erasure (tags team: archived: a document)",
              call("post", "/api/v1/erasure", {"tags": {"team": "archived"}}))
    counted = "SELECT documents FROM memory_engine_lexicalstatistics WHERE project_id = %s AND part = 'content'"
    steps.run("the project's content rows counted before", lambda: sql(counted, [state["project"].id]))
    steps.run("a memory written by SQL, its feed entries written by the triggers at commit", feed_entries)
    steps.run("its content counted in the project's lexical statistics", lambda: sql(counted, [state["project"].id]))
    steps.run("the memory and its content deleted by SQL: the content uncounted", lambda: uncount(counted))
    run_rule(steps, state, call)
    run_replay(steps, state, call)
    run_distiller(steps, state, call)
    run_worker_ingestion(steps, state, call)
    run_scheduled_tasks(steps, state, call, sql)
    run_admin_lists(steps, state, sql)
    run_shard_move(steps, client, state, call)
    steps.connection.close()
    return steps.results


def rule_facts(transcript: str, rule: Any, generation: Any) -> list[str]:
    """The ``callable`` handler of the flows' memory rule: one fact per user line."""
    return [line.removeprefix("user: ") for line in transcript.split("\n\n") if line.startswith("user: ")]


def run_rule(steps: Steps, state: dict[str, Any], call: Callable[..., Callable[[], Any]]) -> None:
    """An agent, a memory rule on the store (a ``callable`` handler), a generation of the agent
    completed through the API (which records the rule's firing as pending and queues it), then
    the firing as the worker runs it (memory_engine.tasks.memory_rule_fire_task with the task's
    arguments), and the generation read back with the rule's counts."""
    def fire() -> Any:
        from django_q.models import OrmQ

        from memory_engine.tasks import memory_rule_fire_task

        queued = {entry.pk: entry.task for entry in OrmQ.objects.all()
                  if entry.task.get("func") == "memory_engine.tasks.memory_rule_fire_task"
                  and entry.task["args"][1] == state["generation"]}
        OrmQ.objects.filter(pk__in=list(queued)).delete()  # run here, by nobody else
        return [memory_rule_fire_task(*task["args"], **task["kwargs"]) for task in queued.values()]

    steps.run("POST /api/v1/agents", call("post", "/api/v1/agents", {"name": "assistant"}, keep="agent"))
    steps.run("POST /api/v1/memory-stores/{store}/rules (callable)", call(
        "post", "/api/v1/memory-stores/{store}/rules", {"handler": {"type": "callable", "path": RULE_HANDLER}},
        keep="rule"))
    steps.run("POST /api/v1/generations (completed: the rule's firing queued)", call(
        "post", "/api/v1/generations", {"agent_id": "{agent}", "status": "completed", "output": "Noted.",
                                        "input_messages": [{"role": "user", "content": "I moved to Bergen."}]},
        keep="generation"))
    steps.run("the rule's firing run as the worker runs it", fire)
    steps.run("GET /api/v1/generations/{generation}", call("get", "/api/v1/generations/{generation}"))


def run_distiller(steps: Steps, state: dict[str, Any], call: Callable[..., Callable[[], Any]]) -> None:
    """A document read by a resident distiller (an OpenAI-compatible server on 127.0.0.1 answers
    its claims): the distiller created through the API and ticked through it; a new version of
    the document, then the schedule's task (every project's distillers found across projects,
    each ticked by its project) writes the new claim and retires the old one."""
    from django.conf import settings
    from django.test import override_settings

    from memory_engine.tasks import distillers_tick_task
    from tests.rules.servers import FakeLLM

    llm = FakeLLM()
    llm.reply = '["Expense reports are due on the fifth of each month."]'
    model = {"BASE_URL": llm.base_url, "MODEL": "test-model", "TIMEOUT": 5, "RETRIES": 0}

    def capture(text: str) -> Callable[[], Any]:
        return call("put", "/api/v1/documents/by-ref/wiki/expenses", {
            "content": text, "title": "Expenses", "wait": True, "tags": {"distil": "yes"}})

    def scheduled() -> dict[str, Any]:
        ran = distillers_tick_task()
        runs = call("get", "/api/v1/distillers/{distiller}/runs")()["answer"]["results"]
        return {"ran": ran > 0, "counts": runs[0]["counts"], "errors": runs[0]["errors"]}

    try:
        with override_settings(MEMORY_ENGINE={**settings.MEMORY_ENGINE, "LLM": model}):
            steps.run("PUT /api/v1/documents/by-ref/wiki/expenses (to distil)",
                      capture("# Expenses\n\nExpense reports are due on the fifth."))
            steps.run("POST /api/v1/distillers", call("post", "/api/v1/distillers", {
                "memory_store_id": "{store}", "tags": {"distil": "yes"}}, keep="distiller"))
            steps.run("POST /api/v1/distillers/{distiller}/tick", call("post", "/api/v1/distillers/{distiller}/tick"))
            llm.reply = '["Expense reports are due on the tenth of each month."]'
            steps.run("PUT /api/v1/documents/by-ref/wiki/expenses (a new version)",
                      capture("# Expenses\n\nExpense reports are now due on the tenth."))
            steps.run("the schedule's distiller tick (memory_engine.tasks.distillers_tick_task)", scheduled)
            steps.run("GET /api/v1/distillers/{distiller}", call("get", "/api/v1/distillers/{distiller}"))
    finally:
        llm.close()


def run_replay(steps: Steps, state: dict[str, Any], call: Callable[..., Callable[[], Any]]) -> None:
    """A document ingested inline, a transform config of smaller chunks, a replay of the
    project's raw captures staged under it (as ``manage.py memory_engine_replay`` runs it),
    promoted, then demoted: each step's document, versions and chunks by the project."""
    from memory_engine.models import Document
    from memory_engine.selectors.search import SearchRequest, knowledge_search
    from memory_engine.services.documents.replay import (
        generation_demote,
        generation_promote,
        replay_run,
        transform_config_create,
    )

    replayed: dict[str, Any] = {}  # not in ``state``: its values are put into request bodies

    def replay() -> dict[str, Any]:
        config = transform_config_create(project=state["project"], name="smaller", chunk_strategy="size",
                                         chunk_size=8, chunk_overlap=0)
        run = replay_run(config=config, started_by="flows")
        replayed["run"] = run
        return {"status": run.status, "error": run.error, "documents": run.documents_done, "chunks": run.chunks_total}

    def staged_search() -> list[str | None]:
        found = knowledge_search(SearchRequest(project=state["project"], query="who meets the new hires at lunch",
                                               generation=replayed["run"].pk))
        return sorted({hit.document_id for hit in found.results})

    def switch(to: Callable[..., Any]) -> dict[str, Any]:
        replayed["run"] = to(run=replayed["run"], by="flows")
        document = Document.objects.get(project_id=state["project"].id, pk=state["handbook"])
        return {"status": replayed["run"].status, "total_chunks": document.total_chunks}

    steps.run("POST /api/v1/documents (the handbook, wait: ingested inline)", call("post", "/api/v1/documents", {
        "content": "# Handbook\n\nNew hires get their laptop on the first morning from the front desk "
                   "and meet their buddy at lunch.", "path": "/handbook.md", "wait": True}, keep="handbook"))
    steps.run("a replay of the project's raw captures (smaller chunks), staged", replay)
    steps.run("a search of the staged generation (the service a staff session's search calls)", staged_search)
    steps.run("the staged generation promoted", lambda: switch(generation_promote))
    steps.run("the promoted generation demoted", lambda: switch(generation_demote))


def run_worker_ingestion(steps: Steps, state: dict[str, Any], call: Callable[..., Callable[[], Any]]) -> None:
    """A document queued through the API (no ``wait``), ingested by a real django-q2 worker
    (``manage.py qcluster``, its connection refusing multi-shard statements as this process's
    does) while the document is polled through the API until it is ready, then until the
    entity graph has read its chunks (the task its ingestion queued)."""
    import signal
    import subprocess
    import tempfile
    import time

    from memory_engine.models import Document

    def ingested_by_the_worker() -> dict[str, Any]:
        log = tempfile.NamedTemporaryFile(prefix="citus-worker-", suffix=".log", delete=False)  # noqa: SIM115
        worker = subprocess.Popen([sys.executable, "manage.py", "qcluster"], cwd=ROOT, stdout=log,
                                  stderr=subprocess.STDOUT, start_new_session=True,
                                  env=dict(os.environ, Q_WORKERS="1", PYTHONUNBUFFERED="1"))
        try:
            deadline, answer = time.monotonic() + 120, {}
            while time.monotonic() < deadline:
                answer = call("get", "/api/v1/documents/{queued}")()["answer"]
                if answer.get("status") in ("ready", "failed"):
                    break
                time.sleep(0.5)
            # then the entity graph's reading of its chunks, the task its ingestion queued
            read = Document.objects.filter(project_id=state["project"].id, pk=state["queued"])
            while time.monotonic() < deadline and not read.filter(entities_at__isnull=False).exists():
                time.sleep(0.5)
            return {"status": answer.get("status"), "error": answer.get("error"),
                    "indexed_chunks": answer.get("indexed_chunks"),
                    "entities_read": read.filter(entities_at__isnull=False).exists()}
        finally:
            worker.send_signal(signal.SIGTERM)  # the cluster's main process stops the rest in order
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait()
            log.close()

    steps.run("POST /api/v1/documents (queued for the worker)", call("post", "/api/v1/documents", {
        "content": "# Travel\n\nTrain tickets above 200 euros need the team lead's approval.",
        "path": "/travel.md"}, keep="queued"))
    steps.run("the document ingested by a django-q2 worker on the cluster", ingested_by_the_worker)


#: The django-q2 schedule's tasks (memory_engine/apps.py) the flows run as a worker runs them.
SCHEDULED_TASKS = ("memory_sweep_task", "document_sweep_task", "retention_sweep_task", "rule_firing_sweep_task",
                   "webhooks_dispatch_task", "entities_sweep_task", "guard_sweep_task")


def run_scheduled_tasks(steps: Steps, state: dict[str, Any], call: Callable[..., Callable[[], Any]],
                        sql: Callable[..., Any]) -> None:
    """Each task of the schedule, called as the worker calls it: each finds its work in every
    project (memory_engine.db.across_projects), then does it by the project. Something is due
    for each sweep that can be made due from outside: a memory past its expiry, a trashed memory
    past the trash's days, an ephemeral document version past its time, content left unjudged."""
    import memory_engine.tasks

    project_id = state["project"].id
    steps.run("POST /api/v1/memories (to expire)", call("post", "/api/v1/memories", {
        "memory_store_id": "{store}", "content": "The parking garage closes at nine."}, keep="expiring"))
    steps.run("POST /api/v1/memories (to purge from the trash)", call("post", "/api/v1/memories", {
        "memory_store_id": "{store}", "content": "The old printer sits by the stairs."}, keep="purged"))
    steps.run("DELETE /api/v1/memories/{purged} (to the trash)", call("delete", "/api/v1/memories/{purged}"))
    steps.run("POST /api/v1/documents (ephemeral, to expire)", call("post", "/api/v1/documents", {
        "content": "The fire drill is on Tuesday.", "path": "/drill.md", "wait": True,
        "retention_class": "ephemeral"}, keep="drill"))

    def made_due() -> list[int]:
        return [sql("UPDATE memory_engine_memory SET expires_at = now() - interval '1 day' "
                    "WHERE project_id = %s AND id = %s", [project_id, state["expiring"]]),
                sql("UPDATE memory_engine_memory SET trashed_at = now() - interval '400 days' "
                    "WHERE project_id = %s AND id = %s", [project_id, state["purged"]]),
                sql("UPDATE memory_engine_documentversion SET created_at = now() - interval '400 days' "
                    "WHERE project_id = %s AND document_id = %s", [project_id, state["drill"]]),
                sql("UPDATE memory_engine_memorycontent SET guard = NULL WHERE project_id = %s AND id = "
                    "(SELECT content_id FROM memory_engine_memory WHERE project_id = %s AND id = %s)",
                    [project_id, project_id, state["held"]])]

    steps.run("a memory expired, one trashed long ago, a version past its time, a text unjudged (SQL)", made_due)
    for name in SCHEDULED_TASKS:
        steps.run(f"the schedule's {name}", getattr(memory_engine.tasks, name))
    steps.run("GET /api/v1/memories/{expiring} (after the sweep)", call("get", "/api/v1/memories/{expiring}"))
    steps.run("GET /api/v1/documents/{drill} (after the sweep)", call("get", "/api/v1/documents/{drill}"))


def run_admin_lists(steps: Steps, state: dict[str, Any], sql: Callable[..., Any]) -> None:
    """Every changelist of the engine's admin: a superuser's reads every project (multi-shard by
    design: the step turns the refusal off for them, and Citus must still accept every join); a
    staff member of the flows' project, with every view permission, reads only it, with
    multi-shard statements refused."""
    from django.contrib import admin
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission
    from django.test import Client

    paths = {model._meta.model_name: f"/admin/memory_engine/{model._meta.model_name}/"
             for model in admin.site._registry if model._meta.app_label == "memory_engine"}
    users = get_user_model().objects
    name = f"flows-{uuid.uuid4().hex[:8]}"

    def lists(user: Any) -> dict[str, int]:
        client = Client(raise_request_exception=False)  # a list that fails answers 500
        client.force_login(user)
        return {model: client.get(path).status_code for model, path in sorted(paths.items())}

    def as_superuser() -> dict[str, int]:
        sql("SET citus.multi_task_query_log_level = off")
        try:
            return lists(users.create_superuser(f"{name}-root", "root@example.com", "unused"))
        finally:
            sql("SET citus.multi_task_query_log_level = error")

    def as_member() -> dict[str, int]:
        member = users.create_user(f"{name}-staff", "staff@example.com", "unused", is_staff=True)
        member.user_permissions.set(Permission.objects.filter(content_type__app_label="memory_engine",
                                                              codename__startswith="view_"))
        state["project"].members.add(member)
        return lists(users.get(pk=member.pk))

    steps.run("every admin changelist as a superuser (every project)", as_superuser)
    steps.run("every admin changelist as a member of the project (multi-shard refused)", as_member)


def run_shard_move(steps: Steps, client: Any, state: dict[str, Any],
                   call: Callable[..., Callable[[], Any]]) -> None:
    """The project's node runs far ahead of the other worker; a memory written there and the feed
    read to its end; the project's shards moved to the other worker; a memory written there, and
    the feed read on from the cursor read before the move."""
    moving: dict[str, Any] = {}

    def node(name: str | None = None, port: int | None = None) -> Any:
        """A connection of its own (multi-shard statements allowed) to a node, the coordinator by default."""
        import psycopg

        found = steps.connection.settings_dict
        return psycopg.connect(host=name or found["HOST"], port=port or int(found["PORT"]), user=found["USER"],
                               password=found["PASSWORD"] or None, dbname=found["NAME"], autocommit=True)

    def read_to_the_end() -> int:
        """The project's shards' node runs ahead: its transaction ids far above the other
        worker's (as a busy node's are). A memory written there, the feed read to its end."""
        with node() as coordinator:
            (shard, source_host, source_port), = coordinator.execute(
                "SELECT p.shardid, n.nodename, n.nodeport FROM pg_dist_placement p "
                "JOIN pg_dist_node n ON n.groupid = p.groupid "
                "WHERE p.shardid = get_shard_id_for_distribution_column('memory_engine_memorystore', %s::text)",
                [state["project"].id]).fetchall()
            target_host, target_port = coordinator.execute(
                "SELECT nodename, nodeport FROM pg_dist_node WHERE groupid <> 0 AND noderole = 'primary' "
                "AND shouldhaveshards AND nodeport <> %s ORDER BY nodeport LIMIT 1", [source_port]).fetchone()
        moving.update(shard=shard, source=(source_host, source_port), target=(target_host, target_port))
        with node(source_host, source_port) as source, node(target_host, target_port) as target:
            ahead = source.execute("SELECT pg_current_xact_id()::text::bigint").fetchone()[0]
            behind = target.execute("SELECT pg_current_xact_id()::text::bigint").fetchone()[0]
            for _ in range(max(0, behind - ahead + 1000)):
                source.execute("SELECT pg_current_xact_id()")
        call("post", "/api/v1/memories", {"memory_store_id": "{store}",
                                           "content": "The data center lease renews in May."})()
        cursor, entries = "", 0
        while True:
            body = client.get("/api/v1/feed", {"after": cursor, "limit": 1000}).json()
            entries += len(body["entries"])
            if not body["entries"]:
                moving["cursor"] = cursor
                return entries
            cursor = body["next_cursor"]

    def move() -> dict[str, int]:
        with node() as coordinator:
            coordinator.execute("SELECT citus_move_shard_placement(%s, %s, %s, %s, %s, "
                                "shard_transfer_mode => 'block_writes')",
                                [moving["shard"], *moving["source"], *moving["target"]])
        return {"from": moving["source"][1], "to": moving["target"][1]}

    def read_on() -> dict[str, Any]:
        from memory_engine.models import FeedClock

        body = client.get("/api/v1/feed", {"after": moving["cursor"], "limit": 1000}).json()
        clock = FeedClock.objects.get(project_id=state["project"].id)
        return {"entries": [[entry["kind"], entry["memory_id"]] for entry in body["entries"]], "era": clock.era}

    steps.run("the feed read to its end on the node that holds the project (far ahead of the other)",
              read_to_the_end)
    steps.run("the project's shards moved to the other worker (citus_move_shard_placement)", move)
    steps.run("POST /api/v1/memories (after the move)", call("post", "/api/v1/memories", {
        "memory_store_id": "{store}", "content": "The backup window moved to Sunday night."}, keep="after_move"))
    steps.run("GET /api/v1/feed?after=… (the cursor read before the move)", read_on)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    os.environ.update(environment(argv[1]))
    for result in run_flows():
        print(json.dumps(result, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
