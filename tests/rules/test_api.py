"""REST: generations, memory rules of a store, the agent's write_memory tool; tenant isolation."""

from __future__ import annotations

from typing import Any

import pytest

from memory_engine.models import Generation, Memory, MemoryAssertion, MemoryRule

from ..factories import AgentFactory, MemoryStoreFactory
from .conftest import engine, make_rule

pytestmark = pytest.mark.django_db

MESSAGES = [{"role": "user", "content": "I prefer tea."}]
CALLABLE = "tests.rules.handlers.facts_from_output"


@pytest.fixture
def allow_test_callables(settings: Any) -> None:
    settings.MEMORY_ENGINE = {**(getattr(settings, "MEMORY_ENGINE", {}) or {}),
                              "RULE_CALLABLE_PREFIXES": ["tests.rules"]}


def create_generation(client: Any, agent: Any, **body: Any) -> Any:
    return client.post("/api/v1/generations", {"agent_id": agent.pk, "input_messages": MESSAGES, **body},
                       format="json")


# --- generations ---------------------------------------------------------------------------------

def test_record_then_complete(client: Any, agent: Any) -> None:
    response = create_generation(client, agent)
    assert response.status_code == 201, response.data
    data = response.data
    assert data["id"].startswith("gen_") and data["status"] == "running" and data["agent_id"] == agent.pk
    assert data["extraction"] == {} and data["completed_at"] is None
    done = client.post(f"/api/v1/generations/{data['id']}/complete", {"output": "Noted."}, format="json")
    assert done.status_code == 200 and done.data["status"] == "completed" and done.data["output"] == "Noted."
    again = client.post(f"/api/v1/generations/{data['id']}/complete", {"output": "x"}, format="json")
    assert again.status_code == 409 and again.data["code"] == "GENERATION_ALREADY_COMPLETED"
    assert client.get(f"/api/v1/generations/{data['id']}").data["output"] == "Noted."


def test_complete_as_failed_and_running_is_refused(client: Any, agent: Any) -> None:
    gen_id = create_generation(client, agent).data["id"]
    bad = client.post(f"/api/v1/generations/{gen_id}/complete", {"status": "running"}, format="json")
    assert bad.status_code == 400
    failed = client.post(f"/api/v1/generations/{gen_id}/complete", {"status": "failed"}, format="json")
    assert failed.status_code == 200 and failed.data["status"] == "failed"


def test_one_call_with_both_fires_rules(client: Any, agent: Any, store: Any, hashing_embedder: None,
                                        django_capture_on_commit_callbacks: Any) -> None:
    rule = make_rule(store, "callable", path=CALLABLE)
    with django_capture_on_commit_callbacks(execute=True):
        response = create_generation(client, agent, output="The user prefers tea.", status="completed")
    assert response.status_code == 201
    gen_id = response.data["id"]
    data = client.get(f"/api/v1/generations/{gen_id}").data
    assert data["extraction"][rule.pk]["created"] == 1
    rows = client.get(f"/api/v1/generations/{gen_id}/memory-assertions").data
    assert rows["count"] == 1
    row = rows["results"][0]
    assert (row["mechanism"], row["rule_id"], row["generation_id"]) == ("rule", rule.pk, gen_id)


def test_generation_validation(client: Any, agent: Any, other_project: Any) -> None:
    assert create_generation(client, agent, input_messages="hi").status_code == 400
    assert create_generation(client, agent, input_messages=[{"content": "no role"}]).status_code == 400
    missing = client.post("/api/v1/generations", {"agent_id": "agt_nope"}, format="json")
    assert missing.status_code == 404 and missing.data["code"] == "AGENT_NOT_FOUND"
    foreign = AgentFactory(project=other_project)
    assert client.post("/api/v1/generations", {"agent_id": foreign.pk}, format="json").status_code == 404
    assert create_generation(client, agent, output="a\x00b", status="completed").status_code == 400
    assert create_generation(client, agent, input_messages=[{"role": "user", "content": "a\x00"}]).status_code == 400
    gen_id = create_generation(client, agent).data["id"]
    nul = client.post(f"/api/v1/generations/{gen_id}/complete", {"output": "\x00"}, format="json")
    assert nul.status_code == 400 and Generation.objects.get(pk=gen_id).status == "running"
    bad_initiator = create_generation(client, agent, initiator_id="gen_nope")
    assert bad_initiator.status_code == 404 and bad_initiator.data["code"] == "GENERATION_NOT_FOUND"


