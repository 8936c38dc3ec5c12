"""Evidence links: one memory or document version supports or contradicts another.

A link is directed: its ``source`` is the evidence, its ``target`` the claim it bears on.
Search counts, for a hit, the live sources linked to it (memory_engine.selectors.search.boosts,
SEARCH_CORROBORATION); both ends belong to the link's project (services.links checks it).
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from memory_engine.ids import PublicIdField

from .documents import DocumentVersion
from .memories import Memory
from .tenancy import Project, ProjectRow


class EvidenceLink(ProjectRow, models.Model):
    """``source`` supports or contradicts ``target``; each end is a memory or a document version.

    Deleting either end (a purge, an erasure, a version's document deleted) deletes the link."""

    class Kind(models.TextChoices):
        SUPPORTS = "supports"
        CONTRADICTS = "contradicts"

    id = PublicIdField(prefix="lnk")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="evidence_links")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    source_memory = models.ForeignKey(Memory, null=True, blank=True, on_delete=models.CASCADE,
                                      related_name="links_out", db_constraint=False)
    source_version = models.ForeignKey(DocumentVersion, null=True, blank=True, on_delete=models.CASCADE,
                                       related_name="links_out", db_constraint=False)
    target_memory = models.ForeignKey(Memory, null=True, blank=True, on_delete=models.CASCADE,
                                      related_name="links_in", db_constraint=False)
    target_version = models.ForeignKey(DocumentVersion, null=True, blank=True, on_delete=models.CASCADE,
                                       related_name="links_in", db_constraint=False)
    created_by = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(source_memory__isnull=True) ^ models.Q(source_version__isnull=True),
                name="me_link_one_source"),
            models.CheckConstraint(
                condition=models.Q(target_memory__isnull=True) ^ models.Q(target_version__isnull=True),
                name="me_link_one_target"),
            models.UniqueConstraint(
                fields=["kind", "source_memory", "source_version", "target_memory", "target_version", "project"],
                nulls_distinct=False, name="me_link_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.source_id} {self.kind} {self.target_id}"

    @property
    def source_id(self) -> str:
        return str(self.source_memory_id or self.source_version_id)

    @property
    def target_id(self) -> str:
        return str(self.target_memory_id or self.target_version_id)
