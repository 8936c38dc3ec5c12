"""The embedding-model registry: which model made the vectors search reads, and the next one.

Exactly one row is ``active``: its vectors live in the ``embedding`` columns of memory contents
and document chunks. A registered model gets side storage (``embedding_next`` on both tables)
that ``memory_engine.services.embedding_models`` fills while the active model keeps serving,
then one switch swaps the columns (docs/embeddings.md).
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone


class EmbeddingModel(models.Model):
    """One embedding model: how to reach it (a name in settings), its probed dimension and storage."""

    class State(models.TextChoices):
        BUILDING = "building", "building"   # side storage exists; vectors are being filled
        READY = "ready", "ready"            # every row has a vector in the side storage
        ACTIVE = "active", "active"         # its vectors are the ones search reads
        RETIRED = "retired", "retired"      # was active; its vectors are gone

    class Storage(models.TextChoices):
        VECTOR = "vector", "vector"     # up to 2,000 dimensions (HNSW's limit)
        HALFVEC = "halfvec", "halfvec"  # up to 4,000 (half precision)

    #: The key in MEMORY_ENGINE["EMBEDDING_MODELS"], or "EMBEDDING" for the main setting.
    name = models.CharField(max_length=100)
    provider = models.CharField(max_length=300)
    model = models.CharField(max_length=200)
    dimensions = models.PositiveIntegerField()
    storage = models.CharField(max_length=10, choices=Storage.choices, default=Storage.HALFVEC)
    state = models.CharField(max_length=10, choices=State.choices, default=State.BUILDING)
    registered_by = models.CharField(max_length=200, blank=True, default="")
    registered_at = models.DateTimeField(default=timezone.now)
    built_at = models.DateTimeField(null=True, blank=True)
    activated_at = models.DateTimeField(null=True, blank=True)
    retired_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-registered_at"]
        constraints = [
            models.UniqueConstraint(fields=["state"], condition=Q(state="active"),
                                    name="me_embedding_model_one_active"),
        ]

    def __str__(self) -> str:
        return f"{self.model} ({self.dimensions} {self.storage}, {self.state})"
