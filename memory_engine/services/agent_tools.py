"""Tools an agent can call: ``agent_write_memory`` behind the ``write_memory`` tool."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from memory_engine.exceptions import GenerationAgentMismatch, GenerationNotFound, NoWriteMemoryStore
from memory_engine.models import Agent, Generation
from memory_engine.models.memories import Mechanism, SourceType
from memory_engine.services.memory_write import WriteResult, memory_write


def agent_write_memory(
    *,
    agent: Agent,
    content: str,
    principal: str,
    tags: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
    about: dict[str, Any] | None = None,
    generation_id: str | None = None,
    judge: Any = None,
    kind: str | None = None,
    title: str | None = None,
    summary: str | None = None,
    confidence: float | None = None,
    facet: str | None = None,
    expires_at: datetime | None = None,
) -> WriteResult:
    """Write a fact into the agent's write store (mechanism ``tool``) on the store's
    thresholds; ``generation_id`` names the turn the tool was called in and must be
    one of this agent's generations. The memory records the agent that wrote it."""
    store = agent.write_memory_store
    if store is None or store.project_id != agent.project_id:
        raise NoWriteMemoryStore(
            f"Agent {agent.name} has no write memory store; set its write_memory_store_id first.",
            details={"agent_id": agent.pk},
        )
    if generation_id:
        generation = Generation.objects.filter(pk=generation_id, project_id=agent.project_id).first()
        if generation is None:
            raise GenerationNotFound("No generation with this id exists in your project.",
                                     details={"generation_id": generation_id})
        if generation.agent_id != agent.pk:
            raise GenerationAgentMismatch("The generation belongs to another agent.",
                                          details={"generation_id": generation_id, "agent_id": agent.pk})
    return memory_write(
        store=store,
        content=content,
        principal=principal,
        mechanism=Mechanism.TOOL,
        tags=tags,
        metadata=metadata,
        about=about,
        source_type=SourceType.CONVERSATION,
        generation_id=generation_id or None,
        judge=judge,
        kind=kind,
        title=title,
        summary=summary,
        confidence=confidence,
        facet=facet,
        expires_at=expires_at,
        agent=agent,
    )
