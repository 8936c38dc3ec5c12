"""What one search asks: :class:`SearchRequest`, built once at each door and passed through the stages.

The REST view (memory_engine.api.search), the agent tools and MCP (memory_engine.agent_tools),
push injection (memory_engine.injection), the admin playground and Python callers each build one
``SearchRequest`` and hand it to ``knowledge_search``; nothing is checked here (the search checks
every field and answers a bad one with its own error code, memory_engine.selectors.search.validation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memory_engine.models import Agent, Project


@dataclass(frozen=True)
class Actor:
    """Who a recall is for: an agent's turn, optionally on behalf of one end user (``subject``,
    the host's external id). Its memories with ``Memory.agent`` = this agent are user_for_agent."""

    agent: Agent
    subject: str | None = None


@dataclass(frozen=True, kw_only=True)
class SearchRequest:
    """One search: its scope, its query and its knobs (None: the deployment's setting, or a
    generation's config knob; docs/retrieval.md). ``knowledge_search``'s docstring says what each
    field does."""

    project: Project
    query: str | None = None
    # the scope
    memory_store_ids: list[str] | None = None
    document_ids: list[str] | None = None
    document_paths: list[str] | None = None
    tags: dict[str, Any] | None = None
    facet: str | None = None
    actor: Actor | None = None
    include_deprecated: bool = False
    generation: str | None = None
    access_tags: list[str] | None = None
    provenance: list[str] | None = None
    lineage: list[str] | None = None
    entity_ids: list[str] | None = None
    kinds: list[str] | None = None
    # the ranking knobs (memory_engine.ranking_knobs.KNOBS declares each)
    limit: int = 10
    min_similarity: float | None = None
    min_relevance: float | None = None
    rrf_k: float | None = None
    recency_half_life_days: float = 0
    vector_weight: float | None = None
    lexical_weight: float | None = None
    dedupe_documents: bool | None = None
    mmr: bool | None = None
    # how it runs
    channels: tuple[str, ...] = ("vector", "lexical")
    #: The caller, in the instruction guard's drop log and counter: search, context or tools.
    guard_path: str = "search"

    @property
    def names_a_source(self) -> bool:
        """Something besides the query says what to read (without a query: what to list)."""
        return bool(self.memory_store_ids or self.document_ids or self.document_paths or self.tags or self.actor
                    or self.generation or self.entity_ids or self.kinds)
