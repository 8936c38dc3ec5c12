"""The runners of the agent tools: each executes one call inside the agent's scope, as the
``caller`` (an API key or a user, memory_engine.policy) with what the host pinned (``subject``,
``facet``); the model's arguments are checked by :mod:`memory_engine.agent_tools.arguments`.
REST (``POST /api/v1/agents/{id}/tools/<name>``) and MCP (:mod:`memory_engine.mcp`) call these."""

from __future__ import annotations

from typing import Any, Unpack

from memory_engine.exceptions import (
    GenerationAgentMismatch,
    GenerationNotFound,
    NotFound,
    NoWriteMemoryStore,
    ValidationFailed,
)
from memory_engine.facets import validate_facet
from memory_engine.injection import (
    KNOWLEDGE_PREAMBLE,
    NO_KNOWLEDGE_NOTE,
    model_search_kwargs,
    neutralise,
    render_knowledge_block,
    render_memory_block,
    tag_field,
)
from memory_engine.knowledge_config import normalize_knowledge_config
from memory_engine.models import Agent, Generation, Memory, MemoryAssertion, MemoryStore
from memory_engine.models.memories import Mechanism, SourceType, Tier
from memory_engine.policy import ADD, FORGET, SEARCH, Principal, access_tags_write, reach, require, sees, visible
from memory_engine.selectors.memories import agent_visible_memories, drop_instruction_memories, in_facet, open_memory
from memory_engine.selectors.search import Actor, SearchRequest, knowledge_search
from memory_engine.services.memories import MemoryFields, WriteResult, check_keywords, memory_write
from memory_engine.services.memory_lifecycle import memory_forget
from memory_engine.services.stores import subject_store_get_or_create
from memory_engine.subjects import validate_subject
from memory_engine.text import text_preview

from .arguments import WriteMemoryToolSerializer, validated


def run_search_knowledge(agent: Agent, arguments: dict[str, Any], *, caller: Principal, subject: str | None = None,
                         facet: str | None = None) -> tuple[str, Any]:
    """Execute a ``search_knowledge`` call inside the agent's scope, as the agent (``Actor``) for
    ``subject`` when the host names one. A ``facet`` from the host pins the recall; else the
    model's ``facet`` argument, if any, applies.

    Returns ``(text for the tool result, SearchResult)``; the text is the same fenced
    ``<knowledge>`` block push-injection uses, holding only relevant hits (the agent's
    ``min_relevance``, else SEARCH_MIN_RELEVANCE), or :data:`NO_KNOWLEDGE_NOTE` when none is.
    """
    if not isinstance(arguments, dict) or not isinstance(arguments.get("query"), str) or not arguments["query"].strip():
        raise ValidationFailed("search_knowledge needs a non-empty string `query`.", details={"field": "query"})
    kwargs = model_search_kwargs(normalize_knowledge_config(agent.knowledge_config))
    limit = arguments.get("limit")
    if limit is not None:
        kwargs["limit"] = limit
    if facet is None:
        facet = arguments.get("facet")
    result = knowledge_search(SearchRequest(
        project=agent.project, query=arguments["query"], guard_path="tools", facet=facet,
        actor=Actor(agent=agent, subject=subject), access_tags=reach(caller, SEARCH), **kwargs))
    return render_knowledge_block(result.results, result.evidence) or NO_KNOWLEDGE_NOTE, result


def run_open_memory(agent: Agent, arguments: dict[str, Any], *, caller: Principal, subject: str | None = None,
                    facet: str | None = None) -> tuple[str, Memory]:
    """Execute an ``open_memory`` call: the whole body of a live memory the agent may see
    (:func:`memory_engine.selectors.memories.agent_visible_memories`, for ``subject`` when the host
    names one; in the host's pinned ``facet``), as ``(text for the tool result, memory)``; any
    other id answers 404 like an unknown one."""
    if not isinstance(arguments, dict) or not isinstance(arguments.get("id"), str) or not arguments["id"].strip():
        raise ValidationFailed("open_memory needs a string `id`.", details={"field": "id"})
    facet = validate_facet(facet)
    subject = validate_subject(subject, allow_none=True)
    memories = visible(caller, agent_visible_memories(agent, subject=subject))
    memory = open_memory(memories, arguments["id"].strip(), facet=facet, path="tools")
    return render_memory_block(memory), memory


#: How many memories ``list_memories`` returns unless the model asks for fewer or more.
LIST_MEMORIES_LIMIT = 20
#: The preview of each memory ``list_memories`` shows (open_memory reads the rest).
LIST_PREVIEW_BYTES = 300


def _argument(arguments: dict[str, Any], name: str, kind: type, default: Any = None) -> Any:
    value = arguments.get(name, default)
    if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
        raise ValidationFailed(f"`{name}` must be a {kind.__name__}.", details={"field": name})
    return value


