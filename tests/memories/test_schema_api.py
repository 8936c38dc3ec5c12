"""The memory schema: GET/PUT /memory-schema, SCHEMA_INVALID, KIND_UNKNOWN, the tools rendered
from it (both function-calling shapes), /agents/{id}/tool-guidance and formation."""

from __future__ import annotations

import json
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from memory_engine.agent_tools import SEARCH_KNOWLEDGE, WRITE_MEMORY
from memory_engine.exceptions import KindUnknown
from memory_engine.models import Memory, MemoryAssertion, MemorySchema, MemoryStore
from memory_engine.services.memory_schema import check_kind, memory_schema_save
from tests.factories import AgentFactory

pytestmark = pytest.mark.django_db

URL = "/api/v1/memory-schema"
SCHEMA = {
    "kinds": [
        {"name": "preference", "display_name": "Preference", "description": "What the user likes or dislikes."},
        {"name": "decision", "display_name": "Decision"},
    ],
    "relation_types": [{"name": "contradicts", "display_name": "Contradicts"}],
}


def test_get_without_a_schema_is_empty(client):
    response = client.get(URL)
    assert response.status_code == 200
    assert response.json() == {"kinds": [], "relation_types": []}


def test_put_replaces_and_get_reads_it_back(client, project):
    response = client.put(URL, SCHEMA, format="json")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["kinds"] == [
        {"name": "preference", "display_name": "Preference", "description": "What the user likes or dislikes."},
        {"name": "decision", "display_name": "Decision", "description": ""},
    ]
    assert body["relation_types"] == [{"name": "contradicts", "display_name": "Contradicts", "description": ""}]
    assert client.get(URL).json() == body
    # PUT replaces: an omitted list becomes empty; a bare name is shorthand with a derived display name
    response = client.put(URL, {"kinds": ["user_goal"]}, format="json")
    assert response.json() == {"kinds": [{"name": "user_goal", "display_name": "User goal", "description": ""}],
                               "relation_types": []}
    assert MemorySchema.objects.filter(project=project).count() == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"kinds": "fact"}, "kinds"),
        ({"kinds": [{"name": "Fact"}]}, "kinds[0]"),
        ({"kinds": [{"name": "fact"}, {"name": "has space"}]}, "kinds[1]"),
        ({"kinds": [{"name": "x" * 101}]}, "kinds[0]"),
        ({"kinds": [{"display_name": "No name"}]}, "kinds[0]"),
        ({"kinds": [{"name": "fact"}, {"name": "fact"}]}, "kinds[1]"),
        ({"kinds": [{"name": "fact", "display_name": "F" * 201}]}, "kinds[0]"),
        ({"kinds": [{"name": "fact", "description": "d" * 1001}]}, "kinds[0]"),
        ({"kinds": [{"name": "fact", "display_name": "Two\nlines"}]}, "kinds[0]"),
        ({"kinds": [{"name": "fact", "description": "nul \x00"}]}, "kinds[0]"),
        ({"kinds": [{"name": "fact", "colour": "red"}]}, "kinds[0]"),
        ({"kinds": [7]}, "kinds[0]"),
        ({"kinds": [{"name": f"k{i}"} for i in range(101)]}, "kinds"),
        ({"relation_types": [{"name": "a"}, {"name": "a"}]}, "relation_types[1]"),
    ],
)
def test_invalid_schemas_are_400_schema_invalid_naming_the_entry(client, body, field):
    client.put(URL, SCHEMA, format="json")
    response = client.put(URL, body, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "SCHEMA_INVALID"
    assert response.json()["details"]["field"] == field
    assert client.get(URL).json()["kinds"][0]["name"] == "preference"  # unchanged


def test_a_body_that_is_not_an_object_is_schema_invalid(client):
    response = client.put(URL, [1, 2], format="json")
    assert response.status_code == 400 and response.json()["code"] == "SCHEMA_INVALID"


def test_read_only_keys_read_but_do_not_replace(readonly_client, project):
    memory_schema_save(project=project, kinds=["fact"], relation_types=[])
    assert readonly_client.get(URL).json()["kinds"][0]["name"] == "fact"
    response = readonly_client.put(URL, SCHEMA, format="json")
    assert response.status_code == 403 and response.json()["code"] == "READ_ONLY_KEY"


def test_schemas_are_per_project(client, other_client, project):
    client.put(URL, SCHEMA, format="json")
    assert other_client.get(URL).json() == {"kinds": [], "relation_types": []}


def test_declared_kinds_are_the_only_accepted_ones(project):
    check_kind(project, "anything_goes")  # no schema: open
    memory_schema_save(project=project, kinds=[], relation_types=SCHEMA["relation_types"])
    check_kind(project, "anything_goes")  # relation types alone keep kinds open
    memory_schema_save(project=project, **SCHEMA)
    check_kind(project, "preference")
    for kind in ("fact", "unknown"):  # a built-in is accepted only when declared
        with pytest.raises(KindUnknown) as caught:
            check_kind(project, kind)
        assert caught.value.code == "KIND_UNKNOWN"
        assert caught.value.details == {"kind": kind, "accepted": ["preference", "decision"]}


def test_write_of_an_undeclared_kind_is_400_kind_unknown(client, project, store):
    """Through POST /memories: a kind the schema does not declare is refused before anything is
    written; a declared one is written with it."""
    memory_schema_save(project=project, **SCHEMA)
    response = client.post("/api/v1/memories", {"memory_store_id": store.pk, "content": "The user hikes.",
                                                 "kind": "hobby"}, format="json")
    assert response.status_code == 400 and response.json()["code"] == "KIND_UNKNOWN", response.json()
    assert not MemoryAssertion.objects.filter(store=store).exists()
    accepted = client.post("/api/v1/memories", {"memory_store_id": store.pk, "content": "The user hikes.",
                                                "kind": "preference"}, format="json")
    assert accepted.status_code == 201, accepted.json()
    assert Memory.objects.get(pk=accepted.json()["id"]).kind == "preference"


# --------------------------------------------------------------------------- tools


def tools(client: Any, agent: Any, provider: str) -> dict[str, dict[str, Any]]:
    """name -> (description, JSON schema) of the agent's tools in ``provider``'s shape."""
    response = client.get(f"/api/v1/agents/{agent.pk}/tools?provider={provider}")
    assert response.status_code == 200, response.json()
    found = {}
    for tool in response.json()["tools"]:
        if provider == "openai":
            assert tool["type"] == "function"
            tool = {"name": tool["function"]["name"], "description": tool["function"]["description"],
                    "schema": tool["function"]["parameters"]}
        else:
            tool = {"name": tool["name"], "description": tool["description"], "schema": tool["input_schema"]}
        found[tool["name"]] = tool
    return found


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_tools_without_a_schema_keep_the_kind_open(client, project, store, provider):
    agent = AgentFactory(project=project, write_memory_store=store)
    found = tools(client, agent, provider)
    write = found["write_memory"]["schema"]
    assert write["properties"]["kind"]["type"] == "string" and "enum" not in write["properties"]["kind"]
    assert "preference" in write["properties"]["kind"]["description"]
    assert write["required"] == ["content"]
    props = write["properties"]
    assert props["confidence"] == {"type": "number", "minimum": 0, "maximum": 1,
                                   "description": "How sure you are that it is true, from 0 to 1 (default: 0.7)."}
    assert props["facet"]["pattern"] == "^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$"
    assert props["expires_at"] == {**props["expires_at"], "type": "string", "format": "date-time"}
    assert {"title", "summary", "content", "tags", "about"} <= set(props)
    assert write["additionalProperties"] is False
    # the module constants are the open base
    assert found["write_memory"]["description"] == WRITE_MEMORY["description"]
    assert found["search_knowledge"]["schema"] == SEARCH_KNOWLEDGE["parameters"]
    assert set(WRITE_MEMORY["parameters"]["properties"]) == set(props)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_tools_render_the_declared_kinds(client, project, store, provider):
    memory_schema_save(project=project, **SCHEMA)
    agent = AgentFactory(project=project, write_memory_store=store)
    found = tools(client, agent, provider)
    write = found["write_memory"]
    assert write["schema"]["properties"]["kind"]["enum"] == ["preference", "decision"]
    # "fact" (the kind of a write naming none) is not declared: the model must name one
    assert write["schema"]["required"] == ["content", "kind"]
    assert "- preference (Preference): What the user likes or dislikes." in write["description"]
    assert "- decision (Decision)" in write["description"]
    search = found["search_knowledge"]
    assert "- preference (Preference)" in search["description"]
    assert set(search["schema"]["properties"]) == {"query", "limit", "facet"}
    # declaring fact keeps kind optional
    memory_schema_save(project=project, kinds=["fact", "preference"], relation_types=[])
    write = tools(client, agent, provider)["write_memory"]
    assert write["schema"]["required"] == ["content"]
    assert write["schema"]["properties"]["kind"]["enum"] == ["fact", "preference"]


def test_write_memory_is_offered_only_with_a_write_store(client, project):
    memory_schema_save(project=project, **SCHEMA)
    agent = AgentFactory(project=project)
    assert list(tools(client, agent, "openai")) == ["search_knowledge", "open_memory", "list_memories"]


# --------------------------------------------------------------------------- tool guidance


def test_tool_guidance(client, project, store):
    agent = AgentFactory(project=project, write_memory_store=store)
    url = f"/api/v1/agents/{agent.pk}/tool-guidance"
    open_body = client.get(url).json()
    assert open_body["kinds"] == [] and open_body["relation_types"] == []
    assert "fact, preference, observation, instruction" in open_body["guidance"]
    memory_schema_save(project=project, **SCHEMA)
    response = client.get(url)
    assert response.status_code == 200, response.json()
    body = response.json()
    assert set(body) == {"provider", "kinds", "relation_types", "tools", "guidance"}
    assert body["provider"] == "openai"
    assert [k["name"] for k in body["kinds"]] == ["preference", "decision"]
    assert body["relation_types"] == [{"name": "contradicts", "display_name": "Contradicts", "description": ""}]
    assert body["tools"] == client.get(f"/api/v1/agents/{agent.pk}/tools").json()["tools"]
    assert "search_knowledge" in body["guidance"] and "write_memory" in body["guidance"]
    assert "- preference (Preference): What the user likes or dislikes." in body["guidance"]
    anthropic = client.get(f"{url}?provider=anthropic").json()
    assert [t["name"] for t in anthropic["tools"]] == ["search_knowledge", "open_memory", "list_memories",
                                                       "write_memory", "forget_memory"]
    assert client.get(f"{url}?provider=xml").json()["code"] == "TOOL_FORMAT_INVALID"


def test_tool_guidance_without_a_write_store_says_nothing_of_writing(client, project):
    agent = AgentFactory(project=project)
    body = client.get(f"/api/v1/agents/{agent.pk}/tool-guidance").json()
    assert [t["function"]["name"] for t in body["tools"]] == ["search_knowledge", "open_memory", "list_memories"]
    assert "write_memory" not in body["guidance"] and "forget_memory" not in body["guidance"]
    assert "open_memory" in body["guidance"]


def test_tool_guidance_of_another_projects_agent_is_404(client, readonly_client, other_project):
    foreign = AgentFactory(project=other_project)
    answers = [client.get(f"/api/v1/agents/{agent_id}/tool-guidance")
               for agent_id in (foreign.pk, "ag_01doesnotexist000000000000")]
    assert [a.status_code for a in answers] == [404, 404]
    assert answers[0].json()["code"] == answers[1].json()["code"] == "AGENT_NOT_FOUND"
    assert readonly_client.get(f"/api/v1/agents/{foreign.pk}/tool-guidance").status_code == 404


# --------------------------------------------------------------------------- formation


def apply(path: Any, project: str) -> str:
    out = StringIO()
    call_command("memory_engine_apply", str(path), "--project", project, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_formation_applies_the_memory_schema(tmp_path, project):
    path = tmp_path / "formation.yaml"
    path.write_text("""
stores:
  - name: support
    memories: [Refunds take 5 business days.]
memory_schema:
  kinds:
    - {name: fact, display_name: Fact}
    - {name: preference, display_name: Preference, description: What the user likes}
  relation_types: [supersedes]
""")
    output = apply(path, project.name)
    assert "memory schema: 2 kinds, 1 relation types" in output and "1 created" in output
    schema = MemorySchema.objects.get(project=project)
    assert [k["name"] for k in schema.kinds] == ["fact", "preference"]
    assert schema.relation_types == [{"name": "supersedes", "display_name": "Supersedes", "description": ""}]
    # a declaration of the schema alone; a declaration without the section leaves the schema alone
    path.write_text(json.dumps({"memory_schema": {"kinds": ["observation"]}}))
    path = path.rename(tmp_path / "schema.json")
    apply(path, project.name)
    assert MemorySchema.objects.get(project=project).kinds[0]["name"] == "observation"
    path.write_text(json.dumps({"stores": [{"name": "support", "memories": ["Refunds take 5 business days."]}]}))
    assert "memory schema" not in apply(path, project.name)
    assert MemorySchema.objects.get(project=project).kinds[0]["name"] == "observation"


def test_formation_with_an_invalid_schema_changes_nothing(tmp_path, project):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"stores": [{"name": "new-store", "memories": ["A fact."]}],
                                "memory_schema": {"kinds": [{"name": "Bad Name"}]}}))
    with pytest.raises(CommandError, match=r"SCHEMA_INVALID: kinds\[0\]"):
        apply(path, project.name)
    assert not MemorySchema.objects.exists() and not MemoryStore.objects.filter(name="new-store").exists()
