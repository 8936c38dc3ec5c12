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
    (``pg_current_xact_id()``) above the project's era (:class:`FeedClock`), ``seq`` the insert
    order. A reader only reads rows whose transaction is older than every transaction still
    running, so a later commit can never land behind a position it has already passed."""

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


#: A transaction id stays below 2**48 (2**48 transactions: 89 years at 100,000 a second); the
#: bits above it hold the project's era.
ERA_SHIFT = 48


class FeedClock(ProjectRow, models.Model):
    """Where a project's feed positions come from: the database server (``node``, its
    ``system_identifier``) whose transaction ids they hold, and the era they are counted in.

    Transaction ids belong to one server. When a project's rows move to another (a Citus shard
    move, or a dump restored into a new server), the first feed entry written there finds the
    clock naming another server and starts the next era: its position is ``era << 48`` above
    the new server's transaction id, so it sorts after every entry of the last era whatever the
    two servers' counters are. Written only by the feed triggers (migration 0035)."""

    project = models.OneToOneField("memory_engine.Project", on_delete=models.CASCADE, primary_key=True,
                                   related_name="+")
    era = models.IntegerField(default=0)
    node = models.BigIntegerField(help_text="The system_identifier of the server whose transaction ids "
                                            "the era's positions hold.")

    def __str__(self) -> str:
        return f"{self.project_id}: era {self.era} on {self.node}"
