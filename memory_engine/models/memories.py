"""Memories: stores, distinct texts with their vectors, memories and the assertion ledger."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.utils import timezone

from memory_engine.exceptions import LedgerImmutable
from memory_engine.ids import PublicIdField

from .embedded import EmbeddedText, search_indexes
from .tenancy import Project


class MemoryStore(models.Model):
    """A named set of memories with its own dedup thresholds."""

    id = PublicIdField(prefix="ms")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memory_stores")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True, default="")
    tags = models.JSONField(default=dict, blank=True)
    duplicate_threshold = models.FloatField(null=True, blank=True)
    supersede_threshold = models.FloatField(null=True, blank=True)
    require_about_for_kinds = models.JSONField(
        default=list, blank=True, help_text="Memory kinds that must carry an `about` key."
    )
    judge_enabled = models.BooleanField(
        default=False, help_text="Ask the configured LLM whether near matches are the same fact."
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="me_store_name_unique_per_project")
        ]

    def __str__(self) -> str:
        return self.name


class MemoryContent(EmbeddedText):
    """One row per distinct (normalised) text per store, holding its vector."""

    id = PublicIdField(prefix="mc")
    store = models.ForeignKey(MemoryStore, on_delete=models.CASCADE, related_name="contents")
    content_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["store", "content_hash"], name="me_content_unique_per_store")
        ]
        indexes = [
            *search_indexes("content"),
            models.Index(fields=["store", "content_hash"], name="me_content_store_hash"),
        ]

    def __str__(self) -> str:
        return self.text[:80]


class SourceType(models.TextChoices):
    MANUAL = "manual"
    CONVERSATION = "conversation"
    DECLARED = "declared"


class Memory(models.Model):
    """A fact in a store. Validity lives here: superseded or forgotten memories stay readable."""

    id = PublicIdField(prefix="mem")
    store = models.ForeignKey(MemoryStore, on_delete=models.CASCADE, related_name="memories")
    content = models.ForeignKey(MemoryContent, on_delete=models.RESTRICT, related_name="memories")
    tags = models.JSONField(default=dict, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    source_type = models.CharField(max_length=20, choices=SourceType.choices, default=SourceType.MANUAL)
    # NULL, not "", is "about nothing": the me_memory_about index below covers only rows whose
    # about_key is set, and the API answers `about: null` for them.
    about_kind = models.CharField(max_length=100, null=True, blank=True)  # noqa: DJ001
    about_key = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    created_at = models.DateTimeField(default=timezone.now)
    invalidated_at = models.DateTimeField(null=True, blank=True)
    superseded_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="supersedes"
    )

    class Meta:
        ordering = ["created_at", "id"]
        verbose_name_plural = "memories"
        indexes = [
            models.Index(
                fields=["store", "created_at"],
                name="me_memory_valid_by_store",
                condition=models.Q(invalidated_at__isnull=True),
            ),
            models.Index(fields=["content"], name="me_memory_content"),
            models.Index(
                fields=["store", "about_kind", "about_key"],
                name="me_memory_about",
                condition=models.Q(invalidated_at__isnull=True, about_key__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id}: {self.content.text[:60]}"

    @property
    def is_valid(self) -> bool:
        return self.invalidated_at is None

    @property
    def text(self) -> str:
        return self.content.text


class Outcome(models.TextChoices):
    CREATED = "created"
    SUPERSEDED = "superseded"
    SKIPPED = "skipped"
    DECLARED = "declared"
    FORGOTTEN = "forgotten"
    FAILED = "failed"


class Mechanism(models.TextChoices):
    API = "api"
    TOOL = "tool"
    RULE = "rule"
    FORMATION = "formation"


class MemoryAssertion(models.Model):
    """Append-only ledger: one row per write attempt, skips included.

    A database trigger (migration 0001) rejects UPDATE and DELETE; ``save()`` refuses
    to update an existing row too.
    """

    id = PublicIdField(prefix="asr")
    store = models.ForeignKey(MemoryStore, on_delete=models.CASCADE, related_name="assertions")
    memory = models.ForeignKey(
        Memory, null=True, blank=True, on_delete=models.CASCADE, related_name="assertions",
        help_text="The memory created, kept (skip) or retired into (supersede).",
    )
    replaced_memory = models.ForeignKey(
        Memory, null=True, blank=True, on_delete=models.CASCADE, related_name="retiring_assertions",
        help_text="The memory this write retired (supersede, forget).",
    )
    content = models.TextField(help_text="The text as asserted.")
    outcome = models.CharField(max_length=20, choices=Outcome.choices)
    similarity = models.FloatField(null=True, blank=True)
    decision_reason = models.CharField(max_length=40, blank=True, default="")
    details = models.JSONField(default=dict, blank=True)
    principal = models.CharField(max_length=200)
    mechanism = models.CharField(max_length=20, choices=Mechanism.choices)
    generation = models.ForeignKey(
        "memory_engine.Generation", null=True, blank=True, on_delete=models.DO_NOTHING,
        related_name="assertions", db_constraint=False,
    )
    rule = models.ForeignKey(
        "memory_engine.MemoryRule", null=True, blank=True, on_delete=models.DO_NOTHING,
        related_name="assertions", db_constraint=False,
    )
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(fields=["store", "created_at"], name="me_assertion_store_time"),
            models.Index(fields=["memory"], name="me_assertion_memory"),
        ]

    def __str__(self) -> str:
        return f"{self.outcome}: {self.content[:60]}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise LedgerImmutable()
        super().save(*args, **kwargs)
