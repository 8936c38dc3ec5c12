"""Changing the embedding model without downtime: register, build, switch (docs/embeddings.md).

The active model's vectors are the ``embedding`` columns search reads. Registering another
model adds side storage to memory contents and document chunks (``embedding_next`` of the
model's probed dimension, ``embedding_model_next``); building fills it in batches while the
active model keeps serving, then indexes it (HNSW, cosine). Switching embeds the rows written
meanwhile and, in one short transaction, drops the old columns and renames the side ones:
searches wait for that transaction (milliseconds), none reads half of each.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from memory_engine.conf import embedding_dimensions, engine_settings
from memory_engine.exceptions import (
    EmbeddingDimensionsTooLarge,
    EmbeddingModelState,
    EmbeddingModelUnknown,
    EmbeddingProbeFailed,
)
from memory_engine.models import EmbeddingModel
from memory_engine.providers.embeddings import (
    EmbeddingError,
    EmbeddingProvider,
    build_embedding_provider,
    embedding_model_config,
    refresh_embedding_provider,
)

logger = logging.getLogger("memory_engine.embedding_models")

#: The most dimensions an HNSW index takes, per storage type (pgvector's limits).
STORAGE_LIMITS: dict[str, int] = {EmbeddingModel.Storage.VECTOR: 2000, EmbeddingModel.Storage.HALFVEC: 4000}
#: The storage of a model whose settings name none: half precision. Measured against ``vector``
#: it changes no dedup decision and no retrieval score and shortens the write funnel's tail
#: (docs/benchmarks.md, "halfvec by default").
DEFAULT_STORAGE = EmbeddingModel.Storage.HALFVEC
#: The HNSW build parameters of every vector index the engine creates (as ``search_indexes``).
HNSW_WITH = "WITH (m = 16, ef_construction = 64)"
#: (table, kind in reports, prefix of its index names).
TABLES = (("memory_engine_memorycontent", "memory_contents", "content"), ("memory_engine_chunk", "chunks", "chunk"))
#: How long the switch waits for a lock before it lets go and tries again: searches queue
#: behind a waiting lock, so this bounds the delay they see (and settles a lock cycle with a
#: search before PostgreSQL's deadlock detector would cancel one side).
SWITCH_LOCK_TIMEOUT = "200ms"
SWITCH_ATTEMPTS = 25
#: Errors after which the swap is tried again (nothing of it was committed).
RETRY_REASONS = ("lock timeout", "deadlock detected")

Progress = Callable[[str, int], Any]
T = TypeVar("T")


@dataclass
class BuildReport:
    embedded: dict[str, int] = field(default_factory=lambda: {"memory_contents": 0, "chunks": 0})
    failed: dict[str, int] = field(default_factory=lambda: {"memory_contents": 0, "chunks": 0})
    errors: list[str] = field(default_factory=list)


@dataclass
class SwitchReport:
    caught_up: int = 0
    lock_ms: float = 0.0
    previous: str = ""


def storage_for(dimensions: int, *, storage: str | None = None) -> str:
    """``storage`` when given (a STORAGE setting), else DEFAULT_STORAGE; EmbeddingDimensionsTooLarge
    past the type's limit (2,000 dimensions for ``vector``, 4,000 for ``halfvec``)."""
    chosen = storage or DEFAULT_STORAGE
    if dimensions <= STORAGE_LIMITS[chosen]:
        return chosen
    raise EmbeddingDimensionsTooLarge(details={"dimensions": dimensions, "limits": dict(STORAGE_LIMITS),
                                               "storage": chosen})


def hnsw_index_sql(table: str, name: str, column: str, storage: str, *, concurrently: bool = False) -> str:
    """The ``CREATE INDEX`` of a vector column's HNSW (cosine) index."""
    return (f'CREATE INDEX {"CONCURRENTLY " if concurrently else ""}IF NOT EXISTS "{name}" ON "{table}" '
            f"USING hnsw ({column} {storage}_cosine_ops) {HNSW_WITH}")


def _column_type(cursor: Any, table: str, column: str) -> tuple[str, int] | None:
    """(type name, dimension) of a vector column; None when it does not exist."""
    cursor.execute(
        "SELECT t.typname, a.atttypmod FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
        "JOIN pg_type t ON t.oid = a.atttypid WHERE c.relname = %s AND a.attname = %s AND NOT a.attisdropped",
        [table, column],
    )
    row = cursor.fetchone()
    return (row[0], row[1]) if row else None


