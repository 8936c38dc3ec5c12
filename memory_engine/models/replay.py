"""Replay: transform configs and the staged generations a replay derives from the raw capture."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from memory_engine.ids import PublicIdField

from .documents import ChunkStrategy
from .tenancy import Project, ProjectRow


class TransformConfig(ProjectRow, models.Model):
    """How a replay derives versions from raw captures: chunking, embedding, search knobs.

    Immutable once created: a change is a new row with the next ``version`` of the same
    ``name`` in the project."""

    id = PublicIdField(prefix="tc")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="transform_configs")
    name = models.CharField(max_length=100)
    version = models.PositiveIntegerField()
    # Blank strategy: each document keeps its own effective chunk settings.
    chunk_strategy = models.CharField(max_length=10, choices=ChunkStrategy.choices, blank=True, default="")
    chunk_size = models.PositiveIntegerField(null=True, blank=True)
    chunk_overlap = models.PositiveIntegerField(null=True, blank=True)
    max_chunks_per_document = models.PositiveIntegerField(null=True, blank=True)
    embedding_provider = models.CharField(max_length=300)
    embedding_model = models.CharField(max_length=200)
    search = models.JSONField(default=dict, blank=True, help_text="Ranking knobs (a JSON object).")
    created_by = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name", "version"], name="me_transform_config_version_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"


class ReplayRun(ProjectRow, models.Model):
    """One replay of the raw capture under a transform config: a staged generation.

    Its versions (status ``staged``) and their chunks (``Chunk.generation`` = this run) sit
    beside the live ones and are invisible to live search until ``promote``; after a promote
    the chunks it replaced are kept under this run until the next promote, so ``demote`` is a
    flip back."""

    class Status(models.TextChoices):
        RUNNING = "running"
        COMPLETED = "completed"
        FAILED = "failed"
        PROMOTED = "promoted"
        DEMOTED = "demoted"

    id = PublicIdField(prefix="rep")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="replay_runs")
    config = models.ForeignKey(TransformConfig, on_delete=models.CASCADE, related_name="runs", db_constraint=False)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.RUNNING, db_index=True)
    since = models.DateTimeField(null=True, blank=True)
    until = models.DateTimeField(null=True, blank=True)
    source = models.CharField(max_length=50, blank=True, default="")
    started_by = models.CharField(max_length=200, blank=True, default="")
    documents_total = models.PositiveIntegerField(default=0)
    documents_done = models.PositiveIntegerField(default=0)
    chunks_total = models.PositiveIntegerField(default=0)
    error = models.JSONField(null=True, blank=True, help_text="{code, message, details} when failed.")
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    # {document id: version id live before the promote (null: none)}: what demote restores.
    replaced_versions = models.JSONField(default=dict, blank=True)
    # The chunks this run replaced are still kept (under this run): demote can flip back.
    keeps_replaced = models.BooleanField(default=False)
    promoted_at = models.DateTimeField(null=True, blank=True)
    promoted_by = models.CharField(max_length=200, blank=True, default="")
    demoted_at = models.DateTimeField(null=True, blank=True)
    demoted_by = models.CharField(max_length=200, blank=True, default="")

    class Meta:
        ordering = ["-started_at"]

    def __str__(self) -> str:
        return f"{self.id} ({self.config}, {self.status})"
