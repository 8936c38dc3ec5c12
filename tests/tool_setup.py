"""The world of the MCP and client tests: a project with a memory schema, an agent that reads
and writes one store, an API key; and another project's memory. Committed rows (the tests serve
them from a real server), hence ``transactional_db``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from memory_engine.models import Agent, MemoryStore, Project
from memory_engine.services.memory_schema import memory_schema_save

from .factories import AgentFactory, MemoryStoreFactory, ProjectFactory, make_key

KINDS = [{"name": "preference", "display_name": "Preference", "description": "What the user likes."},
         {"name": "fact", "display_name": "Fact"}]


@dataclass
class Setup:
    project: Project
    store: MemoryStore
    agent: Agent
    key: str
    other_memory_id: str


@pytest.fixture
def setup(transactional_db: Any, hashing_embedder: None) -> Setup:
    """A project with a memory schema, an agent that reads and writes one store, a key; and
    another project's memory."""
    from memory_engine.services.memories import memory_write

    project = ProjectFactory()
    memory_schema_save(project=project, kinds=KINDS, relation_types=[])
    store = MemoryStoreFactory(project=project)
    agent = AgentFactory(project=project, write_memory_store=store, knowledge_config={"memory_store_ids": [store.pk]})
    other = MemoryStoreFactory(project=ProjectFactory())
    other_memory = memory_write(store=other, content="The other project's secret is blue.", principal="test",
                                mechanism="api").memory
    return Setup(project=project, store=store, agent=agent, key=make_key(project), other_memory_id=other_memory.pk)
