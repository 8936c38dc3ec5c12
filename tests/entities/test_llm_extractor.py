"""The LLM entity extractor against a real HTTP server standing in for the model: its answer read
leniently, the rules where a call fails, and ENTITY_EXTRACTOR choosing it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from memory_engine.models import Entity
from memory_engine.providers.entities import LLMExtractor, get_entity_extractor
from memory_engine.services.entities import entities_extract_memories
from memory_engine.services.memories import memory_write
from tests.factories import MemoryStoreFactory
from tests.rules.servers import FakeLLM

pytestmark = pytest.mark.django_db


@pytest.fixture
def model(settings: Any) -> Iterator[FakeLLM]:
    server = FakeLLM()
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "ENTITY_EXTRACTOR": "llm",
                              "LLM": {"BASE_URL": server.base_url, "API_KEY": "sk-test", "MODEL": "test-model",
                                      "TIMEOUT": 0.5, "RETRIES": 0}}
    yield server
    server.close()


def test_the_models_entities_become_the_graphs(project: Any, model: FakeLLM) -> None:
    model.reply = 'Here: [{"name": "Kestrel Works", "kind": "organization", "subject": true}, ' \
                  '{"name": "Oslo", "kind": "place"}]'
    assert isinstance(get_entity_extractor(), LLMExtractor)
    store = MemoryStoreFactory(project=project)
    memory = memory_write(store=store, content="Mira: the kestrel works team moved to oslo.", principal="test").memory
    report = entities_extract_memories(memory_ids=[memory.pk])
    assert report.extractor == "llm"
    names = {(e.name, e.kind) for e in Entity.objects.filter(project=project)}
    assert names == {("Mira", "person"), ("Kestrel Works", "organization"), ("Oslo", "place")}  # speaker: rules
    sent = model.received[0]["json"]
    assert sent["temperature"] == 0 and "the kestrel works team" in sent["messages"][-1]["content"]


def test_a_failed_call_falls_back_to_the_rules(project: Any, model: FakeLLM) -> None:
    model.reply = (500, {"error": "down"}, 0)
    found = LLMExtractor().extract(["Ana moved to Lisbon."])[0]
    assert [(m.name, m.kind) for m in found] == [("Ana", "person"), ("Lisbon", "place")]
    model.reply = "no list here"
    assert [m.name for m in LLMExtractor().extract(["Ana moved to Lisbon."])[0]] == ["Ana", "Lisbon"]