def bootstrap_active_model(model_class: Any = EmbeddingModel, db: Any = connection) -> None:
    """Register the configured EMBEDDING as the active model when the registry is empty, with the
    dimension and storage the ``embedding`` columns hold (what was stored before the registry)."""
    if model_class.objects.using(db.alias).exists():
        return
    config = engine_settings.EMBEDDING
    with db.cursor() as cursor:
        column = _column_type(cursor, "memory_engine_chunk", "embedding")
    if column and column[1] > 0:
        storage, dimensions = column
    else:
        dimensions = embedding_dimensions()
        storage = storage_for(dimensions, storage=config.get("STORAGE"))
    model_class.objects.using(db.alias).create(
        name="EMBEDDING", provider=str(config.get("PROVIDER") or ""), model=str(config.get("MODEL") or ""),
        dimensions=dimensions, storage=storage, state="active", registered_by="migrate",
        activated_at=timezone.now())


def active_model() -> EmbeddingModel:
    """The registry's active row (registered from EMBEDDING on first use)."""
    found = EmbeddingModel.objects.filter(state=EmbeddingModel.State.ACTIVE).first()
    if found is None:
        bootstrap_active_model()
        found = EmbeddingModel.objects.get(state=EmbeddingModel.State.ACTIVE)
    return found


def next_model() -> EmbeddingModel | None:
    """The model being built or ready to switch to, if any."""
    return EmbeddingModel.objects.filter(
        state__in=[EmbeddingModel.State.BUILDING, EmbeddingModel.State.READY]).first()


def _provider_of(model: EmbeddingModel) -> EmbeddingProvider:
    config = embedding_model_config(model.name)
    provider = build_embedding_provider(config) if config else None
    if provider is None:
        raise EmbeddingModelUnknown(f"MEMORY_ENGINE has no embedding model named {model.name!r} any more.",
                                    details={"name": model.name})
    return provider


def embedding_model_register(*, name: str, registered_by: str = "") -> EmbeddingModel:
    """Probe the model named ``name`` in settings and give it side storage (state ``building``).

    Raises EmbeddingModelUnknown, EmbeddingProbeFailed, EmbeddingDimensionsTooLarge, and
    EmbeddingModelState when it is the active model or another model is being built.
    """
    config = embedding_model_config(name)
    provider = build_embedding_provider(config) if config else None
    if provider is None:
        raise EmbeddingModelUnknown(details={"name": name})
    try:
        dimensions = len(provider.embed_documents(["embedding dimension probe"])[0])
    except EmbeddingError as exc:
        raise EmbeddingProbeFailed(details={"name": name, "error": str(exc)[:500]}) from exc
    storage = storage_for(dimensions, storage=config.get("STORAGE") if config else None)
    current = active_model()
    if (current.model, current.dimensions, current.storage) == (provider.model_name, dimensions, storage):
        raise EmbeddingModelState(f"{provider.model_name} ({dimensions}, {storage}) is the active model already.",
                                  details={"name": name, "state": current.state})
    pending = next_model()
    if pending is not None:
        raise EmbeddingModelState(
            f"{pending.model} is {pending.state}: switch to it or discard it first.",
            details={"name": pending.name, "state": pending.state})

    def add_side_storage(cursor: Any) -> EmbeddingModel:
        for table, _, prefix in TABLES:
            _drop_side_storage(cursor, table, prefix)
            cursor.execute(f'ALTER TABLE "{table}" ADD COLUMN embedding_next {storage}({dimensions}), '
                           "ADD COLUMN embedding_model_next varchar(200) NOT NULL DEFAULT ''")
            # Inline, as the active column (migration 0003): search reads vectors from the heap.
            cursor.execute(f'ALTER TABLE "{table}" ALTER COLUMN embedding_next SET STORAGE MAIN')
        return EmbeddingModel.objects.create(
            name=name, provider=str(config.get("PROVIDER") if config else ""), model=provider.model_name,
            dimensions=dimensions, storage=storage, state=EmbeddingModel.State.BUILDING,
            registered_by=registered_by)

    return _locked_ddl(add_side_storage)


