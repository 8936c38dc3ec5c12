"""Tools an agent can call: ``agent_write_memory`` behind the ``write_memory`` tool."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from memory_engine.access import ADD, Grants
from memory_engine.exceptions import GenerationAgentMismatch, GenerationNotFound, GrantRequired, NoWriteMemoryStore
from memory_engine.models import Agent, Generation, MemoryStore
from memory_engine.models.memories import Mechanism, SourceType
from memory_engine.services.access import access_tags_write
from memory_engine.services.memory_write import WriteResult, memory_write
from memory_engine.services.stores import subject_store_get_or_create


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
    subject: str | None = None,
    pinned_facet: str | None = None,
    grants: Grants | None = None,
    owner: str | None = None,
) -> WriteResult:
    """Write a fact (mechanism ``tool``) on the store's thresholds: into the agent's write store,
    or with ``subject`` (set by the host) into that end user's store (found or created; the
    memory is then one of the user's memories for this agent, ``user_for_agent`` in recall).
    ``pinned_facet`` (set by the host) replaces the model's ``facet``. ``generation_id`` names the
    turn the tool was called in and must be one of this agent's generations. The memory records
    the agent that wrote it.

    ``grants`` are the caller's (docs/security.md, *Access inside a project*): without ``add`` on
    the target store the call answers 403 GRANT_REQUIRED and writes nothing. A subject store created
    here gets the caller's ``owner`` tag, as on ``GET /subjects/{id}/memory-store``."""
    if pinned_facet:
        facet = pinned_facet
    store: MemoryStore | None = agent.write_memory_store
    if subject is not None:
        store, created = subject_store_get_or_create(project=agent.project, external_id=subject)
        if created:
            access_tags_write(obj=store, owner=owner)
    if store is None or store.project_id != agent.project_id:
        raise NoWriteMemoryStore(
            f"Agent {agent.name} has no write memory store; set its write_memory_store_id first.",
            details={"agent_id": agent.pk},
        )
    if grants is not None and not grants.allows(ADD, store.access_tags):
        raise GrantRequired(details={"action": ADD})
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
