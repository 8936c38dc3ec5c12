"""Agents registered by the host, and the generations (turns) they record."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from memory_engine.ids import PublicIdField

from .tenancy import Project, ProjectRow


class Agent(ProjectRow, models.Model):
    """The host's agent: its retrieval scope (knowledge_config) and optional write store."""

    id = PublicIdField(prefix="agt")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="agents")
    name = models.CharField(max_length=200)
    knowledge_config = models.JSONField(default=dict, blank=True)
    write_memory_store = models.ForeignKey(
        "memory_engine.MemoryStore", null=True, blank=True, on_delete=models.SET_NULL,
        related_name="writing_agents", db_constraint=False,
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="me_agent_name_unique_per_project")
        ]

    def __str__(self) -> str:
        return self.name


class GenerationStatus(models.TextChoices):
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"


class Generation(ProjectRow, models.Model):
    """One model turn of an agent. Completing it emits ``generation_completed``."""

    id = PublicIdField(prefix="gen")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="generations")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="generations", db_constraint=False)
    input_messages = models.JSONField(default=list, blank=True)
    output = models.TextField(blank=True, default="")
    status = models.CharField(
        max_length=20, choices=GenerationStatus.choices, default=GenerationStatus.RUNNING
    )
    initiator = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="initiated", db_constraint=False,
    )
    started_by_rule = models.ForeignKey(
        "memory_engine.MemoryRule", null=True, blank=True, on_delete=models.SET_NULL,
        related_name="handler_generations",
        help_text="Set when a rule handler made this generation; such generations fire no rules.", db_constraint=False,
    )
    extraction = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["project", "created_at"], name="me_generation_time")]

    def __str__(self) -> str:
        return self.id
