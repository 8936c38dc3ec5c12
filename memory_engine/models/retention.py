"""Retention classes and the receipts of subject erasures (docs/retention.md)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from memory_engine.ids import PublicIdField

from .tenancy import Project, ProjectRow


class RetentionClass(models.TextChoices):
    """How long a memory or a document version is kept and whether it may be removed.

    ``durable``: until someone forgets or erases it. ``ephemeral``: until its TTL passes (the
    sweeps delete it). ``legal_hold``: never; forget, purge and erasure refuse it (409 LEGAL_HOLD)
    until an operator changes the class.
    """

    DURABLE = "durable"
    EPHEMERAL = "ephemeral"
    LEGAL_HOLD = "legal_hold"


def retention_class_field() -> models.CharField:
    return models.CharField(max_length=20, choices=RetentionClass.choices, default=RetentionClass.DURABLE)


class ErasureReceipt(ProjectRow, models.Model):
    """Proof of one subject erasure: what was removed per table, the removed rows' ids and, in
    ``sha256``, an HMAC-SHA256 over the removed content. It holds no erased text: the selector and
    the content are kept only as HMACs under a key the deployment holds (``selector_hmac``,
    memory_engine.services.erasure), so the receipt itself does not name the subject and cannot be
    reversed, or checked against a guessed text, by guessing."""

    id = PublicIdField(prefix="erc")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="erasure_receipts")
    selector_kind = models.CharField(max_length=50, help_text="subject_external_id, tags or both (+).")
    selector_hmac = models.CharField(max_length=64, blank=True, default="",
                                     help_text="HMAC-SHA256 of the selector's canonical JSON (ERASURE_RECEIPT_KEY).")
    counts = models.JSONField(default=dict, help_text="Rows removed (or redacted) per table.")
    ids = models.JSONField(default=dict, help_text="The removed rows' ids per table.")
    sha256 = models.CharField(max_length=64, help_text="sha256 over the removed rows (table, id, content).")
    principal = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.id} ({sum(self.counts.values())} rows)"


class RetentionChange(ProjectRow, models.Model):
    """The retention ledger: every change of a memory's or a document version's retention class,
    who made it and when; setting and releasing a legal hold included. Append-only: a trigger
    refuses UPDATE and DELETE (erasing the project, under the ledger's erasure switch, removes
    them). It names rows by id only, so an erasure leaves nothing of the erased text here."""

    class Kind(models.TextChoices):
        MEMORY = "memory"
        DOCUMENT_VERSION = "document_version"

    id = PublicIdField(prefix="rtc")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    object_id = models.CharField(max_length=40, help_text="The memory or document version.")
    parent_id = models.CharField(max_length=40, help_text="Its memory store or document.")
    previous_class = models.CharField(max_length=20, choices=RetentionClass.choices)
    retention_class = models.CharField(max_length=20, choices=RetentionClass.choices)
    principal = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["project", "object_id"], name="me_retention_change_object")]
        # memory_engine.policy: a staff user releases a legal hold with this permission
        permissions = [("release_legal_hold", "Can release a legal hold")]

    def __str__(self) -> str:
        return f"{self.object_id}: {self.previous_class} -> {self.retention_class}"

    @property
    def releases_hold(self) -> bool:
        return self.previous_class == RetentionClass.LEGAL_HOLD != self.retention_class
