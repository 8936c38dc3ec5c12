"""System checks: the app refuses to serve on a misconfigured database or embedder.

memory_engine.E001  django.contrib.postgres missing from INSTALLED_APPS
memory_engine.E002  database is not PostgreSQL
memory_engine.E003  the pgvector extension is not installed in the database
memory_engine.E004  configured embedding dimension differs from the vector columns
memory_engine.E005  stored vectors were made by another model than the configured one
memory_engine.E006  DEBUG is off and SECRET_KEY is a known default or guessable
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.checks import Error, register
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


#: SECRET_KEY values shipped in examples and compose files: anyone can sign with them.
KNOWN_DEFAULT_SECRET_KEYS = frozenset({
    "", "change-me", "changeme", "change_me", "secret", "dev-only-insecure-key-change-me", "django-insecure",
})


def secret_key_is_insecure(key: str) -> bool:
    """A default, a Django "insecure" start-project key, or too short/uniform to be random."""
    return (key.strip().lower() in KNOWN_DEFAULT_SECRET_KEYS or key.startswith("django-insecure-")
            or len(key) < 32 or len(set(key)) < 5)


@register("security")
def check_secret_key(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """Signed converter and download URLs and the key sealing stored PDF passwords derive from
    SECRET_KEY: a production process (DEBUG off) refuses a guessable one."""
    if settings.DEBUG or not secret_key_is_insecure(str(getattr(settings, "SECRET_KEY", "") or "")):
        return []
    return [Error(
        "SECRET_KEY is a known default or guessable, and DEBUG is off: anyone could forge the signed "
        "converter callback and file download URLs and read stored PDF passwords.",
        hint="Set a long random SECRET_KEY (e.g. the DJANGO_SECRET_KEY environment variable: "
             "python -c 'import secrets; print(secrets.token_urlsafe(50))').",
        id="memory_engine.E006",
    )]


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
    return _database_errors()


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
    return _database_errors()
