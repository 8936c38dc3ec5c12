"""System checks: the app refuses to serve on a misconfigured database or embedder.

memory_engine.E001  django.contrib.postgres missing from INSTALLED_APPS
memory_engine.E002  database is not PostgreSQL
memory_engine.E003  the pgvector extension is not installed in the database
memory_engine.E004  EMBEDDING names a model or dimension the registry never switched to (or the columns differ)
memory_engine.E005  the active embedding model is named by no setting (EMBEDDING or EMBEDDING_MODELS)
memory_engine.E006  DEBUG is off and SECRET_KEY is a known default or guessable
memory_engine.E007  pgvector is older than 0.8 (no iterative index scans)
memory_engine.E008  PDF_EXTRACTOR is "pdfium" but the pypdfium2 package is not installed
memory_engine.E010  the lexical indexes were built with another text search config than the setting
memory_engine.E020  a MEMORY_ENGINE value does not fit its declared type (memory_engine.conf.TYPES)
memory_engine.E021  RELEVANCE_MODEL names a feature the relevance model does not know
memory_engine.E030  on a Citus cluster: an engine table not placed, a setting the engine needs on every node
                    missing, or a Citus local or reference table's sequence behind its rows
                    (`manage.py memory_engine_distribute` does what is left)

Warnings about the host's deployment settings (docs/operations.md, "Worker and connection settings"):

memory_engine.W001  Q_CLUSTER hands a task still running to a second worker (retry <= timeout)
memory_engine.W002  Q_CLUSTER timeout reaches RULE_FIRING_TIMEOUT: the sweep re-runs live firings
memory_engine.W003  Q_CLUSTER timeout is shorter than one outbound call may take (HTTP_MAX_SECONDS)
memory_engine.W004  Q_CLUSTER max_attempts is unlimited: an unacknowledged task comes back forever
memory_engine.W005  CONN_HEALTH_CHECKS is off for a reused connection: no recovery after a restart
memory_engine.W010  the lexical channel uses the tsvector fallback (the reason says why)
memory_engine.W012  EMBEDDING still names the previous model; the active one is reached through EMBEDDING_MODELS
memory_engine.W014  EMBEDDING names another model than all-MiniLM-L6-v2 and RELEVANCE_MODEL is unset: the
                    built-in relevance model reads that embedder's cosines on MiniLM's scale
memory_engine.W020  MEMORY_ENGINE (or its EMBEDDING / LLM dict) has a key that is no setting: it does nothing

A check speaks only when there is something to do. A bm25 index that pg_textsearch < 1.3 lost
at a server restart is no warning (it was W011): the next search rebuilds it, and the embedded
server restarts with every command, so it would be reported on each one.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib.util import find_spec
from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register
from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connection, connections

from .conf import embedding_dimensions, engine_settings
from .relevance import BUILTIN_MODEL, calibrated_for_embedder, relevance_model

VECTOR_COLUMNS = (("memory_engine_memorycontent", "embedding"), ("memory_engine_chunk", "embedding"))


@register()
def check_engine_settings(app_configs: Any = None, **kwargs: Any) -> list[Error | Warning]:
    """E020 for each value that does not fit its type (reading it raises ImproperlyConfigured),
    W020 for each key that is no setting, e.g. a typo that would silently do nothing."""
    messages: list[Error | Warning] = [
        Error(problem, hint="See the settings table in the README and memory_engine/conf/.", id="memory_engine.E020")
        for problem in engine_settings.invalid_settings()
    ]
    for where, closest in engine_settings.unknown_settings():
        messages.append(Warning(
            f"{where} is not a memory_engine setting; it is ignored.",
            hint=f"Did you mean {closest!r}?" if closest else "Remove it, or see the settings table in the README.",
            id="memory_engine.W020",
        ))
    return messages


@register()
def check_pdf_extractor(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """E008 when PDF_EXTRACTOR names pdfium and the pypdfium2 package is missing."""
    if not _settings_readable() or engine_settings.PDF_EXTRACTOR != "pdfium" or find_spec("pypdfium2"):
        return []
    return [Error(
        'PDF_EXTRACTOR is "pdfium" but the pypdfium2 package is not installed: every PDF would fail.',
        hint="pip install 'django-memory-engine[pdfium]', or set PDF_EXTRACTOR to \"pypdf\" (the default).",
        id="memory_engine.E008",
    )]


@register()
def check_relevance_model(app_configs: Any = None, **kwargs: Any) -> list[Error | Warning]:
    """E021 for a RELEVANCE_MODEL naming unknown features; W014 when the built-in relevance model
    serves an embedder it was not calibrated for."""
    if not _settings_readable():
        return []
    try:
        relevance_model()
    except ImproperlyConfigured as exc:
        return [Error(str(exc), hint="See docs/retrieval.md, \"Relevance\".", id="memory_engine.E021")]
    model = engine_settings.EMBEDDING.get("MODEL")
    if engine_settings.RELEVANCE_MODEL or not engine_settings.EMBEDDING.get("PROVIDER"):
        return []
    if calibrated_for_embedder(model):
        return []
    return [Warning(
        f"The relevance model {BUILTIN_MODEL.version} was calibrated for {BUILTIN_MODEL.calibrated_for}; "
        f"EMBEDDING names {model!r}, whose cosines may lie on another scale: injection may keep too much or "
        f"too little.",
        hint="Fit a model for it with bench/relevance.py --fit on your data (or the shared dev data) and set "
             "MEMORY_ENGINE['RELEVANCE_MODEL'] to what it prints (docs/retrieval.md, \"Relevance\").",
        id="memory_engine.W014",
    )]


def _settings_readable() -> bool:
    """Whether the checks below can read MEMORY_ENGINE; when not, E020 reports why."""
    return not engine_settings.invalid_settings()


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
            hint="Set DATABASES['default'] to PostgreSQL with the pgvector extension (18 with pg_textsearch for BM25).",
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


#: The oldest pgvector with iterative index scans (``hnsw.iterative_scan``), which search relies on.
MIN_PGVECTOR = (0, 8)


def pgvector_version(text: str) -> tuple[int, ...]:
    """``"0.8.1"`` → ``(0, 8, 1)``; parts that are not numbers count as 0."""
    return tuple(int(part) if part.isdigit() else 0 for part in text.split("."))


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
            state["registry"] = _registry_state(cursor)
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


def _registry_state(cursor: Any) -> dict[str, Any] | None:
    """The embedding-model registry: the active (model, dimensions) and the retired ones;
    None before migration 0012 or while it is empty (the first use registers EMBEDDING)."""
    cursor.execute("SELECT to_regclass('memory_engine_embeddingmodel') IS NOT NULL")
    if not cursor.fetchone()[0]:
        return None
    cursor.execute("SELECT name, model, dimensions, state, storage FROM memory_engine_embeddingmodel")
    rows = cursor.fetchall()
    active = [row for row in rows if row[3] == "active"]
    if not active:
        return None
    return {"name": active[0][0], "active": (active[0][1], active[0][2]), "storage": active[0][4],
            "retired": {(model, dims) for _, model, dims, state, _ in rows if state == "retired"}}


#: The commands that change the embedding model (docs/embeddings.md).
SWITCH_HINT = ("Put the new model in MEMORY_ENGINE['EMBEDDING_MODELS'] under a name, restore EMBEDDING, then run "
               "`manage.py memory_engine_embedding_model register NAME`, `... build NAME` and `... switch NAME` "
               "(docs/embeddings.md); search keeps serving the active model meanwhile.")


def _registry_messages(state: dict[str, Any]) -> list[CheckMessage]:
    """A model or dimension change is accepted only through the registry (E004, E005, W012)."""
    registry = state["registry"]
    active_model, active_dims = registry["active"]
    messages: list[CheckMessage] = []
    for table, typmod in state["dimensions"].items():
        if typmod not in (-1, active_dims):
            messages.append(Error(
                f"{table}.embedding holds {typmod} dimensions but the active embedding model {active_model} "
                f"has {active_dims}: the column was changed outside the registry.",
                hint="Switch models only with `manage.py memory_engine_embedding_model` (docs/embeddings.md).",
                id="memory_engine.E004",
            ))
    config = engine_settings.EMBEDDING
    if not config.get("PROVIDER"):
        return messages
    configured = (config.get("MODEL"), config.get("DIMENSIONS"))
    wanted_storage = config.get("STORAGE")
    if configured == (active_model, active_dims) and wanted_storage not in (None, registry["storage"]):
        messages.append(Warning(
            f"MEMORY_ENGINE['EMBEDDING'] asks for {wanted_storage} storage but the active model's vectors are "
            f"{registry['storage']}: the setting shapes only a new installation's columns.",
            hint=f"Name the same model again with \"STORAGE\": {wanted_storage!r} in EMBEDDING_MODELS, then "
                 "register, build and switch it (docs/embeddings.md); or drop STORAGE from EMBEDDING.",
            id="memory_engine.W013",
        ))
    named = {(entry.get("MODEL"), entry.get("DIMENSIONS"))
             for entry in (engine_settings.EMBEDDING_MODELS or {}).values() if isinstance(entry, dict)}
    if configured == (active_model, active_dims):
        return messages
    # Same dimension and no stored vector of another model (e.g. an empty database): nothing to mismatch.
    harmless = configured[1] == active_dims and not (state["models"] - {configured[0]})
    if configured not in registry["retired"]:
        if harmless:
            return messages
        messages.append(Error(
            f"MEMORY_ENGINE['EMBEDDING'] names {configured[0]} ({configured[1]} dimensions) but the active "
            f"embedding model is {active_model} ({active_dims}): a model change goes through the registry.",
            hint=SWITCH_HINT, id="memory_engine.E004",
        ))
    elif (active_model, active_dims) not in named:
        messages.append(Error(
            f"The active embedding model {active_model} ({active_dims} dimensions) is named by no setting: "
            "queries and writes cannot reach it.",
            hint=f"Set MEMORY_ENGINE['EMBEDDING'] to it (MODEL {active_model!r}, DIMENSIONS {active_dims}) "
                 f"or keep its entry {registry['name']!r} in EMBEDDING_MODELS.",
            id="memory_engine.E005",
        ))
    else:
        messages.append(Warning(
            f"MEMORY_ENGINE['EMBEDDING'] still names {configured[0]}, the previous model; the active one, "
            f"{active_model}, is reached through EMBEDDING_MODELS.",
            hint=f"Set EMBEDDING to the active model (MODEL {active_model!r}, DIMENSIONS {active_dims}).",
            id="memory_engine.W012",
        ))
    return messages


@register("database")
def check_database(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> Sequence[CheckMessage]:
    """The database against the settings, once per run: Django runs ``database`` checks on every
    run, with ``databases=None`` for plain `check` / `runserver` (so a mismatch refuses to serve
    there too) and the aliases being migrated for `migrate`."""
    if (databases is not None and "default" not in databases) or not _settings_readable():
        return []
    return _database_errors() + lexical_messages() + citus_messages()


def citus_messages() -> list[CheckMessage]:
    """E030 once the engine's tables are on a Citus cluster (some placed) and the distribution
    plan is not empty: a table a later migration created, or a database setting missing."""
    from .distribution import DistributionError, plan

    if connection.vendor != "postgresql":
        return []
    try:
        with connection.cursor() as cursor:
            found = plan(cursor)
    except (DistributionError, DatabaseError):
        return []  # no Citus, or not migrated: nothing is distributed, nothing to check
    if not found.placed or found.empty:
        return []
    left = [f"{name} is not a reference table" for name in found.reference]
    left += [f"{name} is not distributed by project_id" for name in found.distributed]
    left += [f"{name} is not set to {value} on database {found.database}" for name, value in found.settings.items()]
    left += [f"the sequence of {name} is behind its rows" for name in found.sequences]
    return [Error(
        f"The engine's tables are on a Citus cluster but not all of it is in place: {'; '.join(left)}.",
        hint="Run `python manage.py memory_engine_distribute` (`--dry-run` prints the SQL); docs/scaling.md.",
        id="memory_engine.E030",
    )]


def lexical_messages() -> list[CheckMessage]:
    """The lexical channel's backend and its text search config. Staleness (pg_textsearch < 1.3
    after a restart) is repaired before the next search, so it asks nothing of anyone."""
    from .lexical import TSVECTOR, lexical_status

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
    return messages


def _database_errors() -> list[CheckMessage]:
    state = database_state()
    if state is None or not state["dimensions"]:
        return []  # not reachable or not migrated yet: migrate will create what is missing
    errors: list[CheckMessage] = []
    if state["pgvector"] is None:
        errors.append(Error(
            "The pgvector extension is not installed in the database.",
            hint="Run `manage.py migrate` as a role allowed to CREATE EXTENSION vector.",
            id="memory_engine.E003",
        ))
    elif pgvector_version(state["pgvector"]) < MIN_PGVECTOR:
        errors.append(Error(
            f"pgvector {state['pgvector']} is installed; search needs {'.'.join(map(str, MIN_PGVECTOR))} or later "
            "(iterative HNSW index scans keep a filtered search from returning fewer rows than asked).",
            hint="Upgrade the extension: install pgvector 0.8 on the server, then `ALTER EXTENSION vector UPDATE`.",
            id="memory_engine.E007",
        ))
    if state.get("registry") is not None:
        return errors + _registry_messages(state)
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


def _task_queue_warnings(q_cluster: dict[str, Any]) -> list[Warning]:
    """What django-q2 would do to the engine's long tasks with these Q_CLUSTER values."""
    warnings = []
    timeout, retry = q_cluster.get("timeout"), q_cluster.get("retry", 60)  # django-q2's defaults
    if not timeout or retry <= timeout:
        warnings.append(Warning(
            f"Q_CLUSTER['retry'] ({retry} s) is not above Q_CLUSTER['timeout'] ({timeout} s): django-q2 hands "
            f"a task still running after {retry} s to a second worker, so long ingestions and rule firings "
            "run twice.",
            hint="Set 'timeout' (e.g. 600) and 'retry' above it (e.g. 900), as in the README's Q_CLUSTER.",
            id="memory_engine.W001",
        ))
    if timeout and timeout >= engine_settings.RULE_FIRING_TIMEOUT:
        warnings.append(Warning(
            f"Q_CLUSTER['timeout'] ({timeout} s) is not below MEMORY_ENGINE['RULE_FIRING_TIMEOUT'] "
            f"({engine_settings.RULE_FIRING_TIMEOUT} s): the rule-firing sweep re-enqueues a firing that is "
            "still running.",
            hint="Keep RULE_FIRING_TIMEOUT above Q_CLUSTER['timeout'] plus the longest queue delay you expect.",
            id="memory_engine.W002",
        ))
    if timeout and timeout < engine_settings.HTTP_MAX_SECONDS:
        warnings.append(Warning(
            f"Q_CLUSTER['timeout'] ({timeout} s) is shorter than MEMORY_ENGINE['HTTP_MAX_SECONDS'] "
            f"({engine_settings.HTTP_MAX_SECONDS:g} s), the time one converter, LLM or embedder call may take: "
            "the worker is killed in the middle of such a task.",
            hint="Raise Q_CLUSTER['timeout'] (and 'retry' above it), or lower HTTP_MAX_SECONDS.",
            id="memory_engine.W003",
        ))
    if not q_cluster.get("max_attempts"):
        warnings.append(Warning(
            "Q_CLUSTER['max_attempts'] is unlimited: a task whose worker dies or that fails without "
            "'ack_failures' is delivered again, forever.",
            hint="Set 'max_attempts': 1 and 'ack_failures': True; the engine's own sweeps re-run stalled "
                 "ingestions and rule firings, with their own attempt limits.",
            id="memory_engine.W004",
        ))
    return warnings