def _locked_ddl(work: Callable[[Any], T]) -> T:
    """Run ``work`` in a transaction holding both tables (ACCESS EXCLUSIVE, taken at once, waiting
    at most SWITCH_LOCK_TIMEOUT each try): catalog changes without a lock cycle with searches."""
    for attempt in range(1, SWITCH_ATTEMPTS + 1):
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(f"SET LOCAL lock_timeout = '{SWITCH_LOCK_TIMEOUT}'")
                cursor.execute("LOCK TABLE memory_engine_memorycontent, memory_engine_chunk IN ACCESS EXCLUSIVE MODE")
                return work(cursor)
        except DatabaseError as exc:
            if not any(reason in str(exc) for reason in RETRY_REASONS) or attempt == SWITCH_ATTEMPTS:
                raise
            time.sleep(min(1.0, 0.05 * attempt))
    raise AssertionError("unreachable")


def _drop_side_storage(cursor: Any, table: str, prefix: str) -> None:
    cursor.execute(f'DROP INDEX IF EXISTS "me_{prefix}_embedding_next_hnsw"')
    cursor.execute(f'ALTER TABLE "{table}" DROP COLUMN IF EXISTS embedding_next, '
                   "DROP COLUMN IF EXISTS embedding_model_next")


def _pending_ids(table: str, *, with_vector_only: bool, skip: set[str]) -> list[str]:
    where = "embedding_next IS NULL" + (" AND embedding IS NOT NULL" if with_vector_only else "")
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT id FROM "{table}" WHERE {where} ORDER BY id')  # noqa: S608 (constant names)
        return [row[0] for row in cursor.fetchall() if row[0] not in skip]


def _fill(model: EmbeddingModel, provider: EmbeddingProvider, table: str, kind: str, ids: list[str],
          report: BuildReport, batch_size: int, on_progress: Progress | None) -> None:
    """Embed ``ids`` into the side storage, one batch per statement (autocommit outside the switch)."""
    for batch in _batches(ids, batch_size):
        _write_side_vectors(model, provider, table, _embed_batch(provider, table, kind, batch, report))
        if on_progress:
            on_progress(kind, len(batch))


def _batches(ids: list[str], batch_size: int) -> list[list[str]]:
    return [ids[start:start + batch_size] for start in range(0, len(ids), batch_size)]


def _embed_batch(provider: EmbeddingProvider, table: str, kind: str, batch: list[str],
                 report: BuildReport) -> dict[str, str]:
    """The vector literal of each row of ``batch`` that embedded (a failed batch is counted in
    ``report``, and left for the next pass); nothing is written."""
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT id, text FROM "{table}" WHERE id = ANY(%s)', [batch])  # noqa: S608
        rows = cursor.fetchall()
    try:
        vectors = provider.embed_documents([text for _, text in rows])
    except EmbeddingError as exc:
        report.failed[kind] += len(rows)
        report.errors.append(str(exc)[:500])
        logger.warning("embedding a batch of %s for %s failed: %s", kind, provider.model_name, exc)
        return {}
    literals = {row_id: "[" + ",".join(repr(x) for x in vector) + "]"
                for (row_id, _), vector in zip(rows, vectors, strict=True) if any(vector)}
    report.embedded[kind] += len(literals)
    return literals


def _write_side_vectors(model: EmbeddingModel, provider: EmbeddingProvider, table: str,
                        literals: dict[str, str]) -> None:
    if not literals:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            f'UPDATE "{table}" t SET embedding_next = d.v::{model.storage}({model.dimensions}), '  # noqa: S608
            "embedding_model_next = %s FROM unnest(%s::text[], %s::text[]) AS d(id, v) WHERE t.id = d.id",
            [provider.model_name, list(literals), list(literals.values())],
        )


def _create_side_index(model: EmbeddingModel) -> None:
    """The side column's HNSW index, built after the backfill (faster than row by row);
    CONCURRENTLY when not inside a transaction, so writes go on meanwhile."""
    with connection.cursor() as cursor:
        for table, _, prefix in TABLES:
            cursor.execute(hnsw_index_sql(table, f"me_{prefix}_embedding_next_hnsw", "embedding_next", model.storage,
                                          concurrently=not connection.in_atomic_block))


