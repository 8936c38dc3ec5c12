"""Many writes into one store at once (``POST /api/v1/memories/batch``, ``manage.py
memory_engine_import``): the funnel's decisions exactly as writing the items one by one in their
order (each sees the ones before it), in one transaction, with their texts embedded together.

Each item is checked first (a refused item writes nothing and the others go on), the texts whose
content rows hold no vector yet go to the embedder in one call, and the items are written in
order inside one transaction, each in its savepoint: an item the funnel refuses at write time
(``QUOTA_EXCEEDED``) or that fails in the database is rolled back alone and reported, and the
others commit together. Per-item errors, not all-or-nothing: an import of a thousand facts is
not lost to one bad line, and the answer says which line and why.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import DatabaseError, connection, transaction

from memory_engine.conf import engine_settings
from memory_engine.exceptions import BatchTooLarge, MemoryEngineError, WriteFailed
from memory_engine.models import MemoryStore
from memory_engine.models.memories import Mechanism

from .content import Prepared, embed_many_best_effort
from .funnel import WriteResult, write_prepared, write_request
from .validation import WriteRequest

__all__ = ["BatchOutcome", "memory_write_batch"]

logger = logging.getLogger("memory_engine.write")


@dataclass
class BatchOutcome:
    """What became of one item: its funnel result, or the error that refused it."""

    index: int
    result: WriteResult | None = None
    error: MemoryEngineError | None = None


def prepare_vectors(store: MemoryStore, requests: Sequence[WriteRequest]) -> list[Prepared]:
    """prepare_vector for many texts: one look at the store's content rows, one embedder call for
    the texts none of them holds with a vector (each distinct text once)."""
    if not requests:
        return []
    with connection.cursor() as cursor:
        cursor.execute("SELECT content_hash, embedding IS NOT NULL FROM memory_engine_memorycontent "
                       "WHERE store_id = %s AND content_hash = ANY(%s)",
                       [store.pk, list({r.digest for r in requests})])
        stored: dict[str, bool] = dict(cursor.fetchall())
    missing: dict[str, str] = {}
    for request in requests:
        if not stored.get(request.digest):
            missing.setdefault(request.digest, request.text)
    vectors = dict(zip(missing, embed_many_best_effort(list(missing.values())), strict=True))
    prepared = []
    for request in requests:
        if stored.get(request.digest):
            prepared.append(Prepared(None, {}, True))
        else:
            vector, failure = vectors[request.digest]
            prepared.append(Prepared(vector, {"embedding": failure} if failure else {}, stored.get(request.digest)))
    return prepared


def memory_write_batch(*, store: MemoryStore, items: Sequence[dict[str, Any]], principal: str,
                       mechanism: str = Mechanism.API, **common: Any) -> list[BatchOutcome]:
    """Write ``items`` (each memory_write's keyword arguments but ``store``, ``principal`` and
    ``mechanism``; ``common`` ones, such as thresholds, apply to every item) into ``store``, in
    order; one outcome per item, in the same order. 413 BATCH_TOO_LARGE over MAX_BATCH_MEMORIES."""
    limit = engine_settings.MAX_BATCH_MEMORIES
    if len(items) > limit:
        raise BatchTooLarge(f"The batch holds {len(items)} memories; the limit is {limit} (MAX_BATCH_MEMORIES).",
                            details={"items": len(items), "max_items": limit})
    outcomes = [BatchOutcome(index) for index in range(len(items))]
    checked: list[tuple[int, WriteRequest]] = []
    for index, item in enumerate(items):
        try:
            checked.append((index, write_request(store=store, principal=principal, mechanism=mechanism,
                                                 **{**common, **item})))
        except MemoryEngineError as exc:
            outcomes[index].error = exc
    ready = prepare_vectors(store, [request for _, request in checked])
    with transaction.atomic():
        for (index, request), prepared in zip(checked, ready, strict=True):
            try:
                outcomes[index].result = write_prepared(store, request, prepared)
            except MemoryEngineError as exc:  # QUOTA_EXCEEDED: this item's savepoint rolled back
                outcomes[index].error = exc
            except DatabaseError as exc:
                logger.exception("batch write: item %d failed in the database", index)
                outcomes[index].error = WriteFailed(f"{exc.__class__.__name__}: {exc}")
    return outcomes