def run_list_memories(agent: Agent, arguments: dict[str, Any], *, caller: Principal, subject: str | None = None,
                      facet: str | None = None) -> tuple[str, list[Memory]]:
    """Execute a ``list_memories`` call: the live memories the agent may open (as
    :func:`run_open_memory`), newest first, each as its source tag and a preview. A ``facet`` from
    the host pins the list; else the model's ``facet`` argument, if any, applies."""
    if not isinstance(arguments, dict):
        raise ValidationFailed("list_memories takes an object of arguments.", details={"field": "arguments"})
    limit = _argument(arguments, "limit", int, LIST_MEMORIES_LIMIT)
    if not 1 <= limit <= 50:
        raise ValidationFailed("`limit` must be between 1 and 50.", details={"field": "limit"})
    kind = _argument(arguments, "kind", str)
    facet = validate_facet(facet if facet is not None else _argument(arguments, "facet", str))
    memories = visible(caller, agent_visible_memories(agent, subject=validate_subject(subject, allow_none=True)))
    memories = in_facet(memories & Memory.objects.live(), facet)
    if kind:
        memories = memories.filter(kind=kind)
    rows = list(memories.select_related("content", "store").defer("content__embedding")
                .order_by("-created_at", "-id")[:limit])
    rows = drop_instruction_memories(rows, path="tools")
    if not rows:
        return "No memories.", rows
    items = []
    for memory in rows:
        preview, cut = text_preview(memory.content.text.strip(), LIST_PREVIEW_BYTES)
        more = f"\n[… preview only: open memory {memory.pk} (open_memory tool) for the full text]" if cut else ""
        facet_note = f", facet {tag_field(memory.facet)}" if memory.facet else ""
        items.append(f"[Memory store: {tag_field(memory.store.name)} ({memory.pk}), kind {tag_field(memory.kind)}"
                     f"{facet_note}]\n{neutralise(preview)}{more}")
    return "<knowledge>\n" + KNOWLEDGE_PREAMBLE + "\n\n" + "\n\n".join(items) + "\n</knowledge>", rows


def run_forget_memory(agent: Agent, arguments: dict[str, Any], *, caller: Principal, subject: str | None = None,
                      facet: str | None = None) -> tuple[str, MemoryAssertion]:
    """Execute a ``forget_memory`` call (mechanism ``tool``): a live memory of a store the agent
    writes to (its write store, its own agent-tier store, the host's ``subject``'s store), in the
    host's pinned ``facet``, that ``caller`` may forget; any other id answers 404 like an unknown one."""
    if not isinstance(arguments, dict) or not isinstance(arguments.get("id"), str) or not arguments["id"].strip():
        raise ValidationFailed("forget_memory needs a string `id`.", details={"field": "id"})
    subject = validate_subject(subject, allow_none=True)
    own = Memory.objects.filter(store__project_id=agent.project_id, store__tier=Tier.AGENT, store__agent_id=agent.pk)
    if agent.write_memory_store_id:
        own |= Memory.objects.filter(store_id=agent.write_memory_store_id)
    if subject is not None:
        own |= Memory.objects.filter(store__project_id=agent.project_id, store__tier=Tier.USER,
                                     store__subject_external_id=subject)
    writable = visible(caller, agent_visible_memories(agent, subject=subject) & own, FORGET)
    memory = open_memory(writable, arguments["id"].strip(), facet=validate_facet(facet), path="tools")
    assertion = memory_forget(memory=memory, principal=caller.label, mechanism=Mechanism.TOOL)
    return f"Forgot memory {memory.pk}.", assertion


def agent_write_memory(*, agent: Agent, content: str, caller: Principal, generation_id: str | None = None,
                       judge: Any = None, subject: str | None = None, pinned_facet: str | None = None,
                       **fields: Unpack[MemoryFields]) -> WriteResult:
    """Write a fact (mechanism ``tool``) on the store's thresholds: into the agent's write store,
    or with ``subject`` (set by the host) into that end user's store (found or created; the
    memory is then one of the user's memories for this agent, ``user_for_agent`` in recall).
    ``pinned_facet`` (set by the host) replaces the model's ``facet``. ``generation_id`` names the
    turn the tool was called in and must be one of this agent's generations. The memory records
    the agent that wrote it.

    ``caller`` is who asks (REST or MCP; memory_engine.policy): a target store outside its reach
    answers 404 MEMORY_STORE_NOT_FOUND like one that does not exist, one it sees without ``add``
    403 GRANT_REQUIRED; either way nothing is written. A subject store created here gets the
    caller's owner tag, as on ``GET /subjects/{id}/memory-store``. ``fields`` are the memory's
    (MemoryFields), passed on to memory_write."""
    check_keywords("agent_write_memory", fields, MemoryFields.__optional_keys__)
    if pinned_facet:
        fields["facet"] = pinned_facet
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
    return memory_write(store=store, content=content, principal=caller.label, mechanism=Mechanism.TOOL,
                        source_type=SourceType.CONVERSATION, generation_id=generation_id or None, judge=judge,
                        agent=agent, **fields)


def run_write_memory(agent: Agent, arguments: dict[str, Any], *, caller: Principal, subject: str | None = None,
                     facet: str | None = None) -> WriteResult:
    """Execute a ``write_memory`` call: the arguments checked (a REST body may carry the host's
    ``subject`` and ``pinned_facet`` too; ``subject`` and ``facet`` given here win), then
    :func:`agent_write_memory`."""
    serializer = validated(WriteMemoryToolSerializer, arguments)
    body_subject, body_facet = serializer.pins()
    data = serializer.validated_data
    return agent_write_memory(agent=agent, content=data["content"], generation_id=data.get("generation_id") or None,
                              **serializer.write_kwargs(), subject=subject if subject is not None else body_subject,
                              pinned_facet=facet if facet is not None else body_facet, caller=caller)
