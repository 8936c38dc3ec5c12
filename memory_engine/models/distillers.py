"""Resident distillers (docs/distillers.md): a distiller follows the change feed of its project
from its own cursor and writes the claims the configured LLM reads out of each new live document
version in its scope into its memory store, through the write funnel."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from memory_engine.ids import PublicIdField

from .tenancy import Project, ProjectRow


class Distiller(ProjectRow, models.Model):
    id = PublicIdField(prefix="dst")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="distillers")
    store = models.ForeignKey("memory_engine.MemoryStore", on_delete=models.CASCADE, related_name="distillers",
                              help_text="Where its claims are written.", db_constraint=False)
    document_paths = models.JSONField(default=list, blank=True, help_text="Path prefixes; empty: every document.")
    tags = models.JSONField(default=dict, blank=True, help_text="Only documents whose tags contain these.")
    prompt = models.TextField(blank=True, default="", help_text="Empty: the built-in prompt.")
    enabled = models.BooleanField(default=True)
    #: The feed position read so far (selectors.feed.encode_position: kept server-side, shown to a
    #: client sealed); "" from the start.
    cursor = models.CharField(max_length=100, blank=True, default="")
    #: The principal it acts as (memory_engine.policy.principal_from_reference), checked at every tick.
    acting_as = models.CharField(max_length=200, blank=True, default="")
    #: A tick holds the distiller until then (renewed after each version); a tick whose worker
    #: died is taken over once it has run out.
    leased_until = models.DateTimeField(null=True, blank=True)
    created_by = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"distiller {self.id} -> {self.store_id}"


class DistillerVersion(ProjectRow, models.Model):
    """One document version a distiller has read: done once, so a tick that died resumes where it
    stopped and a tick with nothing new writes nothing."""

    class Status(models.TextChoices):
        DONE = "done"
        FAILED = "failed"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    distiller = models.ForeignKey(Distiller, on_delete=models.CASCADE, related_name="versions", db_constraint=False)
    version = models.ForeignKey(
        "memory_engine.DocumentVersion", on_delete=models.CASCADE, related_name="+", db_constraint=False,
    )
    status = models.CharField(max_length=10, choices=Status.choices)
    counts = models.JSONField(default=dict, blank=True)
    error = models.JSONField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=1)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["distiller", "version", "project"], name="me_distiller_version_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.distiller_id}: {self.version_id} {self.status}"


class DistillerRun(ProjectRow, models.Model):
    """One tick: what it read and wrote (``versions, claims, created, superseded, skipped, failed``)."""

    id = PublicIdField(prefix="dsr")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    distiller = models.ForeignKey(Distiller, on_delete=models.CASCADE, related_name="runs", db_constraint=False)
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    counts = models.JSONField(default=dict, blank=True)
    errors = models.JSONField(default=list, blank=True, help_text="[{version_id, code, message}]")

    class Meta:
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        return f"{self.distiller_id} at {self.started_at:%Y-%m-%d %H:%M}"