def test_initiator_and_started_by_rule(client: Any, agent: Any, store: Any) -> None:
    rule = make_rule(store)
    source = create_generation(client, agent).data["id"]
    child = create_generation(client, agent, initiator_id=source, started_by_rule_id=rule.pk)
    assert child.status_code == 201
    assert (child.data["initiator_id"], child.data["started_by_rule_id"]) == (source, rule.pk)


def test_list_filters(client: Any, agent: Any) -> None:
    other_agent = AgentFactory(project=agent.project)
    create_generation(client, agent)
    create_generation(client, other_agent, output="x", status="completed")
    assert client.get("/api/v1/generations").data["count"] == 2
    assert client.get(f"/api/v1/generations?agent_id={agent.pk}").data["count"] == 1
    assert client.get("/api/v1/generations?status=completed").data["count"] == 1


# --- rules ---------------------------------------------------------------------------------------

def without_secret_flag(handler: dict[str, Any]) -> dict[str, Any]:
    assert handler.get("secret_set", False) is False
    return {k: v for k, v in handler.items() if k != "secret_set"}


def test_rule_crud(client: Any, store: Any, agent: Any, settings: Any) -> None:
    engine(settings, LLM_OVERRIDABLE=["MODEL", "API_KEY"])  # the operator lets rules bring their own key
    url = f"/api/v1/memory-stores/{store.pk}/rules"
    body = {"source_agent_ids": [agent.pk], "handler": {"type": "http", "url": "http://127.0.0.1:9/x",
                                                        "secret": "k"}}
    created = client.post(url, body, format="json")
    assert created.status_code == 201, created.data
    rule = created.data
    assert rule["id"].startswith("mr_") and rule["on"] == "generation.completed" and rule["enabled"] is True
    assert rule["memory_store_id"] == store.pk and rule["source_agent_ids"] == [agent.pk]
    assert rule["handler"] == {"type": "http", "url": "http://127.0.0.1:9/x", "secret_set": True}
    assert client.get(url).data["count"] == 1
    patched = client.patch(f"{url}/{rule['id']}", {"enabled": False}, format="json")
    assert patched.status_code == 200 and patched.data["enabled"] is False
    assert patched.data["source_agent_ids"] == [agent.pk]
    # A new handler of the same type keeps the secret it is not sent again.
    replaced = client.patch(f"{url}/{rule['id']}", {"handler": {"type": "http", "url": "http://127.0.0.1:9/y"}},
                            format="json")
    assert replaced.data["handler"]["secret_set"] is True
    assert MemoryRule.objects.get(pk=rule["id"]).handler_config["secret"] == "k"
    put = client.put(f"{url}/{rule['id']}", {"handler": {"type": "builtin", "model": "m",
                                                         "provider": {"api_key": "sk-x"}}}, format="json")
    assert put.status_code == 200 and put.data["source_agent_ids"] == [] and put.data["enabled"] is True
    assert without_secret_flag(put.data["handler"]) == {"type": "builtin", "model": "m",
                                                        "provider": {"API_KEY": "***"}}
    assert client.delete(f"{url}/{rule['id']}").status_code == 204
    assert client.get(url).data["count"] == 0


