"""Rule firing: handlers, lenient parsing, counts on the generation, loop prevention, selectors."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memory_engine.models import Generation, Memory, MemoryAssertion
from memory_engine.services.generations import complete_generation, record_generation
from memory_engine.services.rules import build_transcript, matching_rule_ids, memory_rule_fire

from ..factories import AgentFactory, MemoryStoreFactory
from .conftest import engine, make_rule
from .servers import FakeServer, verify_signature

pytestmark = pytest.mark.django_db

MESSAGES = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "<knowledge>\n[Memory store: s (mem_x)] The user lives in Oslo.\n</knowledge>"},
    {"role": "user", "content": "I moved to Bergen and I prefer email over phone."},
]


def turn(agent: Any, output: str = "Noted: Bergen, email.", **kwargs: Any) -> Generation:
    return record_generation(agent=agent, input_messages=MESSAGES, output=output, status="completed", **kwargs)


def fire(rule: Any, generation: Generation) -> dict[str, Any]:
    counts = memory_rule_fire(rule_id=rule.pk, generation_id=generation.pk)
    generation.refresh_from_db()
    assert generation.extraction[rule.pk] == counts
    return counts


def test_transcript_keeps_user_and_assistant_and_drops_system_and_knowledge(agent: Any) -> None:
    generation = turn(agent)
    transcript = build_transcript(generation)
    assert transcript == ("user: I moved to Bergen and I prefer email over phone.\n\n"
                          "assistant: Noted: Bergen, email.")
    assert "Oslo" not in transcript and "helpful" not in transcript


def test_transcript_accepts_content_parts_and_keeps_the_end(agent: Any) -> None:
    generation = record_generation(agent=agent, input_messages=[
        {"role": "user", "content": [{"type": "text", "text": "x" * 500}, {"type": "image_url", "image_url": {}}]},
    ], output="the end", status="completed")
    transcript = build_transcript(generation, max_chars=100)
    assert len(transcript) == 100 and transcript.endswith("assistant: the end")


def test_builtin_good_json_writes_through_the_funnel(llm: Any, agent: Any, store: Any) -> None:
    llm.reply = json.dumps(["The user lives in Bergen.", {"content": "The user prefers email.",
                                                           "tags": {"kind": "preference"}}])
    rule = make_rule(store)
    generation = turn(agent)
    counts = fire(rule, generation)
    assert counts == {"created": 2, "superseded": 0, "skipped": 0, "failed": 0, "error": None}
    rows = list(MemoryAssertion.objects.filter(generation_id=generation.pk).order_by("created_at"))
    assert [r.content for r in rows] == ["The user lives in Bergen.", "The user prefers email."]
    assert {(r.mechanism, r.rule_id, r.principal) for r in rows} == {("rule", rule.pk, f"rule:{rule.pk}")}
    memory = Memory.objects.get(content__text="The user prefers email.")
    assert memory.tags == {"kind": "preference"} and memory.source_type == "conversation"
    request = llm.received[0]["json"]
    assert request["temperature"] == 0.0 and "tools" not in request
    assert request["messages"][0]["role"] == "system" and "JSON array" in request["messages"][0]["content"]
    assert "Bergen" in request["messages"][1]["content"] and "Oslo" not in request["messages"][1]["content"]


def test_builtin_prose_around_json_is_parsed(llm: Any, agent: Any, store: Any) -> None:
    llm.reply = 'Sure! Here are the facts:\n```json\n["The user lives in Bergen."]\n```\nHope this helps.'
    counts = fire(make_rule(store), turn(agent))
    assert counts["created"] == 1 and counts["error"] is None


def test_builtin_invalid_json_records_the_error_and_writes_nothing(llm: Any, agent: Any, store: Any) -> None:
    llm.reply = 'Facts: ["The user lives in Bergen", oops]'
    counts = fire(make_rule(store), turn(agent))
    assert counts["created"] == 0 and counts["error"]["code"] == "UNPARSEABLE_RESPONSE"
    assert not MemoryAssertion.objects.exists()


def test_builtin_no_array_at_all(llm: Any, agent: Any, store: Any) -> None:
    llm.reply = "I found nothing worth remembering."
    counts = fire(make_rule(store), turn(agent))
    assert counts["error"]["code"] == "UNPARSEABLE_RESPONSE"


def test_builtin_caps_at_twenty_facts(llm: Any, agent: Any, store: Any) -> None:
    llm.reply = json.dumps([f"Fact{i} alpha{i} beta{i} gamma{i}" for i in range(30)])
    counts = fire(make_rule(store), turn(agent))
    assert counts["created"] == 20
    assert Memory.objects.filter(store=store).count() == 20
    assert not Memory.objects.filter(content__text__startswith="Fact20 ").exists()


def test_unusable_items_count_as_failed(llm: Any, agent: Any, store: Any) -> None:
    llm.reply = json.dumps(["The user lives in Bergen.", 7, {"tags": {}}, "  "])
    counts = fire(make_rule(store), turn(agent))
    assert counts["created"] == 1 and counts["failed"] == 3 and counts["error"]["code"] == "INVALID_FACTS"


def test_about_items_reach_the_funnel(llm: Any, agent: Any, store: Any) -> None:
    llm.reply = json.dumps([{"content": "The user prefers email.", "about": {"kind": "preference", "key": "channel"}}])
    fire(make_rule(store), turn(agent))
    llm.reply = json.dumps([{"content": "The user prefers phone calls.",
                             "about": {"kind": "preference", "key": "channel"}}])
    counts = fire(make_rule(store), turn(agent))
    assert counts["superseded"] == 1
    assert Memory.objects.get(invalidated_at__isnull=True, store=store).about_key == "channel"


def test_repeated_fact_is_skipped(llm: Any, agent: Any, store: Any) -> None:
    llm.reply = json.dumps(["The user lives in Bergen.", "The user lives in Bergen."])
    counts = fire(make_rule(store), turn(agent))
    assert (counts["created"], counts["skipped"]) == (1, 1)
    assert MemoryAssertion.objects.count() == 2


@pytest.mark.parametrize("reply,code", [((500, {"error": "x"}, 0), "LLM_HTTP_ERROR"),
                                        ((200, {"choices": []}, 1.5), "LLM_TIMEOUT"),
                                        ((200, b"<html>", 0), "LLM_BAD_RESPONSE")])
def test_builtin_endpoint_failures_record_the_error(llm: Any, agent: Any, store: Any, reply: Any,
                                                    code: str) -> None:
    llm.reply = reply
    generation = turn(agent)
    counts = fire(make_rule(store), generation)
    assert counts["error"]["code"] == code and counts["created"] == 0
    assert generation.status == "completed"


def test_builtin_without_llm_records_llm_not_configured(settings: Any, hashing_embedder: None, agent: Any,
                                                        store: Any) -> None:
    engine(settings, LLM=None)
    counts = fire(make_rule(store), turn(agent))
    assert counts["error"]["code"] == "LLM_NOT_CONFIGURED"


def test_rule_prompt_model_and_provider_overrides(settings: Any, hashing_embedder: None, fake_llm: Any,
                                                  agent: Any, store: Any) -> None:
    engine(settings, LLM=None, LLM_OVERRIDABLE=["PROMPT", "MODEL", "BASE_URL", "TIMEOUT", "RETRIES"])
    fake_llm.reply = "[]"
    rule = make_rule(store, prompt="Only names.", model="tiny",
                     provider={"BASE_URL": fake_llm.base_url, "TIMEOUT": 1, "RETRIES": 0})
    counts = fire(rule, turn(agent))
    assert counts == {"created": 0, "superseded": 0, "skipped": 0, "failed": 0, "error": None}
    sent = fake_llm.received[0]["json"]
    assert sent["model"] == "tiny" and sent["messages"][0]["content"] == "Only names."


def test_quota_exceeded_counts_failed(llm: Any, agent: Any, store: Any, project: Any) -> None:
    project.max_memories = 1
    project.save()
    llm.reply = json.dumps(["The user lives in Bergen.", "The user owns a red bicycle."])
    counts = fire(make_rule(store), turn(agent))
    assert (counts["created"], counts["failed"]) == (1, 1)
    assert counts["error"]["code"] == "QUOTA_EXCEEDED"


def test_callable_handler(hashing_embedder: None, agent: Any, store: Any) -> None:
    rule = make_rule(store, "callable", path="tests.rules.handlers.facts_from_output")
    generation = turn(agent, output="preference: The user prefers tea.\nThe user has a cat named Miso.")
    counts = fire(rule, generation)
    assert counts["created"] == 2
    assert Memory.objects.get(content__text="The user prefers tea.").tags == {"kind": "preference"}


@pytest.mark.parametrize("path,code", [("tests.rules.handlers.explode", "HANDLER_FAILED"),
                                       ("tests.rules.handlers.not_a_list", "HANDLER_BAD_RESPONSE"),
                                       ("tests.rules.handlers.missing", "HANDLER_NOT_FOUND")])
def test_callable_failures_record_the_error(hashing_embedder: None, agent: Any, store: Any, path: str,
                                            code: str) -> None:
    counts = fire(make_rule(store, "callable", path=path), turn(agent))
    assert counts["error"]["code"] == code and counts["created"] == 0


def test_http_handler_signs_and_is_answered(hashing_embedder: None, agent: Any, store: Any) -> None:
    secret = "s3cret"

    def respond(request: dict[str, Any]) -> Any:
        if not verify_signature(secret, request["headers"], request["raw"]):
            return 401, {"error": "bad signature"}, 0
        body = request["json"]
        assert body["rule"]["id"] and body["generation"]["output"]
        return 200, {"facts": [{"content": f"The user said: {body['generation']['output']}",
                                "tags": {"via": "http"}}]}, 0

    server = FakeServer(respond)
    try:
        rule = make_rule(store, "http", url=f"{server.url}/extract", secret=secret, retries=0)
        counts = fire(rule, turn(agent, output="hello there"))
        assert counts["created"] == 1, counts
        assert Memory.objects.get(store=store).tags == {"via": "http"}
        assert server.received[0]["json"]["transcript"].endswith("assistant: hello there")
        wrong = make_rule(store, "http", url=f"{server.url}/extract", secret="wrong", retries=0)
        counts = fire(wrong, turn(agent))
        assert counts["error"]["code"] == "HANDLER_HTTP_ERROR"
    finally:
        server.close()


def test_http_handler_timeout_and_nonsense(hashing_embedder: None, agent: Any, store: Any) -> None:
    server = FakeServer(lambda request: (200, {"facts": "nope"}, 0.0) if "nonsense" in request["path"]
                        else (200, {"facts": []}, 1.0))
    try:
        slow = make_rule(store, "http", url=f"{server.url}/slow", timeout=0.2, retries=0)
        assert fire(slow, turn(agent))["error"]["code"] == "HANDLER_TIMEOUT"
        odd = make_rule(store, "http", url=f"{server.url}/nonsense", retries=0)
        assert fire(odd, turn(agent))["error"]["code"] == "HANDLER_BAD_RESPONSE"
    finally:
        server.close()


def test_several_rules_keep_separate_counts(hashing_embedder: None, agent: Any, store: Any) -> None:
    first = make_rule(store, "callable", path="tests.rules.handlers.facts_from_output")
    second = make_rule(MemoryStoreFactory(project=store.project), "callable", path="tests.rules.handlers.explode")
    generation = turn(agent, output="The user likes jazz.")
    memory_rule_fire(rule_id=first.pk, generation_id=generation.pk)
    memory_rule_fire(rule_id=second.pk, generation_id=generation.pk)
    generation.refresh_from_db()
    assert generation.extraction[first.pk]["created"] == 1
    assert generation.extraction[second.pk]["error"]["code"] == "HANDLER_FAILED"


# --- selection --------------------------------------------------------------------------------

def test_rules_fire_through_the_signal(hashing_embedder: None, agent: Any, store: Any,
                                       django_capture_on_commit_callbacks: Any) -> None:
    rule = make_rule(store, "callable", path="tests.rules.handlers.facts_from_output")
    generation = record_generation(agent=agent, input_messages=MESSAGES)
    with django_capture_on_commit_callbacks(execute=True):
        complete_generation(generation=generation, output="The user likes jazz.")
    generation.refresh_from_db()
    assert generation.extraction[rule.pk]["created"] == 1


def test_agent_filter_and_disabled_rules(hashing_embedder: None, agent: Any, store: Any) -> None:
    other_agent = AgentFactory(project=agent.project)
    mine = make_rule(store, "callable", path="tests.rules.handlers.facts_from_output", agents=[agent])
    everyone = make_rule(store, "callable", path="tests.rules.handlers.facts_from_output")
    make_rule(store, "callable", path="tests.rules.handlers.facts_from_output", enabled=False)
    assert matching_rule_ids(generation=turn(agent)) == [mine.pk, everyone.pk]
    assert matching_rule_ids(generation=turn(other_agent)) == [everyone.pk]


def test_other_projects_rules_never_match(hashing_embedder: None, agent: Any, other_project: Any) -> None:
    make_rule(MemoryStoreFactory(project=other_project), "callable", path="tests.rules.handlers.facts_from_output")
    assert matching_rule_ids(generation=turn(agent)) == []


def test_failed_or_running_generations_fire_nothing(agent: Any, store: Any) -> None:
    make_rule(store)
    failed = record_generation(agent=agent, input_messages=MESSAGES, output="x", status="failed")
    running = record_generation(agent=agent, input_messages=MESSAGES)
    assert matching_rule_ids(generation=failed) == [] and matching_rule_ids(generation=running) == []


def test_a_disabled_rule_enqueued_before_disabling_does_nothing(hashing_embedder: None, agent: Any,
                                                                store: Any) -> None:
    rule = make_rule(store, "callable", path="tests.rules.handlers.facts_from_output")
    generation = turn(agent, output="The user likes jazz.")
    rule.enabled = False
    rule.save()
    assert memory_rule_fire(rule_id=rule.pk, generation_id=generation.pk) is None
    assert not MemoryAssertion.objects.exists()


# --- loop prevention --------------------------------------------------------------------------

def test_loop_prevention(agent: Any, store: Any) -> None:
    handler_agent = AgentFactory(project=agent.project)
    rule = make_rule(store, "http", url="http://127.0.0.1:9/x", agent_id=handler_agent.pk)
    source = turn(agent)
    assert matching_rule_ids(generation=source) == [rule.pk]
    # The handler's own turn names the source as initiator and the rule that started it.
    by_rule = turn(agent, initiator=source, started_by_rule=rule)
    assert matching_rule_ids(generation=by_rule) == []
    # A turn of the agent that handles the rule.
    by_handler_agent = turn(handler_agent, initiator=source)
    assert matching_rule_ids(generation=by_handler_agent) == []
    # Anything further down a handler's chain.
    grandchild = turn(agent, initiator=by_rule)
    assert matching_rule_ids(generation=grandchild) == []
    assert matching_rule_ids(generation=turn(agent, initiator=by_handler_agent)) == []
    # An ordinary sub-generation of an ordinary turn still fires.
    assert matching_rule_ids(generation=turn(agent, initiator=source)) == [rule.pk]
