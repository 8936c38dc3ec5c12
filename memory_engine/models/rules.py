"""Memory rules: what to extract into a store when a generation completes."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from memory_engine.ids import PublicIdField

from .tenancy import ProjectRow, TenantProjectField


class MemoryRule(ProjectRow, models.Model):
    """On ``generation.completed``, run a handler and write its facts through the funnel."""

    class On(models.TextChoices):
        GENERATION_COMPLETED = "generation.completed"

    class HandlerType(models.TextChoices):
        BUILTIN = "builtin"
        CALLABLE = "callable"
        HTTP = "http"

    id = PublicIdField(prefix="mr")
    store = models.ForeignKey(
        "memory_engine.MemoryStore", on_delete=models.CASCADE, related_name="rules", db_constraint=False,
    )
    project = TenantProjectField()
    tenant_parent = "store"
    on = models.CharField(max_length=40, choices=On.choices, default=On.GENERATION_COMPLETED)
    source_agents = models.ManyToManyField(
        "memory_engine.Agent", blank=True, related_name="memory_rules", through="memory_engine.MemoryRuleAgent",
        help_text="Empty means every agent of the project.",
    )
    enabled = models.BooleanField(default=True)
    handler_type = models.CharField(max_length=20, choices=HandlerType.choices, default=HandlerType.BUILTIN)
    handler_config = models.JSONField(
        default=dict, blank=True,
        help_text="builtin: prompt, model, provider overrides; callable: path; http: url, secret.",
    )
    #: The principal the rule acts as (memory_engine.policy.principal_from_reference): whoever
    #: created or last changed it; its grants are checked again at every firing. Empty for rules
    #: older than the access policy (they act as the system).
    acting_as = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at"]

    def __str__(self) -> str:
        return f"{self.handler_type} rule on {self.store}"


class MemoryRuleAgent(ProjectRow, models.Model):
    """A source agent of a rule (its own table, so the row carries its project: docs/scaling.md)."""

    memoryrule = models.ForeignKey(MemoryRule, on_delete=models.CASCADE, db_constraint=False)
    agent = models.ForeignKey("memory_engine.Agent", on_delete=models.CASCADE, db_constraint=False)
    project = TenantProjectField()
    tenant_parent = "memoryrule"

    class Meta:
        db_table = "memory_engine_memoryrule_source_agents"
        unique_together = [("memoryrule", "agent", "project")]

    def __str__(self) -> str:
        return f"{self.memoryrule_id} <- {self.agent_id}"