@pytest.mark.parametrize("handler,codes", [
    ({"type": "magic"}, {"VALIDATION_ERROR"}),
    ({"type": "http", "url": "ftp://x"}, {"HANDLER_INVALID"}),
    ({"type": "http"}, {"HANDLER_INVALID"}),
    ({"type": "builtin", "path": "x.y"}, {"HANDLER_INVALID"}),
    ({"type": "callable", "path": "os.system"}, {"CALLABLE_NOT_ALLOWED"}),
    # refused by the API layer (VALIDATION_ERROR) or the service (HANDLER_INVALID), never stored
    ({"type": "builtin", "prompt": "a\x00"}, {"VALIDATION_ERROR", "HANDLER_INVALID"}),
])
def test_rule_handler_validation(client: Any, store: Any, handler: dict[str, Any], codes: set[str]) -> None:
    response = client.post(f"/api/v1/memory-stores/{store.pk}/rules", {"handler": handler}, format="json")
    assert response.status_code == 400 and response.data["code"] in codes
    assert not MemoryRule.objects.exists()


def test_callable_rules_need_an_allowed_prefix(client: Any, store: Any, allow_test_callables: None) -> None:
    url = f"/api/v1/memory-stores/{store.pk}/rules"
    ok = client.post(url, {"handler": {"type": "callable", "path": CALLABLE}}, format="json")
    assert ok.status_code == 201 and without_secret_flag(ok.data["handler"]) == {"type": "callable", "path": CALLABLE}
    missing = client.post(url, {"handler": {"type": "callable", "path": "tests.rules.handlers.nope"}}, format="json")
    assert missing.status_code == 400 and missing.data["code"] == "HANDLER_INVALID"
    outside = client.post(url, {"handler": {"type": "callable", "path": "tests.conftest.wait_for"}}, format="json")
    assert outside.data["code"] == "CALLABLE_NOT_ALLOWED"


def test_rule_agents_must_be_in_the_project(client: Any, store: Any, other_project: Any) -> None:
    foreign = AgentFactory(project=other_project)
    url = f"/api/v1/memory-stores/{store.pk}/rules"
    for body in ({"source_agent_ids": [foreign.pk], "handler": {"type": "builtin"}},
                 {"handler": {"type": "builtin", "agent_id": foreign.pk}}):
        response = client.post(url, body, format="json")
        assert response.status_code == 404 and response.data["code"] == "AGENT_NOT_FOUND"


# --- write_memory tool ---------------------------------------------------------------------------

def test_write_memory_tool(client: Any, project: Any, hashing_embedder: None) -> None:
    store = MemoryStoreFactory(project=project)
    agent = AgentFactory(project=project, write_memory_store=store)
    gen_id = create_generation(client, agent).data["id"]
    url = f"/api/v1/agents/{agent.pk}/tools/write_memory"
    created = client.post(url, {"content": "The user prefers tea.", "tags": {"kind": "preference"},
                                "generation_id": gen_id}, format="json")
    assert created.status_code == 201, created.data
    assert created.data["action"] == "created" and created.data["memory_store_id"] == store.pk
    assert created.data["decision_reason"] and created.data["assertion_id"].startswith("asr_")
    skipped = client.post(url, {"content": "The user prefers tea."}, format="json")
    assert skipped.status_code == 200 and skipped.data["action"] == "skipped"
    assert skipped.data["id"] == created.data["id"]
    row = MemoryAssertion.objects.get(pk=created.data["assertion_id"])
    assert (row.mechanism, row.generation_id, row.rule_id) == ("tool", gen_id, None)
    assert row.principal.startswith("key:")
    listed = client.get(f"/api/v1/generations/{gen_id}/memory-assertions").data
    assert [r["id"] for r in listed["results"]] == [row.pk]


