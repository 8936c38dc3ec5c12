"""The store lock: decisions on one store are serialized until the end of their transaction.

Every service that decides on a store's memories (the write funnel, formation, forget and
restore, retention, erasure) takes it first, so concurrent writes of the same text yield one
memory and N assertions. A write takes it in the first statement of its content upsert
(:data:`LOCK_FOR_WRITE_SQL`, memory_engine.services.memories.content.resolve_content), with the
dedup shortlist's HNSW settings for the rest of the transaction.

The project's memory quota is counted under a lock of its own (:func:`lock_memory_quota`), per
project: writes into different stores of one project hold different store locks, and each would
count the project's memories without the others' uncommitted creates.
"""

from __future__ import annotations

from typing import Any

from django.db import connection

from memory_engine.db import advisory_xact_lock
from memory_engine.selectors.dedup import HNSW_SETTINGS_SQL, hnsw_settings

__all__ = ["LOCK_FOR_WRITE_SQL", "lock_for_write_params", "lock_memory_quota", "lock_store", "lock_store_for_write"]


def _lock_key(store_id: str) -> str:
    return f"memory_engine.store:{store_id}"


def lock_store(store_id: str) -> None:
    """Serialize decisions on one store until the end of the transaction."""
    advisory_xact_lock(_lock_key(store_id))


#: lock_store, and the shortlist's HNSW settings for the rest of the transaction (an exact scan
#: ignores them): the first statement of a write's content upsert.
LOCK_FOR_WRITE_SQL = f"SELECT pg_advisory_xact_lock(hashtextextended(%(lock_key)s, 0)), {HNSW_SETTINGS_SQL}"


def lock_for_write_params(store_id: str) -> dict[str, Any]:
    """LOCK_FOR_WRITE_SQL's parameters for ``store_id``."""
    return {"lock_key": _lock_key(store_id), **hnsw_settings()}


def lock_store_for_write(store_id: str) -> None:
    """LOCK_FOR_WRITE_SQL on its own (the write funnel sends it with its content upsert)."""
    with connection.cursor() as cursor:
        cursor.execute(LOCK_FOR_WRITE_SQL, lock_for_write_params(store_id))


def lock_memory_quota(project_id: str) -> None:
    """Serialize the memory quota's count and the creates it lets through, across the project's
    stores, until the end of the transaction (a create's transaction commits before the next
    count reads). Taken after the store lock, only by a write that creates under a quota."""
    advisory_xact_lock(f"memory_engine.memory-quota:{project_id}")