@register()
def check_task_queue(app_configs: Any = None, **kwargs: Any) -> list[Warning]:
    """Q_CLUSTER values that would re-deliver or kill the engine's long tasks (W001–W004)."""
    q_cluster = getattr(settings, "Q_CLUSTER", None) or {}
    if not apps.is_installed("django_q") or q_cluster.get("sync") or not _settings_readable():
        return []  # no worker, nothing is delivered twice (or E020 reports the settings)
    return _task_queue_warnings(q_cluster)


@register()
def check_connection_health(app_configs: Any = None, **kwargs: Any) -> list[Warning]:
    """W005: a reused connection (CONN_MAX_AGE or a pool) without CONN_HEALTH_CHECKS stays broken
    after PostgreSQL restarts; each process then fails until it is restarted itself."""
    q_cluster = getattr(settings, "Q_CLUSTER", None) or {}
    aliases = {DEFAULT_DB_ALIAS, q_cluster.get("orm") or DEFAULT_DB_ALIAS}
    warnings = []
    for alias in sorted(a for a in aliases if a in connections.settings):
        config = connections[alias].settings_dict
        reused = config.get("CONN_MAX_AGE", 0) != 0 or bool(config.get("OPTIONS", {}).get("pool"))
        if reused and not config.get("CONN_HEALTH_CHECKS"):
            warnings.append(Warning(
                f"DATABASES[{alias!r}] reuses connections without CONN_HEALTH_CHECKS: after PostgreSQL "
                "restarts, a process keeps its broken connection instead of reconnecting.",
                hint=f"Set DATABASES[{alias!r}]['CONN_HEALTH_CHECKS'] = True.",
                id="memory_engine.W005",
            ))
    return warnings


@register()
def check_read_replicas(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """E011: READ_REPLICAS names an alias DATABASES lacks, or the router that sends reads there is
    missing from DATABASE_ROUTERS (the replicas would then serve nothing, silently)."""
    from memory_engine.replicas import replica_aliases

    aliases = replica_aliases()
    errors = [Error(f"MEMORY_ENGINE['READ_REPLICAS'] names {alias!r}, which DATABASES does not define.",
                    hint="Add the replica to DATABASES, or remove it from READ_REPLICAS.", id="memory_engine.E011")
              for alias in aliases if alias not in connections.settings]
    routers = [router if isinstance(router, str) else f"{type(router).__module__}.{type(router).__name__}"
               for router in getattr(settings, "DATABASE_ROUTERS", [])]
    if aliases and "memory_engine.replicas.ReplicaRouter" not in routers:
        errors.append(Error("MEMORY_ENGINE['READ_REPLICAS'] is set but no router sends reads there.",
                            hint='Add "memory_engine.replicas.ReplicaRouter" to DATABASE_ROUTERS.',
                            id="memory_engine.E011"))
    return errors
