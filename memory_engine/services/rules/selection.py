"""Which rules a completed generation fires, and the loop prevention that keeps a rule
handler's own turns (and their descendants) from firing rules."""

from __future__ import annotations

from functools import partial
from typing import Any

from django.db import transaction
from django.db.models import Exists, OuterRef
from django.db.models.fields.json import KT

from memory_engine.models import Generation, MemoryRule
from memory_engine.models.agents import GenerationStatus

from .ledger import enqueue_rule_firing

#: How far :func:`fires_rules` follows ``initiator`` links.
MAX_INITIATOR_DEPTH = 32


def _project_rules(*, project_id: str, agent_id: str) -> list[dict[str, Any]]:
    """Every rule of the project in one query: whether it selects ``agent_id`` and which
    agent handles it (``handler_config.agent_id``)."""
    through = MemoryRule.source_agents.through
    return list(
        MemoryRule.objects.filter(project_id=project_id)
        .annotate(
            handler_agent=KT("handler_config__agent_id"),
            selects_agent=Exists(through.objects.filter(project_id=project_id, memoryrule_id=OuterRef("pk"),
                                                        agent_id=agent_id)),
            has_agents=Exists(through.objects.filter(project_id=project_id, memoryrule_id=OuterRef("pk"))),
        )
        .order_by("created_at", "id")
        .values("id", "enabled", "on", "handler_agent", "selects_agent", "has_agents")
    )


def handler_agent_ids(*, project_id: str) -> set[str]:
    """Agents that handle a rule of the project (named in a rule's ``handler_config.agent_id``)."""
    return {r["handler_agent"] for r in _project_rules(project_id=project_id, agent_id="") if r["handler_agent"]}


def fires_rules(generation: Generation, *, handler_agents: set[str] | None = None) -> bool:
    """False for a rule handler's generation, a handler agent's generation, or any
    generation initiated (directly or further up) by one."""
    if handler_agents is None:
        handler_agents = handler_agent_ids(project_id=generation.project_id)
    current: Generation | None = generation
    seen: set[str] = set()
    for _ in range(MAX_INITIATOR_DEPTH):
        if current is None or current.pk in seen:
            return True
        if current.started_by_rule_id or current.agent_id in handler_agents:
            return False
        seen.add(current.pk)
        if current.initiator_id is None:
            return True
        current = Generation.objects.only("id", "agent_id", "initiator_id", "started_by_rule_id").filter(
            project_id=generation.project_id, pk=current.initiator_id
        ).first()
    return False  # an implausibly deep chain: refuse rather than risk a loop


def matching_rule_ids(*, generation: Generation) -> list[str]:
    """Enabled ``generation.completed`` rules of the generation's project that select its
    agent (no source agents = every agent); none when the generation must not fire.

    One query for the rules (the completion request waits for it), plus one per
    ``initiator`` hop when the generation has an initiator.
    """
    if generation.status != GenerationStatus.COMPLETED:
        return []
    rules = _project_rules(project_id=generation.project_id, agent_id=generation.agent_id)
    handler_agents = {r["handler_agent"] for r in rules if r["handler_agent"]}
    if not fires_rules(generation, handler_agents=handler_agents):
        return []
    return [
        r["id"] for r in rules
        if r["enabled"] and r["on"] == MemoryRule.On.GENERATION_COMPLETED
        and (r["selects_agent"] or not r["has_agents"])
    ]


def enqueue_memory_rules(sender: Any, *, generation_id: str, project_id: str | None = None, **kwargs: Any) -> None:
    """``generation_completed`` receiver: one task per matching rule, enqueued on commit."""
    generations = Generation.objects.filter(pk=generation_id)
    if project_id is not None:
        generations = generations.filter(project_id=project_id)
    generation = generations.only(
        "id", "project_id", "agent_id", "status", "initiator_id", "started_by_rule_id"
    ).first()
    if generation is None:
        return
    for rule_id in matching_rule_ids(generation=generation):
        # robust: one failed enqueue is logged and does not keep the other rules from firing
        transaction.on_commit(partial(enqueue_rule_firing, project_id=generation.project_id, rule_id=rule_id,
                                      generation_id=generation_id), robust=True)
