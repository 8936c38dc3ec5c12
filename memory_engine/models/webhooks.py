"""Webhooks on top of the change feed (docs/webhooks.md): a subscription per project follows the
feed from its own cursor; each POST of a batch is recorded as a delivery."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.utils import timezone

from memory_engine.ids import PublicIdField
from memory_engine.text import redact_url

from .tenancy import ProjectRow, TenantProjectField


class WebhookSubscription(ProjectRow, models.Model):
    """A URL the project's feed entries (of ``event_kinds``; empty: all) are POSTed to, signed
    with ``secret``. ``cursor`` is the feed position delivered so far: it only moves when the
    receiver acknowledged a batch (2xx), so no entry is lost or delivered twice in a row."""

    id = PublicIdField(prefix="whk")
    project = models.ForeignKey("memory_engine.Project", on_delete=models.CASCADE, related_name="webhooks")
    url = models.CharField(max_length=2000, help_text="http(s); must pass the outbound guard (OUTBOUND_ALLOW).")
    secret = models.CharField(max_length=200, editable=False)
    event_kinds = ArrayField(models.CharField(max_length=20), default=list, blank=True,
                             help_text="memory, document_version, assertion; empty: all.")
    active = models.BooleanField(default=True)
    cursor = models.CharField(max_length=100, blank=True, default="", editable=False)
    #: Failed attempts since the last delivered batch; the next one waits (backoff) until next_attempt_at.
    failures = models.PositiveIntegerField(default=0, editable=False)
    next_attempt_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_by = models.CharField(max_length=200, blank=True, default="", editable=False)
    #: The principal deliveries read the feed as (memory_engine.policy.principal_from_reference),
    #: checked again at every delivery; empty for subscriptions older than the access policy.
    acting_as = models.CharField(max_length=200, blank=True, default="", editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{redact_url(self.url)} ({self.project})"  # the query string may hold a token


class DeliveryStatus(models.TextChoices):
    DELIVERED = "delivered"
    FAILED = "failed"


class WebhookDelivery(ProjectRow, models.Model):
    """One POST of a batch: what was sent (the feed positions, how many entries), the answer and,
    after a failure, when the batch is tried again."""

    id = PublicIdField(prefix="whd")
    subscription = models.ForeignKey(
        WebhookSubscription, on_delete=models.CASCADE, related_name="deliveries", db_constraint=False,
    )
    project = TenantProjectField()
    tenant_parent = "subscription"
    status = models.CharField(max_length=20, choices=DeliveryStatus.choices)
    attempt = models.PositiveIntegerField(help_text="1 for the first try of this batch.")
    http_status = models.PositiveIntegerField(null=True, blank=True)
    event_count = models.PositiveIntegerField()
    cursor_from = models.CharField(max_length=100, blank=True, default="")
    cursor_to = models.CharField(max_length=100)
    error = models.TextField(blank=True, default="")
    next_retry_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "webhook deliveries"

    def __str__(self) -> str:
        return f"{self.status} #{self.attempt} ({self.event_count} events)"