def embedding_model_build(*, model: EmbeddingModel, batch_size: int | None = None,
                          on_start: Progress | None = None, on_progress: Progress | None = None) -> BuildReport:
    """Embed every memory content and chunk into ``model``'s side storage, then index it.

    The active model keeps serving throughout; a second pass picks up rows written during the
    first. The model ends ``ready`` (rows whose embedding failed are counted, and retried by
    the switch when they have a vector of the active model).
    """
    if model.state not in (EmbeddingModel.State.BUILDING, EmbeddingModel.State.READY):
        raise EmbeddingModelState(details={"name": model.name, "state": model.state})
    provider = _provider_of(model)
    batch_size = batch_size or engine_settings.EMBEDDING_BATCH_SIZE
    report = BuildReport()
    for table, kind, _ in TABLES:
        tried: set[str] = set()
        for _catch_up in range(2):  # the second pass: rows written while the first ran
            ids = _pending_ids(table, with_vector_only=False, skip=tried)
            if not ids:
                break
            if on_start:
                on_start(kind, len(ids))
            tried.update(ids)
            _fill(model, provider, table, kind, ids, report, batch_size, on_progress)
    _create_side_index(model)
    EmbeddingModel.objects.filter(pk=model.pk).update(state=EmbeddingModel.State.READY, built_at=timezone.now())
    model.refresh_from_db()
    return report


def embedding_model_switch(*, model: EmbeddingModel, batch_size: int | None = None) -> SwitchReport:
    """Make ``model`` (``ready``) the active one: catch up, then swap the columns in one transaction.

    Writes wait during the final catch-up and the swap (rows written since the build get their
    vector under the same lock); reads wait only for the swap itself.
    """
    if model.state != EmbeddingModel.State.READY:
        raise EmbeddingModelState(f"{model.model} is {model.state}: build it first.",
                                  details={"name": model.name, "state": model.state})
    provider = _provider_of(model)
    batch_size = batch_size or engine_settings.EMBEDDING_BATCH_SIZE
    report = SwitchReport()
    catch_up = BuildReport()
    for table, kind, _ in TABLES:  # outside the lock: most of what was written since the build
        _fill(model, provider, table, kind, _pending_ids(table, with_vector_only=True, skip=set()),
              catch_up, batch_size, None)
    _create_side_index(model)
    for attempt in range(1, SWITCH_ATTEMPTS + 1):
        try:
            report = _swap(model, provider, batch_size)
            break
        except Exception as exc:
            if not any(reason in str(exc) for reason in RETRY_REASONS) or attempt == SWITCH_ATTEMPTS:
                raise
            logger.info("the switch to %s met running queries (%s); retrying", model.model, exc)
            time.sleep(min(1.0, 0.05 * attempt))
    report.caught_up += sum(catch_up.embedded.values())
    refresh_embedding_provider()
    return report


def _swap(model: EmbeddingModel, provider: EmbeddingProvider, batch_size: int) -> SwitchReport:
    report = SwitchReport()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"SET LOCAL lock_timeout = '{SWITCH_LOCK_TIMEOUT}'")
        # Writes wait from here; reads go on until the ALTERs below.
        cursor.execute("LOCK TABLE memory_engine_memorycontent, memory_engine_chunk IN SHARE ROW EXCLUSIVE MODE")
        started = time.perf_counter()
        last = BuildReport()
        # Embedded now, written only under the exclusive lock: a write to a bm25-indexed table
        # holds pg_textsearch 1.0's index lock until the commit (the embedded server), and a
        # search that met it while holding the table would wait on us as we wait on it, with no
        # timeout or deadlock check to end it (docs/operations.md).
        embedded = [(table, _embed_batch(provider, table, kind, batch, last))
                    for table, kind, _ in TABLES
                    for batch in _batches(_pending_ids(table, with_vector_only=True, skip=set()), batch_size)]
        report.caught_up = sum(last.embedded.values())
        # Both tables at once, so a search holding one of them cannot wait on us for the other.
        cursor.execute("LOCK TABLE memory_engine_memorycontent, memory_engine_chunk IN ACCESS EXCLUSIVE MODE")
        for table, literals in embedded:
            _write_side_vectors(model, provider, table, literals)
        for table, _, prefix in TABLES:
            cursor.execute(f'ALTER TABLE "{table}" DROP COLUMN embedding, DROP COLUMN embedding_model')
            cursor.execute(f'ALTER TABLE "{table}" RENAME COLUMN embedding_next TO embedding')
            cursor.execute(f'ALTER TABLE "{table}" RENAME COLUMN embedding_model_next TO embedding_model')
            cursor.execute(f'ALTER INDEX "me_{prefix}_embedding_next_hnsw" RENAME TO "me_{prefix}_embedding_hnsw"')
        previous = EmbeddingModel.objects.select_for_update().filter(state=EmbeddingModel.State.ACTIVE).first()
        now = timezone.now()
        if previous is not None:
            report.previous = previous.model
            EmbeddingModel.objects.filter(pk=previous.pk).update(state=EmbeddingModel.State.RETIRED, retired_at=now)
        EmbeddingModel.objects.filter(pk=model.pk).update(state=EmbeddingModel.State.ACTIVE, activated_at=now)
        report.lock_ms = (time.perf_counter() - started) * 1000
    model.refresh_from_db()
    return report


