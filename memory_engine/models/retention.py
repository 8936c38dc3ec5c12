"""Retention classes and the receipts of subject erasures (docs/retention.md)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from memory_engine.ids import PublicIdField

from .tenancy import Project


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


class ErasureReceipt(models.Model):
    """Proof of one subject erasure: what was removed per table, the removed rows' ids and a
    sha256 over the removed content. It holds no erased text: the selector is kept only as a
    sha256 (``selector_sha256``) so the receipt itself does not name the subject."""

    id = PublicIdField(prefix="erc")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="erasure_receipts")
    selector_kind = models.CharField(max_length=50, help_text="subject_external_id, tags or both (+).")
    selector_sha256 = models.CharField(max_length=64, help_text="sha256 of the selector's canonical JSON.")
    counts = models.JSONField(default=dict, help_text="Rows removed (or redacted) per table.")
    ids = models.JSONField(default=dict, help_text="The removed rows' ids per table.")
    sha256 = models.CharField(max_length=64, help_text="sha256 over the removed rows (table, id, content).")
    principal = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.id} ({sum(self.counts.values())} rows)"
