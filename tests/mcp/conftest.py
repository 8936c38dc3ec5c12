"""A real server for the MCP and client tests: example_project's ASGI app under uvicorn on
127.0.0.1 in a thread, on the test database (tests using it commit their data)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from memory_engine.models import Agent, MemoryStore, Project
from memory_engine.services.memory_schema import memory_schema_save

from ..factories import AgentFactory, MemoryStoreFactory, ProjectFactory, make_key

pytest.importorskip("mcp")

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
    from memory_engine.services.memory_write import memory_write

    project = ProjectFactory()
    memory_schema_save(project=project, kinds=KINDS, relation_types=[])
    store = MemoryStoreFactory(project=project)
    agent = AgentFactory(project=project, write_memory_store=store, knowledge_config={"memory_store_ids": [store.pk]})
    other = MemoryStoreFactory(project=ProjectFactory())
    other_memory = memory_write(store=other, content="The other project's secret is blue.", principal="test",
                                mechanism="api").memory
    return Setup(project=project, store=store, agent=agent, key=make_key(project), other_memory_id=other_memory.pk)


@pytest.fixture
def live_url(transactional_db: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    import uvicorn
    from django.db import connection

    # Under ASGI each request's ORM work runs in a thread of its own: no persistent connections.
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 0)

    from example_project.asgi import application

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(application, host="127.0.0.1", port=port, log_level="warning",
                                           lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        with connection.cursor() as cursor:  # a connection a request thread left open
            cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                           "WHERE datname = current_database() AND pid <> pg_backend_pid()")
