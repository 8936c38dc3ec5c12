"""End to end with a real django-q2 cluster process: record -> complete -> worker runs the
rules -> memories, assertions and per-rule counts appear; and a flood of 200 completions."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.db import connections

from memory_engine.models import Generation, Memory, MemoryAssertion
from memory_engine.services.generations import complete_generation, record_generation

from ..conftest import wait_for
from ..factories import AgentFactory, MemoryStoreFactory
from .conftest import make_rule
from .servers import FakeLLM

pytestmark = pytest.mark.slow


@pytest.fixture
def qcluster_env(fake_llm: FakeLLM) -> dict[str, str]:
    """What the worker subprocess reads: the hashing embedder, the fake LLM, two workers."""
    return {
        "MEMORY_ENGINE_EMBEDDING_PROVIDER": "tests.providers.HashingEmbeddingProvider",
        "MEMORY_ENGINE_LLM_BASE_URL": fake_llm.base_url,
        "MEMORY_ENGINE_LLM_MODEL": "test-model",
        "Q_WORKERS": "2",
    }


def test_end_to_end_with_a_real_worker(qcluster: Any, fake_llm: FakeLLM, client: Any, project: Any,
                                       hashing_embedder: None) -> None:
    fake_llm.reply = "Here you go: " + json.dumps(
        ["The user lives in Bergen.", {"content": "The user prefers email.", "tags": {"kind": "preference"}}]
    )
    store = MemoryStoreFactory(project=project)
    agent = AgentFactory(project=project)
    rule = make_rule(store)
    created = client.post("/api/v1/generations", {
        "agent_id": agent.pk, "input_messages": [{"role": "user", "content": "I live in Bergen; email me."}],
    }, format="json")
    gen_id = created.data["id"]
    # The LLM answers nobody until released: /complete returning at all shows it did not wait
    # on the rule (which calls the LLM), on any machine load.
    fake_llm.hold = threading.Event()
    done = client.post(f"/api/v1/generations/{gen_id}/complete", {"output": "Noted."}, format="json")
    assert done.status_code == 200 and done.data["extraction"] == {}  # nothing ran on the request path
    fake_llm.hold.set()

    # pending first (the marker the rule-firing sweep looks for), then the counts
    generation = wait_for(lambda: Generation.objects.filter(
        pk=gen_id, **{f"extraction__{rule.pk}__has_key": "created"}).first(), timeout=60)
    assert generation.extraction[rule.pk] == {"created": 2, "superseded": 0, "skipped": 0, "failed": 0,
                                              "error": None}
    assert set(Memory.objects.filter(store=store).values_list("content__text", flat=True)) == {
        "The user lives in Bergen.", "The user prefers email."}
    rows = client.get(f"/api/v1/generations/{gen_id}/memory-assertions").data["results"]
    assert {(r["mechanism"], r["rule_id"], r["outcome"]) for r in rows} == {("rule", rule.pk, "created")}
    assert len(rows) == 2
    sent = fake_llm.received[0]["json"]
    assert sent["model"] == "test-model" and sent["temperature"] == 0.0
    assert "I live in Bergen" in sent["messages"][1]["content"]


def _complete(gen_ids: list[str], outputs: dict[str, str]) -> None:
    try:
        for gen_id in gen_ids:
            complete_generation(generation=Generation.objects.get(pk=gen_id), output=outputs[gen_id])
    finally:
        connections.close_all()


def test_flood_of_200_completions_loses_no_firing(qcluster: Any, project: Any, hashing_embedder: None) -> None:
    """200 generations completed at once from 8 threads, two rules each (400 firings that
    finish concurrently on the same generations), processed by the real worker."""
    stores = [MemoryStoreFactory(project=project) for _ in range(2)]
    rules = [make_rule(s, "callable", path="tests.rules.handlers.facts_from_output") for s in stores]
    agent = AgentFactory(project=project)
    generations = [record_generation(agent=agent, input_messages=[{"role": "user", "content": f"turn {i}"}])
                   for i in range(200)]
    outputs = {
        g.pk: (f"Customer{i} ordered widget{i} on day{i}." if i % 2 else
               f"Customer{i} ordered widget{i} on day{i}.\nplan: Account{i} upgraded to tier{i}.")
        for i, g in enumerate(generations)
    }
    expected_facts = sum(len(o.splitlines()) for o in outputs.values())  # 300 per rule
    ids = [g.pk for g in generations]
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda chunk: _complete(chunk, outputs), [ids[i::8] for i in range(8)]))

    def all_done() -> bool:
        done = Generation.objects.filter(pk__in=ids)
        for rule in rules:
            done = done.filter(**{f"extraction__{rule.pk}__has_key": "created"})
        return done.count() == 200

    wait_for(all_done, timeout=240, interval=1.0)
    for generation in Generation.objects.filter(pk__in=ids):
        lines = len(outputs[generation.pk].splitlines())
        for rule in rules:
            assert generation.extraction[rule.pk] == {"created": lines, "superseded": 0, "skipped": 0,
                                                      "failed": 0, "error": None}, generation.pk
    assert MemoryAssertion.objects.filter(mechanism="rule").count() == 2 * expected_facts
    for store, rule in zip(stores, rules, strict=True):
        assert Memory.objects.filter(store=store, invalidated_at__isnull=True).count() == expected_facts
        assert MemoryAssertion.objects.filter(rule_id=rule.pk, generation_id__in=ids).count() == expected_facts
