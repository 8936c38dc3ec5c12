"""Reads of single memories and memory lists: the facet rule, opening a memory's full body,
and which stores an agent may open memories of.

An id the caller cannot see (another project's, another facet's, an expired, trashed,
superseded or deleted memory) answers exactly like an id that never existed.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from memory_engine.exceptions import InstructionWithheld, NotFound
from memory_engine.instruction_guard import drop_instructions, first_verdict, record_block, stored_verdict
from memory_engine.models import Agent, Memory
from memory_engine.models.memories import Tier

__all__ = ["agent_visible_memories", "drop_instruction_memories", "in_facet", "memory_fields", "memory_findings",
           "memory_strings", "open_memory"]


def in_facet(queryset: QuerySet[Memory], facet: str | None) -> QuerySet[Memory]:
    """With a facet: that facet's memories and the cross-cutting ones (no facet), never another
    facet's. Without one: all. (``facet`` is already validated: memory_engine.facets.)"""
    if facet is None:
        return queryset
    return queryset.filter(Q(facet=facet) | Q(facet__isnull=True))


def memory_fields(memory: Memory) -> tuple[str, str, tuple[Any, ...]]:
    """What the instruction guard scans of a memory: its text and every string of its title,
    tags and metadata (``(id, tier, values)`` for instruction_guard.drop_instructions)."""
    return memory.pk, memory.store.tier, (memory.content.text, *memory_strings(memory))


def memory_findings(memory: Memory) -> list[tuple[Any, tuple[Any, ...]]]:
    """The instruction guard's findings stored with a memory and what each covers: its content
    row's (the text) and its own (title, tags, metadata)."""
    return [(memory.content.guard, (memory.content.text,)), (memory.guard, memory_strings(memory))]


def memory_strings(memory: Memory) -> tuple[Any, ...]:
    """The strings of a memory its own guard finding covers (the funnel judges these)."""
    return (memory.title, memory.tags, memory.metadata)


def drop_instruction_memories(memories: list[Memory], *, path: str) -> list[Memory]:
    """The memories without those that read as instructions (they stay stored; each drop is
    counted under ``path``), judged on their stored findings (or now, without current ones). The
    memories need ``content`` and ``store`` loaded."""
    return drop_instructions(memories, path=path, fields=memory_fields, stored=memory_findings)


def open_memory(queryset: QuerySet[Memory], memory_id: Any, *, facet: str | None = None,
                path: str = "open") -> Memory:
    """The live memory ``memory_id`` of ``queryset`` (already limited to what the caller may see),
    in ``facet`` when one is given.

    404 NOT_FOUND, identical to an unknown id, when it is not there or not live (expired, in
    the trash, superseded, deleted) or of another facet. 409 INSTRUCTION_WITHHELD when it
    reads as instructions to an AI: it exists and the caller may see it, but its text is not
    handed toward a model (the drop is counted under ``path``).
    """
    try:
        memory = in_facet(queryset & Memory.objects.live(), facet).select_related("content", "store") \
            .defer("content__embedding").filter(pk=memory_id).first()
    except (TypeError, ValueError):
        memory = None
    if memory is None:
        raise NotFound()
    item_id, tier, values = memory_fields(memory)
    verdict = stored_verdict(memory_findings(memory))
    if verdict is None:  # no finding of the guard's current version yet: judged now
        verdict = first_verdict(*values)
    if verdict is not None and verdict.blocked:
        record_block(item_id, path=path, rule=str(verdict.family), tier=tier, verdict=verdict)
        raise InstructionWithheld(details={"rule": verdict.family})
    return memory


def agent_visible_memories(agent: Agent, *, subject: str | None = None) -> QuerySet[Memory]:
    """The memories ``agent`` may open: those its search_knowledge could find (the stores of its
    knowledge_config, or with only ``tags`` every store of the project filtered by them, as the
    search scopes them), those of its write store and of its own (agent-tier) store, and with a
    ``subject`` that end user's store; never another subject's user store (as recall:
    memory_engine.selectors.search.scope)."""
    config = agent.knowledge_config or {}
    store_ids = [i for i in config.get("memory_store_ids") or [] if isinstance(i, str)]
    tags = config.get("tags") if isinstance(config.get("tags"), dict) and config.get("tags") else None
    searched = Q(store_id__in=store_ids) if store_ids else Q(pk__in=[])
    if tags is not None:
        searched = (searched if store_ids else Q()) & (Q(tags__contains=tags) | Q(store__tags__contains=tags))
    visible = searched | Q(store_id=agent.write_memory_store_id) if agent.write_memory_store_id else searched
    visible |= Q(store__tier=Tier.AGENT, store__agent_id=agent.pk)
    if subject is not None:
        visible |= Q(store__tier=Tier.USER, store__subject_external_id=subject)
    other_subjects = Q(store__tier=Tier.USER) & ~Q(store__subject_external_id=subject) if subject is not None \
        else Q(store__tier=Tier.USER)
    return Memory.objects.filter(visible, store__project_id=agent.project_id).exclude(other_subjects)
