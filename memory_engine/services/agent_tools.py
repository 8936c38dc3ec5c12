"""Tools an agent can call: ``agent_write_memory`` behind the ``write_memory`` tool."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from memory_engine.exceptions import (
    GenerationAgentMismatch,
    GenerationNotFound,
    NotFound,
    NoWriteMemoryStore,
)
from memory_engine.models import Agent, Generation, MemoryStore
from memory_engine.models.memories import Mechanism, SourceType
from memory_engine.policy import ADD, Principal, access_tags_write, require, sees
from memory_engine.services.memories import WriteResult, memory_write
from memory_engine.services.stores import subject_store_get_or_create


def agent_write_memory(
    *,
    agent: Agent,
    content: str,
    caller: Principal,
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
    subject: str | None = None,
    pinned_facet: str | None = None,
) -> WriteResult:
    """Write a fact (mechanism ``tool``) on the store's thresholds: into the agent's write store,
    or with ``subject`` (set by the host) into that end user's store (found or created; the
    memory is then one of the user's memories for this agent, ``user_for_agent`` in recall).
    ``pinned_facet`` (set by the host) replaces the model's ``facet``. ``generation_id`` names the
    turn the tool was called in and must be one of this agent's generations. The memory records
    the agent that wrote it.

    ``caller`` is who asks (REST or MCP; memory_engine.policy): a target store outside its reach
    answers 404 MEMORY_STORE_NOT_FOUND like one that does not exist, one it sees without ``add``
    403 GRANT_REQUIRED; either way nothing is written. A subject store created here gets the
    caller's owner tag, as on ``GET /subjects/{id}/memory-store``."""
    if pinned_facet:
        facet = pinned_facet
    store: MemoryStore | None = agent.write_memory_store
    if subject is not None:
        store, created = subject_store_get_or_create(project=agent.project, external_id=subject)
        if created:
            access_tags_write(obj=store, owner=caller.owner)
            store.refresh_from_db(fields=["access_tags"])
    if subject is not None and store is not None and not sees(caller, store, None):
        raise NotFound()  # another principal's subject: as GET /subjects/{id}/memory-store answers
    if store is None or store.project_id != agent.project_id or not sees(caller, store, None):
        # a write store outside the caller's reach answers like none at all
        raise NoWriteMemoryStore(
            f"Agent {agent.name} has no write memory store; set its write_memory_store_id first.",
            details={"agent_id": agent.pk},
        )
    require(caller, ADD, store)
    if type(agent).project.is_cached(agent):
        store.project = agent.project  # the same project (checked above): the quota check reads it
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
        principal=caller.label,
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