def embedding_model_discard(*, model: EmbeddingModel) -> None:
    """Drop a model's side storage and its registry row (a model being built or ready)."""
    if model.state not in (EmbeddingModel.State.BUILDING, EmbeddingModel.State.READY):
        raise EmbeddingModelState(details={"name": model.name, "state": model.state})

    def drop(cursor: Any) -> None:
        for table, _, prefix in TABLES:
            _drop_side_storage(cursor, table, prefix)
        model.delete()

    _locked_ddl(drop)


def embedding_models_status() -> list[dict[str, Any]]:
    """Every registered model, newest first, with how many rows its storage holds a vector for."""
    active_model()
    out = []
    with connection.cursor() as cursor:
        for model in EmbeddingModel.objects.all():
            column = {"active": "embedding", "building": "embedding_next", "ready": "embedding_next"}.get(model.state)
            counts: dict[str, Any] = {}
            for table, kind, _ in TABLES:
                if column is None or _column_type(cursor, table, column) is None:
                    continue
                cursor.execute(f'SELECT count(*), count({column}) FROM "{table}"')  # noqa: S608
                total, with_vector = cursor.fetchone()
                counts[kind] = {"total": total, "with_vector": with_vector}
            out.append({"name": model.name, "provider": model.provider, "model": model.model,
                        "dimensions": model.dimensions, "storage": model.storage, "state": model.state,
                        "registered_at": model.registered_at, "activated_at": model.activated_at,
                        "rows": counts})
    return out


def store_new_vectors_as_configured(db: Any = connection) -> str | None:
    """Give the active ``embedding`` columns the configured storage (EMBEDDING's STORAGE, else
    DEFAULT_STORAGE) while both tables are empty, with their HNSW indexes and the registry's
    active row to match (migration 0018). Returns the storage the columns hold afterwards, or
    None when they hold rows and another storage: rewriting every vector and index under a lock
    is not a migration's job; the registry moves them without downtime (docs/embeddings.md)."""
    with db.cursor() as cursor:
        columns = [(table, prefix, _column_type(cursor, table, "embedding")) for table, _, prefix in TABLES]
        if any(column is None or column[1] <= 0 for _, _, column in columns):
            return None
        dimensions = max(column[1] for _, _, column in columns if column)
        storage = storage_for(dimensions, storage=engine_settings.EMBEDDING.get("STORAGE"))
        moves = [(table, prefix, column[1]) for table, prefix, column in columns if column and column[0] != storage]
        if moves:
            cursor.execute(" UNION ALL ".join(f'(SELECT 1 FROM "{table}" LIMIT 1)' for table, _, _ in columns))
            if cursor.fetchone():
                logger.warning("The embedding columns hold rows, so they stay as they are rather than move to "
                               "%s: move them with `manage.py memory_engine_embedding_model` (docs/embeddings.md).",
                               storage)
                return None
        for table, prefix, column_dimensions in moves:
            cursor.execute(f'DROP INDEX IF EXISTS "me_{prefix}_embedding_hnsw"')
            # The new type's default (EXTERNAL) replaces the column's storage: inline again (0003).
            cursor.execute(f'ALTER TABLE "{table}" ALTER COLUMN embedding TYPE {storage}({column_dimensions}) '
                           f"USING embedding::{storage}({column_dimensions}), ALTER COLUMN embedding SET STORAGE MAIN")
            cursor.execute(hnsw_index_sql(table, f"me_{prefix}_embedding_hnsw", "embedding", storage))
        cursor.execute("UPDATE memory_engine_embeddingmodel SET storage = %s WHERE state = 'active'", [storage])
        return storage


__all__ = [
    "BuildReport",
    "DEFAULT_STORAGE",
    "STORAGE_LIMITS",
    "SwitchReport",
    "active_model",
    "bootstrap_active_model",
    "embedding_model_build",
    "embedding_model_discard",
    "embedding_model_register",
    "embedding_model_switch",
    "embedding_models_status",
    "hnsw_index_sql",
    "next_model",
    "storage_for",
    "store_new_vectors_as_configured",
]
