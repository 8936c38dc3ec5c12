"""System checks: the app refuses to serve on a misconfigured database or embedder.

memory_engine.E001  django.contrib.postgres missing from INSTALLED_APPS
memory_engine.E002  database is not PostgreSQL
memory_engine.E003  the pgvector extension is not installed in the database
memory_engine.E004  configured embedding dimension differs from the vector columns
memory_engine.E005  stored vectors were made by another model than the configured one
memory_engine.E010  the lexical indexes were built with another text search config than the setting
memory_engine.W010  the lexical channel uses the tsvector fallback (the reason says why)
memory_engine.W011  a bm25 index has not been rebuilt since the server started (pg_textsearch < 1.3)
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.core.checks import CheckMessage, Error, Warning, register
from django.db import DatabaseError, connection

from .conf import embedding_dimensions, engine_settings

VECTOR_COLUMNS = (("memory_engine_memorycontent", "embedding"), ("memory_engine_chunk", "embedding"))


@register()
def check_installed_apps(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    errors = []
    if not apps.is_installed("django.contrib.postgres"):
        errors.append(Error(
            "memory_engine needs 'django.contrib.postgres' in INSTALLED_APPS.",
            hint="Add 'django.contrib.postgres' to INSTALLED_APPS.",
            id="memory_engine.E001",
        ))
    if connection.vendor != "postgresql":
        errors.append(Error(
            f"memory_engine needs PostgreSQL with pgvector; the default database is {connection.vendor}.",
            hint="Set DATABASES['default'] to PostgreSQL 16 with the pgvector extension.",
            id="memory_engine.E002",
        ))
    return errors


def database_state() -> dict[str, Any] | None:
    """Read the pgvector version, vector column dimensions and stored model names.

    Returns None when the database cannot be reached or is not migrated yet.
    """
    if connection.vendor != "postgresql":
        return None
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            row = cursor.fetchone()
            state: dict[str, Any] = {"pgvector": row[0] if row else None, "dimensions": {}, "models": set()}
            cursor.execute(
                """
                SELECT c.relname, a.atttypmod FROM pg_attribute a
                JOIN pg_class c ON c.oid = a.attrelid
                WHERE c.relname = ANY(%s) AND a.attname = 'embedding' AND NOT a.attisdropped
                """,
                [[table for table, _ in VECTOR_COLUMNS]],
            )
            state["dimensions"] = dict(cursor.fetchall())
            for table, column in VECTOR_COLUMNS:
                if table in state["dimensions"]:
                    cursor.execute(
                        f"SELECT DISTINCT embedding_model FROM {table} "  # noqa: S608 (constant names)
                        f"WHERE {column} IS NOT NULL AND embedding_model <> '' LIMIT 5"
                    )
                    state["models"].update(r[0] for r in cursor.fetchall())
            return state
    except DatabaseError:
        return None


@register("database")
def check_database(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list[Error]:
    """Registered under the ``database`` tag and also run by :func:`check_serving`."""
    if databases is not None and "default" not in databases:
        return []
    return _database_errors() + lexical_messages()


def lexical_messages() -> list[CheckMessage]:
    """The lexical channel's backend, its text search config and (pg_textsearch < 1.3) staleness."""
    from .lexical import BM25, TSVECTOR, lexical_status

    if connection.vendor != "postgresql":
        return []
    try:
        status = lexical_status()
    except DatabaseError:
        return []
    if status.reason == "the database is not migrated":
        return []
    messages: list[CheckMessage] = []
    wanted = str(engine_settings.KNOWLEDGE_TEXT_SEARCH_CONFIG)
    built = sorted(set(status.index_configs.values()))
    if built and built != [wanted]:
        messages.append(Error(
            f"The lexical indexes were built with text search config {', '.join(built)}; "
            f"KNOWLEDGE_TEXT_SEARCH_CONFIG is {wanted}.",
            hint="Run `python manage.py memory_engine_rebuild_lexical` to rebuild them with the setting, "
                 "or restore the previous KNOWLEDGE_TEXT_SEARCH_CONFIG.",
            id="memory_engine.E010",
        ))
    if status.backend == TSVECTOR:
        messages.append(Warning(
            f"The lexical channel uses the tsvector fallback: {status.reason}.",
            hint="Search works, with a slower lexical channel on large scopes. For BM25 indexes install "
                 "pg_textsearch, add it to shared_preload_libraries, then run "
                 "`python manage.py memory_engine_rebuild_lexical` (docs/retrieval.md).",
            id="memory_engine.W010",
        ))
    elif status.backend == BM25 and status.stale:
        messages.append(Warning(
            f"pg_textsearch {status.extension_version} lost the statistics of {', '.join(status.stale)} "
            f"when the server restarted; they are rebuilt before the next search.",
            hint="Nothing to do (`python manage.py memory_engine_rebuild_lexical --stale` rebuilds them now). "
                 "pg_textsearch 1.3 or later keeps them across restarts.",
            id="memory_engine.W011",
        ))
    return messages


def _database_errors() -> list[Error]:
    state = database_state()
    if state is None or not state["dimensions"]:
        return []  # not reachable or not migrated yet: migrate will create what is missing
    errors = []
    if state["pgvector"] is None:
        errors.append(Error(
            "The pgvector extension is not installed in the database.",
            hint="Run `manage.py migrate` as a role allowed to CREATE EXTENSION vector.",
            id="memory_engine.E003",
        ))
    configured = embedding_dimensions()
    for table, typmod in state["dimensions"].items():
        if typmod not in (-1, configured):
            errors.append(Error(
                f"{table}.embedding holds vector({typmod}) but MEMORY_ENGINE['EMBEDDING']"
                f"['DIMENSIONS'] is {configured}.",
                hint="Run `manage.py memory_engine_reembed --all` to move to the new model, "
                     "or restore the previous EMBEDDING settings.",
                id="memory_engine.E004",
            ))
    model = engine_settings.EMBEDDING.get("MODEL")
    provider = engine_settings.EMBEDDING.get("PROVIDER")
    other = sorted(m for m in state["models"] if m != model)
    if provider and other:
        errors.append(Error(
            f"Stored vectors were made by {', '.join(other)}; the configured model is {model}.",
            hint="Run `manage.py memory_engine_reembed --all`, or restore the previous EMBEDDING settings.",
            id="memory_engine.E005",
        ))
    return errors


@register()
def check_serving(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """Run the database checks on plain `check` / `runserver` too, so a mismatch refuses to serve."""
    if kwargs.get("databases") is not None:
        return []  # check_database covers this run
    return _database_errors() + lexical_messages()
