"""Serving a memory map (docs/memory.md, *The memory map*): the cached places joined with the
memories as they are now, masked.

Every serve reads the memories named by the cached points: a memory no longer live (forgotten,
superseded, expired, erased) leaves the map at once; a point's text, title and consent category
are today's. A point of a sensitive category (memory_engine.consent_categories.SENSITIVE: location,
identity, health) is masked whoever asks, superusers and the admin included: it keeps its place,
its cluster and its category, and carries no id, no title and no text, so it cannot be opened.
Cluster labels are made here from the titles and previews of the unmasked points only, so no
label repeats a word of a masked memory. A memory whose text reads as instructions to an AI keeps
its point without title or text (``withheld``), as lists leave it out.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from memory_engine.conf import engine_settings
from memory_engine.consent_categories import is_sensitive
from memory_engine.models import Memory, MemoryMap, MemoryMapStatus
from memory_engine.projection import cluster_labels

from .memories import drop_instruction_memories

#: Characters of a memory's text a point shows.
PREVIEW_CHARS = 160


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[:PREVIEW_CHARS - 1].rstrip() + "…"


def memory_map_points(found: MemoryMap) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(points, clusters)`` of a ready map as they are served (module docstring)."""
    cached = {memory_id: (x, y, cluster) for memory_id, x, y, cluster in found.points}
    memories = list(Memory.objects.live().filter(store_id=found.store_id, pk__in=list(cached))
                    .select_related("content", "store")
                    .only("id", "title", "tags", "metadata", "consent_category", "store_id", "store__tier",
                          "content_id", "content__text", "guard", "content__guard"))
    kept = {memory.pk for memory in drop_instruction_memories(memories, path="map")}
    by_id = {memory.pk: memory for memory in memories}
    points: list[dict[str, Any]] = []
    texts: dict[int, list[str]] = defaultdict(list)
    sizes: dict[int, int] = defaultdict(int)
    for memory_id, (x, y, cluster) in cached.items():  # the cached (oldest first) order
        memory = by_id.get(memory_id)
        if memory is None:
            continue
        sizes[cluster] += 1
        point: dict[str, Any] = {"x": x, "y": y, "cluster": cluster, "consent_category": memory.consent_category}
        if is_sensitive(memory.consent_category):
            point["masked"] = True
        elif memory_id not in kept:
            point.update(masked=False, withheld=True, id=memory_id)
        else:
            preview = _preview(memory.content.text)
            point.update(masked=False, id=memory_id, title=memory.title, text_preview=preview)
            texts[cluster].append(f"{memory.title} {preview}")
        points.append(point)
    labels = cluster_labels({cluster["id"]: texts.get(cluster["id"], []) for cluster in found.clusters})
    clusters = [{"id": cluster["id"], "label": labels.get(cluster["id"], ""), "size": sizes.get(cluster["id"], 0)}
                for cluster in found.clusters]
    return points, clusters


def memory_map_answer(found: MemoryMap, *, stale: bool) -> dict[str, Any]:
    """The map as the API answers it (MemoryMapSerializer): ready, or pending/failed without points."""
    answer: dict[str, Any] = {"memory_store_id": found.store_id, "status": found.status,
                              "computed_at": found.computed_at, "requested_at": found.requested_at}
    if found.status != MemoryMapStatus.READY:
        return answer
    points, clusters = memory_map_points(found)
    placed = len(found.points)
    answer.update(
        stale=stale,
        truncated=found.live_memories > placed and placed >= engine_settings.MEMORY_MAP_MAX_POINTS,
        unplaced=max(found.live_memories - placed, 0),
        method=found.method, points=points, clusters=clusters,
    )
    return answer


__all__ = ["PREVIEW_CHARS", "memory_map_answer", "memory_map_points"]
