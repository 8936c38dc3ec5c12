"""The memory map's cache: one row per store holding each live memory's place in 2-D and the
clusters (memory_engine.services.memory_map computes it, memory_engine.selectors.memory_map serves it)."""

from __future__ import annotations

from django.db import models

from .memories import MemoryStore
from .tenancy import ProjectRow, TenantProjectField


class MemoryMapStatus(models.TextChoices):
    PENDING = "pending"  # asked for, not computed yet
    READY = "ready"
    FAILED = "failed"


class MemoryMap(ProjectRow, models.Model):
    """A store's map as last computed. It keeps ids and coordinates, never a memory's text: the
    text, the title and the consent category are read from the memories at each serve, so a
    forgotten memory leaves the map at once and a point is masked by its category of now."""

    store = models.OneToOneField(
        MemoryStore, on_delete=models.CASCADE, primary_key=True, related_name="memory_map", db_constraint=False,
    )
    project = TenantProjectField()
    tenant_parent = "store"
    status = models.CharField(max_length=10, choices=MemoryMapStatus.choices, default=MemoryMapStatus.PENDING)
    #: ``[[memory_id, x, y, cluster], ...]``; x and y in [-1, 1]
    points = models.JSONField(default=list, blank=True)
    #: ``[{"id": int, "label": str}, ...]``
    clusters = models.JSONField(default=list, blank=True)
    #: how it was computed: projection, explained variance, k
    method = models.JSONField(default=dict, blank=True)
    #: the store's live memories when it was computed (staleness is measured against it)
    live_memories = models.PositiveIntegerField(default=0)
    requested_at = models.DateTimeField(null=True, blank=True, help_text="When a computation was last enqueued.")
    computed_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True, default="")

    def __str__(self) -> str:
        return f"map of {self.store_id} ({self.status})"
