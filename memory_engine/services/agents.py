"""Agents: the host's registered agents, their retrieval scope, optional write store and their
own (agent-tier) memory store, created with the agent."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from memory_engine.exceptions import UnknownScope
from memory_engine.knowledge_config import normalize_knowledge_config
from memory_engine.models import Agent, Document, MemoryStore, Project
from memory_engine.models.memories import Tier

from .stores import agent_store_create, allow_ledger_erasure, check_name_free

UNSET: Any = object()


def validate_agent_scope(*, project: Project, knowledge_config: dict[str, Any],
                         write_memory_store_id: str | None) -> None:
    """Every id the agent names must exist in its project: else one UNKNOWN_SCOPE naming them."""
    unknown: dict[str, list[str]] = {}
    store_ids = list(knowledge_config.get("memory_store_ids") or [])
    found = set(MemoryStore.objects.filter(project=project, pk__in=store_ids + [write_memory_store_id or ""])
                .values_list("pk", flat=True))
    if missing := [i for i in store_ids if i not in found]:
        unknown["memory_store_ids"] = missing
    if write_memory_store_id and write_memory_store_id not in found:
        unknown["write_memory_store_id"] = [write_memory_store_id]
    doc_ids = list(knowledge_config.get("document_ids") or [])
    if doc_ids:
        docs = set(Document.objects.filter(project=project, pk__in=doc_ids).values_list("pk", flat=True))
        if missing := [i for i in doc_ids if i not in docs]:
            unknown["document_ids"] = missing
    if unknown:
        names = ", ".join(i for ids in unknown.values() for i in ids)
        raise UnknownScope(f"Not found in your project: {names}.", details=unknown)


def _split_write_store(config: dict[str, Any], write_memory_store_id: Any) -> tuple[dict[str, Any], Any]:
    """``knowledge_config.write_memory_store_id`` is accepted as an alias of the top-level field."""
    alias = config.pop("write_memory_store_id", None)
    if write_memory_store_id is UNSET and alias is not None:
        return config, alias
    return config, write_memory_store_id


@transaction.atomic
def agent_create(*, project: Project, name: str, knowledge_config: dict[str, Any] | None = None,
                 write_memory_store_id: str | None = None) -> Agent:
    config, store_id = _split_write_store(normalize_knowledge_config(knowledge_config), write_memory_store_id)
    store_id = None if store_id is UNSET else store_id
    validate_agent_scope(project=project, knowledge_config=config, write_memory_store_id=store_id)
    check_name_free(Agent.objects.filter(project=project), name, label="An agent")
    agent = Agent.objects.create(project=project, name=name, knowledge_config=config,
                                 write_memory_store_id=store_id or None)
    # Its own store joins every recall as this agent; writes still go to write_memory_store
    # (the host may point it at the own store), so no agent gains a write_memory tool unasked.
    agent_store_create(agent=agent)
    return agent


@transaction.atomic
def agent_update(*, agent: Agent, name: str | None = None, knowledge_config: Any = UNSET,
                 write_memory_store_id: Any = UNSET) -> Agent:
    config = agent.knowledge_config if knowledge_config is UNSET else normalize_knowledge_config(knowledge_config)
    config, store_id = _split_write_store(dict(config), write_memory_store_id)
    store_id = agent.write_memory_store_id if store_id is UNSET else store_id
    validate_agent_scope(project=agent.project, knowledge_config=config, write_memory_store_id=store_id)
    if name is not None:
        check_name_free(Agent.objects.filter(project=agent.project).exclude(pk=agent.pk), name, label="An agent")
        _rename_own_store(agent, name)
        agent.name = name
    agent.knowledge_config = config
    agent.write_memory_store_id = store_id or None
    agent.save()
    return agent


@transaction.atomic
def agent_delete(*, agent: Agent) -> None:
    """Delete an agent with its own store, that store's memories and their ledger rows (as
    memory_store_delete erases a store)."""
    allow_ledger_erasure()
    agent.delete()


def _rename_own_store(agent: Agent, name: str) -> None:
    """The own store follows a rename while it carries the name it was given and the new one is free."""
    if name == agent.name:
        return
    new = f"agent:{name}"[:MemoryStore._meta.get_field("name").max_length]
    if MemoryStore.objects.filter(project_id=agent.project_id, name=new).exists():
        return
    MemoryStore.objects.filter(tier=Tier.AGENT, agent=agent, name=f"agent:{agent.name}").update(name=new)
