"""Fixtures for memory rules: a fake LLM on 127.0.0.1, agents, rules, fast timeouts."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from memory_engine.models import MemoryRule

from ..factories import AgentFactory
from .servers import FakeLLM


def engine(settings: Any, **values: Any) -> None:
    """Merge values into MEMORY_ENGINE (keeps the embedder another fixture chose)."""
    settings.MEMORY_ENGINE = {**(getattr(settings, "MEMORY_ENGINE", {}) or {}), **values}


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    server = FakeLLM()
    yield server
    server.close()


@pytest.fixture
def llm(settings: Any, hashing_embedder: None, fake_llm: FakeLLM) -> FakeLLM:
    """MEMORY_ENGINE['LLM'] pointing at the fake server, with a short timeout and no retries."""
    engine(settings, LLM={"BASE_URL": fake_llm.base_url, "API_KEY": "sk-test", "MODEL": "test-model",
                          "TIMEOUT": 0.5, "RETRIES": 0})
    return fake_llm


@pytest.fixture
def agent(project: Any) -> Any:
    return AgentFactory(project=project)


def make_rule(store: Any, handler_type: str = "builtin", agents: list[Any] | None = None, enabled: bool = True,
              **config: Any) -> MemoryRule:
    rule = MemoryRule.objects.create(store=store, handler_type=handler_type, handler_config=config, enabled=enabled)
    if agents:
        rule.source_agents.set(agents)
    return rule
