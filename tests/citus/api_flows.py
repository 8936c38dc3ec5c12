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
from typing import Any

#: The connection option that makes every multi-shard statement an error.
SINGLE_SHARD_OPTION = "options=-c%20citus.multi_task_query_log_level%3Derror"
TEXT = "The deploy runs on Fridays after the freeze."


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
    override_settings(MEMORY_ENGINE={**settings.MEMORY_ENGINE, "KNOWLEDGE_LEXICAL_BACKEND": "tsvector"}).enable()
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
            if keep and response.status_code in (200, 201):
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
    steps.connection.close()
    return steps.results


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
