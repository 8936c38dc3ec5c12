"""The lexical indexes: config checked at boot, fallback reported, the restart guard."""

from __future__ import annotations

import logging
import threading
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection, connections

from memory_engine.checks import lexical_messages
from memory_engine.lexical import (
    BM25_INDEXES,
    DURABLE_FROM,
    STATE_TABLE,
    TSVECTOR,
    ensure_lexical_fresh,
    lexical_status,
    version_tuple,
)
from memory_engine.selectors.search import SearchRequest, knowledge_search

from .helpers import make_document


def _ids(messages) -> set[str]:
    return {m.id for m in messages}


@pytest.mark.django_db
def test_migrated_database_uses_bm25_with_the_configured_text_search_config():
    status = lexical_status()
    assert status.backend == "bm25", status
    assert status.index_configs == {name: "english" for name in BM25_INDEXES}
    assert lexical_messages() == []


@pytest.mark.django_db
@pytest.mark.usefixtures("bm25_tables_held")  # rebuilt after writing (tests/conftest.py)
def test_config_mismatch_is_an_error_naming_the_rebuild_command(settings, project):
    make_document(project, "/d.txt", ["The cats of Rome."], embed=False)
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "KNOWLEDGE_TEXT_SEARCH_CONFIG": "simple"}
    errors = [m for m in lexical_messages() if m.id == "memory_engine.E010"]
    assert len(errors) == 1
    assert "english" in errors[0].msg and "simple" in errors[0].msg
    assert "manage.py memory_engine_rebuild_lexical" in errors[0].hint
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # the test's inserts; DDL refuses pending checks
    out = StringIO()
    call_command("memory_engine_rebuild_lexical", stdout=out)
    assert "text search config simple" in out.getvalue()
    assert lexical_messages() == []
    # 'simple' keeps stop words: "of" alone now finds the row ('english' drops it).
    hits = knowledge_search(SearchRequest(project=project, query="of", channels=("lexical",)))
    assert [h.text for h in hits.results] == ["The cats of Rome."]


@pytest.mark.django_db
def test_the_fallback_is_a_warning_naming_the_backend_and_why(settings):
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "KNOWLEDGE_LEXICAL_BACKEND": "tsvector"}
    call_command("memory_engine_rebuild_lexical", "--backend", TSVECTOR, stdout=StringIO())
    warnings = [m for m in lexical_messages() if m.id == "memory_engine.W010"]
    assert len(warnings) == 1 and "tsvector fallback" in warnings[0].msg
    assert "KNOWLEDGE_LEXICAL_BACKEND" in warnings[0].msg
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "KNOWLEDGE_LEXICAL_BACKEND": "auto"}
    warnings = [m for m in lexical_messages() if m.id == "memory_engine.W010"]
    assert "bm25 indexes are missing" in warnings[0].msg


@pytest.mark.django_db
@pytest.mark.usefixtures("bm25_tables_held")  # rebuilt after writing (tests/conftest.py)
def test_stale_index_is_no_warning_and_is_rebuilt_before_the_next_search(project):
    """Nothing to do for anyone (the search repairs it), so the checks say nothing."""
    make_document(project, "/d.txt", ["Volcanoes erupt.", "Rivers flow."], embed=False)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {STATE_TABLE} SET server_started = '2000-01-01'")
    if version_tuple(lexical_status().extension_version) >= DURABLE_FROM:
        pytest.skip("pg_textsearch >= 1.3 keeps its statistics: nothing is ever stale")
    assert lexical_status().stale
    assert lexical_messages() == []
    hits = knowledge_search(SearchRequest(project=project, query="volcanoes", channels=("lexical",)))
    assert [h.text for h in hits.results] == ["Volcanoes erupt."]
    assert lexical_status().stale == []
    assert lexical_messages() == []


