"""Reads of agents as a principal sees them.

An agent is seen by whoever reaches its own store (memory_engine.policy), but its scope may name
stores and documents of other teams (a shared agent searching both teams' stores, writing into
one): to a principal narrowed by grants, an agent names only the stores and documents it may see,
so an id outside its grants answers exactly like one that never existed.
"""

from __future__ import annotations

from typing import Any

from memory_engine.models import Agent, Document, MemoryStore
from memory_engine.policy import SEARCH, Principal, reach, visible

__all__ = ["agent_scope_in_reach"]


def agent_scope_in_reach(caller: Principal, agent: Agent) -> tuple[dict[str, Any], str | None]:
    """``agent``'s ``knowledge_config`` and write store id as ``caller`` sees them: the store and
    document ids outside its reach left out, a write store outside it as none; unchanged for a
    principal not narrowed by grants."""
    config = dict(agent.knowledge_config or {})
    write_store = agent.write_memory_store_id
    if reach(caller, SEARCH) is None:
        return config, write_store
    store_ids = [*(config.get("memory_store_ids") or []), *([write_store] if write_store else [])]
    seen = set(visible(caller, MemoryStore.objects.filter(project_id=agent.project_id, pk__in=store_ids), SEARCH)
               .values_list("pk", flat=True)) if store_ids else set()
    if doc_ids := config.get("document_ids"):
        seen |= set(visible(caller, Document.objects.filter(project_id=agent.project_id, pk__in=doc_ids), SEARCH)
                    .values_list("pk", flat=True))
    for key in ("memory_store_ids", "document_ids"):
        if key in config:
            config[key] = [value for value in config[key] if value in seen]
    return config, write_store if write_store in seen else None
