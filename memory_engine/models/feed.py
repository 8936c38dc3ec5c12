"""The change feed: one row per change a reader of ``GET /api/v1/feed`` can follow.

Rows are written only by database triggers (migration 0010), in the transaction that made the
change, so no write path can miss its entry and an aborted write leaves none. See docs/feed.md.
"""

from __future__ import annotations

from django.db import models

from .tenancy import ProjectRow


class FeedKind(models.TextChoices):
    MEMORY = "memory"
    DOCUMENT_VERSION = "document_version"
    ASSERTION = "assertion"


class FeedEntry(ProjectRow, models.Model):
    """A change, positioned by ``(txid, seq)``: ``txid`` is the writing transaction's id
    (``pg_current_xact_id()``), ``seq`` the insert order. A reader only reads rows whose
    transaction is older than every transaction still running, so a later commit can never
    land behind a position it has already passed."""

    seq = models.BigAutoField(primary_key=True)
    txid = models.BigIntegerField()
    project = models.ForeignKey("memory_engine.Project", on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=20, choices=FeedKind.choices)
    object_id = models.CharField(max_length=40)
    store_id = models.CharField(max_length=40, null=True, blank=True)  # noqa: DJ001
    document_id = models.CharField(max_length=40, null=True, blank=True)  # noqa: DJ001
    memory_id = models.CharField(max_length=40, null=True, blank=True)  # noqa: DJ001
    # an assertion's outcome, a version's status ("active"), "live" for a memory
    state = models.CharField(max_length=20)
    principal = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["txid", "seq"]
        indexes = [models.Index(fields=["project", "txid", "seq"], name="me_feed_position")]
        verbose_name_plural = "feed entries"

    def __str__(self) -> str:
        return f"{self.kind} {self.object_id} ({self.state})"
