"""Agents: the host's registered agents, their retrieval scope, optional write store and their
own (agent-tier) memory store, created with the agent."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from memory_engine.db import allow_ledger_erasure, delete_in_project
from memory_engine.exceptions import UnknownScope
from memory_engine.knowledge_config import normalize_knowledge_config
from memory_engine.models import Agent, Document, Memory, MemoryStore, Project
from memory_engine.models.memories import Tier
from memory_engine.policy import PURGE, Principal, check_legal_hold, require, visible

from .stores import agent_store_create, check_name_free

UNSET: Any = object()


def validate_agent_scope(*, project: Project, knowledge_config: dict[str, Any],
                         write_memory_store_id: str | None, caller: Principal) -> None:
    """Every id the agent names must exist in its project and be in the caller's reach (an id
    outside its grants answers like one that does not exist): else one UNKNOWN_SCOPE naming them."""
    unknown: dict[str, list[str]] = {}
    store_ids = list(knowledge_config.get("memory_store_ids") or [])
    stores = visible(caller, MemoryStore.objects.filter(project=project))
    found = set(stores.filter(pk__in=store_ids + [write_memory_store_id or ""]).values_list("pk", flat=True))
    if missing := [i for i in store_ids if i not in found]:
        unknown["memory_store_ids"] = missing
    if write_memory_store_id and write_memory_store_id not in found:
        unknown["write_memory_store_id"] = [write_memory_store_id]
    doc_ids = list(knowledge_config.get("document_ids") or [])
    if doc_ids:
        docs = set(visible(caller, Document.objects.filter(project=project, pk__in=doc_ids))
                   .values_list("pk", flat=True))
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
def agent_create(*, project: Project, name: str, caller: Principal, knowledge_config: dict[str, Any] | None = None,
                 write_memory_store_id: str | None = None) -> Agent:
    """A new agent with its own (agent-tier) store, which carries the caller's owner tag: the agent
    and its generations go with that store (memory_engine.policy)."""
    config, store_id = _split_write_store(normalize_knowledge_config(knowledge_config), write_memory_store_id)
    store_id = None if store_id is UNSET else store_id
    validate_agent_scope(project=project, knowledge_config=config, write_memory_store_id=store_id, caller=caller)
    check_name_free(Agent.objects.filter(project=project), name, label="An agent")
    agent = Agent.objects.create(project=project, name=name, knowledge_config=config,
                                 write_memory_store_id=store_id or None)
    # Its own store joins every recall as this agent; writes still go to write_memory_store
    # (the host may point it at the own store), so no agent gains a write_memory tool unasked.
    agent_store_create(agent=agent, owner=caller.owner)
    return agent


@transaction.atomic
def agent_update(*, agent: Agent, caller: Principal, name: str | None = None, knowledge_config: Any = UNSET,
                 write_memory_store_id: Any = UNSET) -> Agent:
    """Change what is given; the ids the agent names are checked against the caller's reach
    (the caller's ``add`` on the agent is the view's check)."""
    config = agent.knowledge_config if knowledge_config is UNSET else normalize_knowledge_config(knowledge_config)
    config, store_id = _split_write_store(dict(config), write_memory_store_id)
    store_id = agent.write_memory_store_id if store_id is UNSET else store_id
    if knowledge_config is not UNSET or write_memory_store_id is not UNSET:
        validate_agent_scope(project=agent.project, knowledge_config=config, write_memory_store_id=store_id,
                             caller=caller)
    if name is not None:
        check_name_free(Agent.objects.filter(project=agent.project).exclude(pk=agent.pk), name, label="An agent")
        _rename_own_store(agent, name)
        agent.name = name
    agent.knowledge_config = config
    agent.write_memory_store_id = store_id or None
    agent.save()
    return agent


@transaction.atomic
def agent_delete(*, agent: Agent, caller: Principal) -> None:
    """Delete an agent with its own store, that store's memories and their ledger rows (as
    memory_store_delete erases a store): 403 GRANT_REQUIRED without ``purge`` on the agent (its
    own store), 409 LEGAL_HOLD while a memory of its own store is under legal hold."""
    require(caller, PURGE, agent)
    check_legal_hold(memories=Memory.objects.of_project(agent.project_id).filter(
        store__agent=agent, store__tier=Tier.AGENT, store__project_id=agent.project_id))
    allow_ledger_erasure()
    delete_in_project(Agent.objects.filter(pk=agent.pk), agent.project_id)


def _rename_own_store(agent: Agent, name: str) -> None:
    """The own store follows a rename while it carries the name it was given and the new one is free."""
    if name == agent.name:
        return
    new = f"agent:{name}"[:MemoryStore._meta.get_field("name").max_length]
    if MemoryStore.objects.filter(project_id=agent.project_id, name=new).exists():
        return
    MemoryStore.objects.filter(project_id=agent.project_id, tier=Tier.AGENT, agent=agent,
                               name=f"agent:{agent.name}").update(name=new)
