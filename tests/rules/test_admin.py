"""The operator console shows rules, per-rule counts and handler errors (LLM_NOT_CONFIGURED)."""

from __future__ import annotations

from typing import Any

import pytest

from memory_engine.models import MemoryRule
from memory_engine.services.generations import record_generation
from memory_engine.services.rules import memory_rule_fire

from .conftest import engine, make_rule

pytestmark = pytest.mark.django_db


def test_generation_admin_shows_counts_and_llm_not_configured(admin_client: Any, settings: Any,
                                                              hashing_embedder: None, agent: Any, store: Any) -> None:
    engine(settings, LLM=None)
    builtin = make_rule(store)
    working = make_rule(store, "callable", path="tests.rules.handlers.facts_from_output")
    generation = record_generation(agent=agent, input_messages=[], output="The user likes jazz.", status="completed")
    memory_rule_fire(rule_id=builtin.pk, generation_id=generation.pk)
    memory_rule_fire(rule_id=working.pk, generation_id=generation.pk)

    listing = admin_client.get("/admin/memory_engine/generation/")
    assert listing.status_code == 200
    html = listing.content.decode()
    assert "LLM_NOT_CONFIGURED" in html and "2 rule(s): 1/0/0/0" in html
    filtered = admin_client.get("/admin/memory_engine/generation/?rule_errors=llm").content.decode()
    assert generation.pk in filtered
    detail = admin_client.get(f"/admin/memory_engine/generation/{generation.pk}/change/").content.decode()
    assert "LLM_NOT_CONFIGURED" in detail and builtin.pk in detail and "No language model is configured" in detail


def test_fire_rules_action_runs_the_rules_again(admin_client: Any, hashing_embedder: None, agent: Any,
                                                store: Any) -> None:
    rule = make_rule(store, "callable", path="tests.rules.handlers.facts_from_output")
    generation = record_generation(agent=agent, input_messages=[], output="The user likes jazz.", status="completed")
    response = admin_client.post("/admin/memory_engine/generation/", {
        "action": "fire_rules", "_selected_action": [generation.pk],
    }, follow=True)
    assert response.status_code == 200 and "Enqueued 1 rule firing" in response.content.decode()
    generation.refresh_from_db()
    assert generation.extraction[rule.pk]["created"] == 1  # django-q runs inline in unit tests


def test_rule_admin_validates_the_handler(admin_client: Any, store: Any, agent: Any) -> None:
    assert admin_client.get("/admin/memory_engine/memoryrule/").status_code == 200
    assert admin_client.get("/admin/memory_engine/memoryrule/add/").status_code == 200
    bad = admin_client.post("/admin/memory_engine/memoryrule/add/", {
        "store": store.pk, "on": "generation.completed", "enabled": "on", "handler_type": "http",
        "handler_config": '{"url": "not a url"}',
    })
    assert bad.status_code == 200 and "HANDLER_INVALID" in bad.content.decode()
    good = admin_client.post("/admin/memory_engine/memoryrule/add/", {
        "store": store.pk, "on": "generation.completed", "enabled": "on", "handler_type": "callable",
        "handler_config": '{"path": "tests.rules.handlers.echo_transcript"}', "source_agents": [agent.pk],
    })
    assert good.status_code == 302, good.content.decode()[:2000]
    rule = MemoryRule.objects.get()
    assert rule.handler_config == {"path": "tests.rules.handlers.echo_transcript"}
    assert list(rule.source_agents.all()) == [agent]