@pytest.mark.django_db
def test_migrate_rebuilds_stale_indexes():
    from django.core.management.sql import emit_post_migrate_signal

    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {STATE_TABLE} SET server_started = '2000-01-01'")
    if version_tuple(lexical_status().extension_version) >= DURABLE_FROM:
        pytest.skip("pg_textsearch >= 1.3 keeps its statistics: nothing is ever stale")
    assert lexical_status().stale
    emit_post_migrate_signal(verbosity=0, interactive=False, db="default")
    assert lexical_status().stale == []


@pytest.mark.django_db(transaction=True)
def test_concurrent_processes_rebuild_once():
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {STATE_TABLE} SET server_started = '2000-01-01'")
    # The rebuild log, read by a handler of its own: an earlier test in this process (a server
    # configuring logging) may have disabled the logger or stopped it propagating to caplog's.
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = records.append  # type: ignore[method-assign]
    lexical_logger = logging.getLogger("memory_engine.lexical")
    saved = (lexical_logger.level, lexical_logger.disabled)
    lexical_logger.setLevel(logging.INFO)
    lexical_logger.disabled = False
    lexical_logger.addHandler(handler)
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            barrier.wait()
            ensure_lexical_fresh()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    lexical_logger.removeHandler(handler)
    lexical_logger.setLevel(saved[0])
    lexical_logger.disabled = saved[1]
    assert errors == []
    rebuilt = [r.getMessage() for r in records if r.getMessage().startswith("rebuilt lexical index")]
    assert len(rebuilt) == len(BM25_INDEXES), rebuilt
    assert lexical_status().stale == []


def test_migration_on_a_server_that_refuses_pg_textsearch_builds_the_fallback():
    """A managed PostgreSQL: pgvector allowed (created by the operator), pg_textsearch not
    creatable by the app's role. `migrate` succeeds, `check` warns W010 naming why, and
    search answers from the tsvector fallback."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import psycopg

    root = Path(__file__).resolve().parents[2]
    host = connection.settings_dict["HOST"]
    admin = psycopg.connect(host=host, user="postgres", dbname="postgres", autocommit=True)
    role, database = "me_managed_role", "me_managed_db"
    admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
    admin.execute(f'DROP ROLE IF EXISTS "{role}"')
    admin.execute(f'CREATE ROLE "{role}" LOGIN NOSUPERUSER')
    admin.execute(f'CREATE DATABASE "{database}" OWNER "{role}"')
    try:
        with psycopg.connect(host=host, user="postgres", dbname=database, autocommit=True) as owner_db:
            owner_db.execute("CREATE EXTENSION vector")  # what a managed service pre-installs
        env = dict(os.environ, DATABASE_URL=f"postgresql://{role}@/{database}?host={host}",
                   MEMORY_ENGINE_EMBEDDING_PROVIDER="tests.providers.HashingEmbeddingProvider",
                   MEMORY_ENGINE_EMBEDDING_MODEL="test-hashing")
        env.pop("MEMORY_ENGINE_DB_NAME", None)

        def manage(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, str(root / "manage.py"), *args], cwd=root, env=env,
                                  capture_output=True, text=True, timeout=300)

        migrated = manage("migrate", "--noinput")
        assert migrated.returncode == 0, migrated.stderr[-3000:]
        checked = manage("check")
        assert checked.returncode == 0, checked.stderr[-3000:]
        assert "memory_engine.W010" in checked.stderr
        assert "tsvector fallback" in checked.stderr
        searched = manage("shell", "-c", (
            "from memory_engine.models import Project;"
            "from memory_engine.selectors.search import SearchRequest, knowledge_search;"
            "from tests.search.helpers import make_document; p = Project.objects.create(name='managed');"
            "make_document(p, '/v.txt', ['Volcanoes erupt.', 'Rivers flow.']);"
            "r = knowledge_search(SearchRequest(project=p, query='volcano', channels=('lexical',)));"
            "print(r.lexical_backend, [h.text for h in r.results])"))
        assert searched.returncode == 0, searched.stderr[-3000:]
        assert searched.stdout.strip().splitlines()[-1] == "tsvector ['Volcanoes erupt.']"
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        admin.execute(f'DROP ROLE IF EXISTS "{role}"')
        admin.close()