def test_write_memory_tool_refusals(client: Any, project: Any, other_client: Any, other_project: Any,
                                    hashing_embedder: None) -> None:
    no_store = AgentFactory(project=project)
    response = client.post(f"/api/v1/agents/{no_store.pk}/tools/write_memory", {"content": "x"}, format="json")
    assert response.status_code == 400 and response.data["code"] == "NO_WRITE_MEMORY_STORE"
    agent = AgentFactory(project=project, write_memory_store=MemoryStoreFactory(project=project))
    url = f"/api/v1/agents/{agent.pk}/tools/write_memory"
    thresholds = client.post(url, {"content": "x", "duplicate_threshold": 0.5}, format="json")
    assert thresholds.status_code == 400 and thresholds.data["code"] == "THRESHOLDS_NOT_ALLOWED"
    assert client.post(url, {"content": "  "}, format="json").data["code"] == "CONTENT_EMPTY"
    other_agent_gen = create_generation(client, no_store).data["id"]
    mismatch = client.post(url, {"content": "x", "generation_id": other_agent_gen}, format="json")
    assert mismatch.status_code == 400 and mismatch.data["code"] == "GENERATION_AGENT_MISMATCH"
    foreign_gen = create_generation(other_client, AgentFactory(project=other_project)).data["id"]
    foreign = client.post(url, {"content": "x", "generation_id": foreign_gen}, format="json")
    assert foreign.status_code == 404 and foreign.data["code"] == "GENERATION_NOT_FOUND"
    assert other_client.post(url, {"content": "x"}, format="json").status_code == 404
    assert not MemoryAssertion.objects.exists()


def test_read_only_keys_cannot_write(readonly_client: Any, agent: Any, store: Any) -> None:
    refused = [
        create_generation(readonly_client, agent),
        readonly_client.post(f"/api/v1/memory-stores/{store.pk}/rules", {"handler": {"type": "builtin"}},
                             format="json"),
        readonly_client.post(f"/api/v1/agents/{agent.pk}/tools/write_memory", {"content": "x"}, format="json"),
    ]
    assert [(r.status_code, r.data["code"]) for r in refused] == [(403, "READ_ONLY_KEY")] * 3
    assert not Generation.objects.filter(agent=agent).exists()
    assert not MemoryRule.objects.filter(store=store).exists()
    assert not Memory.objects.exists() and not MemoryAssertion.objects.exists()
    assert readonly_client.get("/api/v1/generations").status_code == 200


# --- tenant isolation ----------------------------------------------------------------------------

def test_no_endpoint_reaches_another_project(client: Any, other_client: Any, other_project: Any, agent: Any,
                                             store: Any) -> None:
    gen_id = create_generation(client, agent).data["id"]
    rule = make_rule(store)
    checks = [
        ("get", f"/api/v1/generations/{gen_id}", None),
        ("post", f"/api/v1/generations/{gen_id}/complete", {"output": "x"}),
        ("get", f"/api/v1/generations/{gen_id}/memory-assertions", None),
        ("get", f"/api/v1/memory-stores/{store.pk}/rules", None),
        ("post", f"/api/v1/memory-stores/{store.pk}/rules", {"handler": {"type": "builtin"}}),
        ("get", f"/api/v1/memory-stores/{store.pk}/rules/{rule.pk}", None),
        ("patch", f"/api/v1/memory-stores/{store.pk}/rules/{rule.pk}", {"enabled": False}),
        ("delete", f"/api/v1/memory-stores/{store.pk}/rules/{rule.pk}", None),
        ("post", f"/api/v1/agents/{agent.pk}/tools/write_memory", {"content": "x"}),
        ("post", "/api/v1/generations", {"agent_id": agent.pk}),
    ]
    for method, url, body in checks:
        response = getattr(other_client, method)(url, body, format="json")
        assert response.status_code == 404, (method, url, response.status_code)
    assert other_client.get("/api/v1/generations").data["count"] == 0
    # The other project's own store does not expose our rule either.
    other_store = MemoryStoreFactory(project=other_project)
    assert other_client.get(f"/api/v1/memory-stores/{other_store.pk}/rules/{rule.pk}").status_code == 404
    assert Generation.objects.get(pk=gen_id).status == "running"
    assert MemoryRule.objects.get(pk=rule.pk).enabled is True
    # none of the refused writes left a row: no rule, generation, memory or assertion of theirs
    assert list(MemoryRule.objects.filter(store=store)) == [rule]
    assert list(Generation.objects.filter(agent=agent).values_list("pk", flat=True)) == [gen_id]
    assert not Memory.objects.exists() and not MemoryAssertion.objects.exists()

