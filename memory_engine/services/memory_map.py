"""The memory map (docs/memory.md, *The memory map*): computing a store's map, and deciding when.

A map places each live memory of a store that has a vector (the newest MEMORY_MAP_MAX_POINTS) in
2-D (memory_engine.projection.layout_2d) and groups them with k-means. The cached row
(:class:`~memory_engine.models.MemoryMap`) holds ids, coordinates and cluster numbers only: text,
titles, consent categories and labels are read at each serve (memory_engine.selectors.memory_map).

:func:`memory_map_request` is what a reader calls: the map as it stands, computed at once for a
store of at most MEMORY_MAP_SYNC_MAX_MEMORIES live memories that has none yet, else enqueued for
a worker (:func:`memory_map_compute`, via memory_engine.tasks). A ready map is computed again, by a
worker, once the store's live memories changed by more than MEMORY_MAP_RECOMPUTE_CHANGE of the
count it was computed from or it is older than MEMORY_MAP_MAX_AGE_MINUTES; meanwhile the old one
is served.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

import numpy as np
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from memory_engine.conf import engine_settings
from memory_engine.db import delete_in_project
from memory_engine.models import Memory, MemoryMap, MemoryMapStatus, MemoryStore
from memory_engine.models.memories import LIVE_MEMORY_SQL
from memory_engine.projection import choose_k, kmeans, layout_2d
from memory_engine.queue import enqueue_memory_map_on_commit

logger = logging.getLogger("memory_engine.memory_map")

#: A computation asked for this long ago and not done is taken as lost (its worker died): the next
#: request enqueues another.
REQUEST_TIMEOUT = timedelta(minutes=10)

#: The newest live memories of a store that have a vector, with it (as text: parsed by numpy).
PLACED_SQL = f"""
SELECT m.id, c.embedding::text FROM memory_engine_memory m
JOIN memory_engine_memorycontent c ON c.id = m.content_id
WHERE m.store_id = %(store)s AND {LIVE_MEMORY_SQL} AND c.embedding IS NOT NULL
ORDER BY m.created_at DESC, m.id DESC LIMIT %(limit)s"""


def live_memories(store: MemoryStore) -> int:
    return Memory.objects.live().filter(store=store).count()


def memory_map_compute(*, store_id: str) -> MemoryMap | None:
    """Compute and store the map of ``store_id`` (None when the store is gone). A failure is
    stored on the row (status ``failed``) and logged; the next request tries again."""
    store = MemoryStore.objects.filter(pk=store_id).first()
    if store is None:
        return None
    try:
        return _compute(store)
    except Exception as exc:  # a map is a view: a failure must never escape into a request or a worker loop
        logger.exception("memory map of store %s failed", store_id)
        MemoryMap.objects.update_or_create(store=store, defaults={
            "project_id": store.project_id, "status": MemoryMapStatus.FAILED, "error": str(exc)[:2000]})
        return MemoryMap.objects.get(store=store)


def _compute(store: MemoryStore) -> MemoryMap:
    started = timezone.now()
    live = live_memories(store)
    with connection.cursor() as cursor:
        cursor.execute(PLACED_SQL, {"store": store.pk, "limit": engine_settings.MEMORY_MAP_MAX_POINTS})
        rows = cursor.fetchall()
    rows.reverse()  # oldest first: the layout's input order is fixed by the data, not the query plan
    ids = [memory_id for memory_id, _ in rows]
    vectors = (np.array([text.strip("[]").split(",") for _, text in rows], dtype=np.float32)
               if rows else np.zeros((0, 0)))
    coords, method = layout_2d(vectors)
    clusters = kmeans(vectors, choose_k(len(ids)))
    count = int(clusters.max()) + 1 if len(ids) else 0
    method = {**method, "clusters": count, "seconds": round((timezone.now() - started).total_seconds(), 3)}
    points = [[memory_id, round(float(x), 4), round(float(y), 4), int(cluster)]
              for memory_id, (x, y), cluster in zip(ids, coords, clusters, strict=True)]
    MemoryMap.objects.update_or_create(store=store, defaults={
        "project_id": store.project_id, "status": MemoryMapStatus.READY, "points": points,
        "clusters": [{"id": index} for index in range(count)], "method": method,
        "live_memories": live, "computed_at": timezone.now(), "error": ""})
    logger.info("memory map of store %s: %d points, %d clusters in %.2fs", store.pk, len(points), count,
                method["seconds"])
    return MemoryMap.objects.get(store=store)


def is_stale(found: MemoryMap, live: int, now: datetime) -> bool:
    """Whether a ready map should be computed again (module docstring)."""
    if found.computed_at is None:
        return True
    if now - found.computed_at > timedelta(minutes=engine_settings.MEMORY_MAP_MAX_AGE_MINUTES):
        return True
    return abs(live - found.live_memories) > engine_settings.MEMORY_MAP_RECOMPUTE_CHANGE * max(found.live_memories, 1)


def recomputing(found: MemoryMap) -> bool:
    """Whether a computation was asked for after the map was last computed."""
    return found.requested_at is not None and (found.computed_at is None or found.requested_at > found.computed_at)


def _request(found: MemoryMap, now: datetime) -> None:
    """Enqueue a computation unless one asked for recently is still on its way."""
    if recomputing(found) and found.requested_at is not None and now - found.requested_at < REQUEST_TIMEOUT:
        return
    MemoryMap.objects.filter(pk=found.pk).update(requested_at=now)
    found.requested_at = now
    enqueue_memory_map_on_commit(found.pk)


def memory_map_request(*, store: MemoryStore) -> MemoryMap:
    """The store's map to serve: ready (maybe being computed again), or pending while a worker
    computes the first one (module docstring)."""
    now = timezone.now()
    live = live_memories(store)
    found = MemoryMap.objects.filter(store=store).first()
    ready = found is not None and found.status == MemoryMapStatus.READY
    if not ready and live <= engine_settings.MEMORY_MAP_SYNC_MAX_MEMORIES:
        computed = memory_map_compute(store_id=store.pk)
        assert computed is not None
        return computed
    if found is None:
        try:
            with transaction.atomic():
                found = MemoryMap.objects.create(store=store, project_id=store.project_id)
        except IntegrityError:  # another request made it first
            found = MemoryMap.objects.get(store=store)
    if found.status != MemoryMapStatus.READY or is_stale(found, live, now):
        _request(found, now)
    return found


def memory_maps_drop(*, project_id: str, store_ids: list[str]) -> int:
    """Delete the cached maps of these stores (an erasure: their coordinates came from erased
    vectors); the next request computes them again. Returns how many were deleted."""
    return delete_in_project(MemoryMap.objects.filter(store_id__in=store_ids), project_id)[0]


__all__ = ["is_stale", "live_memories", "memory_map_compute", "memory_map_request", "memory_maps_drop",
           "recomputing"]
