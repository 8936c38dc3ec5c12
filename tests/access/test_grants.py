"""Access inside a project (docs/security.md): grant tags on documents and stores, grants on keys.

Two keys of one project with disjoint grants: each sees, searches and changes only what its
grants reach; the rest answers exactly like an id that does not exist. A key without grants
keeps the whole project.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command

from memory_engine.exceptions import ValidationFailed
from memory_engine.grants import Grants, owner_tag, validate_grants
from memory_engine.models import ApiKey, Document, Memory, MemoryStore
from tests.access.helpers import keyed, tag
from tests.search.helpers import make_document

pytestmark = pytest.mark.django_db

SEARCH = "/api/v1/knowledge/search"
def ids(response: Any) -> set[str]:
    assert response.status_code == 200, response.content
    body = response.json()
    return {row["id"] for row in (body["results"] if isinstance(body, dict) else body)}


# --------------------------------------------------------------------------- grants on keys


def test_grants_are_validated_and_normalised() -> None:
    assert validate_grants(None) == []
    assert validate_grants([{"pattern": " team:* ", "actions": ["add", "search", "add"]}]) == [
        {"pattern": "team:*", "actions": ["search", "add"]}]
    for bad in ({"pattern": "x"}, [{"pattern": "", "actions": ["search"]}], [{"pattern": "x", "actions": ["read"]}],
                [{"pattern": "x", "actions": []}], ["team:a"]):
        with pytest.raises(ValidationFailed):
            validate_grants(bad)


def test_wildcards_match_the_tags_in_use_and_the_owner_tag_is_always_reached() -> None:
    grants = Grants.of("key_1", [{"pattern": "team:*", "actions": ["search"]}, {"pattern": "hr", "actions": ["add"]}])
    assert grants.tags("search", ["team:a", "teams", "hr"]) == ["owner:key_1", "team:a"]
    assert grants.tags(None, ["team:a", "hr"]) == ["hr", "owner:key_1", "team:a"]
    assert grants.allows("add", ["hr"]) and not grants.allows("add", ["team:a"])
    assert grants.allows("purge", [owner_tag("key_1")])


def test_command_creates_a_key_with_grants(project: Any, capsys: Any) -> None:
    call_command("memory_engine_key", "create", "--project", project.name, "--grant", "team:*=search,add")
    key = ApiKey.objects.get(project=project)
    assert key.grants == [{"pattern": "team:*", "actions": ["search", "add"]}]
    with pytest.raises(Exception, match="grants"):
        call_command("memory_engine_key", "create", "--project", project.name, "--grant", "team:*=read")


# --------------------------------------------------------------------------- reads


def test_limit_is_honoured_with_the_filter_inside_the_ranked_queries(project: Any) -> None:
    """30 hidden documents outrank 3 visible ones; limit=3 still returns the 3 visible ones."""
    for i in range(30):
        tag(make_document(project, f"/hidden/{i}.txt", [f"Quarterly revenue forecast for Europe, part {i}."]), "team:x")
    visible = [make_document(project, f"/mine/{i}.txt", [f"Notes {i}; mentions a revenue forecast once."])
               for i in range(3)]
    for document in visible:
        tag(document, "team:mine")
    client, _ = keyed(project, [{"pattern": "team:mine", "actions": ["search"]}])
    body = client.post(SEARCH, {"query": "quarterly revenue forecast Europe", "limit": 3}, format="json").json()
    assert {hit["document_id"] for hit in body["results"]} == {d.pk for d in visible}
    assert "hidden" not in str(body)
    # a key without grants ranks the hidden ones first
    unrestricted, _ = keyed(project)
    top = unrestricted.post(SEARCH, {"query": "quarterly revenue forecast Europe", "limit": 3}, format="json").json()
    assert all(hit["document_path"].startswith("/hidden/") for hit in top["results"])


def test_search_sees_only_granted_memories_and_documents(teams: dict[str, Any]) -> None:
    body = {"query": "billing service deploys runbook", "memory_store_ids": [teams["store_a"].pk],
            "document_paths": ["/"], "limit": 20}
    found = teams["a"].post(SEARCH, body, format="json").json()
    assert {h["id"] for h in found["results"] if h["source"] == "memory"} == {teams["memory_a"].pk}
    assert {h["document_id"] for h in found["results"] if h["source"] == "document"} == {teams["doc_a"].pk}
    text = str(found)
    for hidden in ("memory_b", "doc_b", "store_b"):
        assert teams[hidden].pk not in text
    assert "Fridays" not in text and "team b" not in text
    # tags without stores reach every store the grants reach, and no other
    tagged = teams["b"].post(SEARCH, {"query": "billing", "tags": {}, "memory_store_ids": [teams["store_b"].pk]},
                             format="json").json()
    assert teams["memory_a"].pk not in str(tagged)


def test_a_hidden_id_in_a_search_scope_answers_like_an_unknown_one(teams: dict[str, Any]) -> None:
    hidden = teams["b"].post(SEARCH, {"query": "x", "memory_store_ids": [teams["store_a"].pk],
                                      "document_ids": [teams["doc_a"].pk]}, format="json")
    assert hidden.status_code == 400 and hidden.json()["code"] == "UNKNOWN_SCOPE"
    assert hidden.json()["details"] == {"memory_store_ids": [teams["store_a"].pk],
                                        "document_ids": [teams["doc_a"].pk]}


def test_lists_and_counts_hold_only_granted_rows(teams: dict[str, Any]) -> None:
    for client, mine in ((teams["a"], "a"), (teams["b"], "b")):
        other = "b" if mine == "a" else "a"
        stores = client.get("/api/v1/memory-stores").json()
        assert {s["id"] for s in stores["results"]} == {teams[f"store_{mine}"].pk}
        assert stores["count"] == 1
        memories = client.get("/api/v1/memories", {"include_invalidated": "true"}).json()
        assert {m["id"] for m in memories["results"]} == {teams[f"memory_{mine}"].pk} and memories["count"] == 1
        documents = client.get("/api/v1/documents").json()
        assert {d["id"] for d in documents["results"]} == {teams[f"doc_{mine}"].pk} and documents["count"] == 1
        assertions = client.get("/api/v1/memory-assertions").json()
        assert assertions["count"] == len(assertions["results"]) >= 1
        assert teams[f"memory_{other}"].pk not in str(assertions) and teams[f"store_{other}"].pk not in str(assertions)


@pytest.mark.parametrize("path", ["/api/v1/documents/{doc}", "/api/v1/documents/{doc}/chunks",
                                  "/api/v1/documents/{doc}/versions", "/api/v1/memory-stores/{store}",
                                  "/api/v1/memories/{memory}", "/api/v1/memories/{memory}/open",
                                  "/api/v1/memories/{memory}/assertions"])
def test_a_hidden_object_answers_404_like_a_nonexistent_one(teams: dict[str, Any], path: str) -> None:
    hidden = {"doc": teams["doc_a"].pk, "store": teams["store_a"].pk, "memory": teams["memory_a"].pk}
    unknown = {name: f"{value.split('_')[0]}_0000000000{'1' * 16}" for name, value in hidden.items()}
    got = teams["b"].get(path.format(**hidden))
    ref = teams["b"].get(path.format(**unknown))
    assert got.status_code == ref.status_code == 404
    text = got.content.decode()
    for name, value in hidden.items():
        text = text.replace(value, unknown[name])
    assert text == ref.content.decode()
    assert teams["a"].get(path.format(**hidden)).status_code == 200


def test_a_key_without_grants_keeps_the_whole_project(teams: dict[str, Any], client: Any) -> None:
    assert ids(client.get("/api/v1/documents")) == {teams["doc_a"].pk, teams["doc_b"].pk}
    assert ids(client.get("/api/v1/memory-stores")) >= {teams["store_a"].pk, teams["store_b"].pk}
    found = client.post(SEARCH, {"query": "billing service deploys", "memory_store_ids": [teams["store_a"].pk,
                                 teams["store_b"].pk]}, format="json").json()
    assert {h["id"] for h in found["results"]} == {teams["memory_a"].pk, teams["memory_b"].pk}
    assert client.delete(f"/api/v1/memories/{teams['memory_b'].pk}").status_code == 204


# --------------------------------------------------------------------------- writes


def test_writes_need_the_action_and_hidden_targets_answer_404(teams: dict[str, Any]) -> None:
    b, store_a, store_b = teams["b"], teams["store_a"], teams["store_b"]
    # b may search store_b but not add to it: 403 GRANT_REQUIRED
    refused = b.post("/api/v1/memories", {"memory_store_id": store_b.pk, "content": "New fact."}, format="json")
    assert refused.status_code == 403 and refused.json()["code"] == "GRANT_REQUIRED"
    assert refused.json()["details"] == {"action": "add"}
    # store_a is hidden from b: exactly like an unknown store
    hidden = b.post("/api/v1/memories", {"memory_store_id": store_a.pk, "content": "New fact."}, format="json")
    unknown = b.post("/api/v1/memories", {"memory_store_id": "ms_00000000001111111111111111",
                                           "content": "New fact."}, format="json")
    assert hidden.status_code == unknown.status_code == 400
    assert hidden.json()["code"] == unknown.json()["code"] == "UNKNOWN_SCOPE"
    for path in (f"/api/v1/memories/{teams['memory_b'].pk}", f"/api/v1/documents/{teams['doc_b'].pk}"):
        answer = b.delete(path)
        assert (answer.status_code, answer.json()["code"]) == (403, "GRANT_REQUIRED")
    forget = b.post(f"/api/v1/documents/{teams['doc_b'].pk}/forget", {"reason": "r"}, format="json")
    assert (forget.status_code, forget.json()["code"]) == (403, "GRANT_REQUIRED")
    assert b.delete(f"/api/v1/memories/{teams['memory_a'].pk}").status_code == 404
    assert b.post(f"/api/v1/documents/{teams['doc_a'].pk}/purge").status_code == 404
    assert Memory.objects.filter(pk__in=[teams["memory_a"].pk, teams["memory_b"].pk],
                                 invalidated_at__isnull=True).count() == 2
    assert Document.objects.filter(pk__in=[teams["doc_a"].pk, teams["doc_b"].pk],
                                   forgotten_at__isnull=True).count() == 2
    # a, with every action on team:a, writes and forgets there
    written = teams["a"].post("/api/v1/memories", {"memory_store_id": store_a.pk, "content": "Team a owns DNS."},
                              format="json")
    assert written.status_code == 201, written.json()
    assert teams["a"].delete(f"/api/v1/memories/{teams['memory_a'].pk}").status_code == 204


def test_created_objects_carry_the_creators_owner_tag(project: Any, teams: dict[str, Any]) -> None:
    created = teams["b"].post("/api/v1/memory-stores", {"name": "b-private"}, format="json")
    assert created.status_code == 201, created.json()
    store = MemoryStore.objects.get(pk=created.json()["id"])
    assert store.access_tags == [owner_tag(teams["key_b"].pk)]
    # the creator may use it fully (owner tag), the other restricted key cannot see it
    assert teams["b"].post("/api/v1/memories", {"memory_store_id": store.pk, "content": "Owned fact."},
                           format="json").status_code == 201
    assert teams["a"].get(f"/api/v1/memory-stores/{store.pk}").status_code == 404
    document = teams["b"].post("/api/v1/documents", {"content": "Private notes of b.", "path": "/b/notes.txt",
                                                      "wait": True}, format="json")
    assert document.status_code == 201, document.json()
    assert Document.objects.get(pk=document.json()["id"]).access_tags == [owner_tag(teams["key_b"].pk)]
    assert teams["a"].get(f"/api/v1/documents/{document.json()['id']}").status_code == 404


# --------------------------------------------------------------------------- share


def test_share_on_create_writes_tags_and_grants_together(project: Any, teams: dict[str, Any],
                                                         other_project: Any) -> None:
    _, open_key = keyed(project)  # no grants: already reaches everything, stays unrestricted
    created = teams["a"].post("/api/v1/memory-stores", {
        "name": "shared", "share": {"keys": [teams["key_b"].pk, open_key.pk], "actions": ["search", "add"]}},
        format="json")
    assert created.status_code == 201, created.json()
    store = MemoryStore.objects.get(pk=created.json()["id"])
    assert store.access_tags == [owner_tag(teams["key_a"].pk), f"share:{store.pk}"]
    teams["key_b"].refresh_from_db()
    open_key.refresh_from_db()
    assert {"pattern": f"share:{store.pk}", "actions": ["search", "add"]} in teams["key_b"].grants
    assert open_key.grants == []
    assert teams["b"].get(f"/api/v1/memory-stores/{store.pk}").status_code == 200
    assert teams["b"].post("/api/v1/memories", {"memory_store_id": store.pk, "content": "Shared fact."},
                           format="json").status_code == 201
    # a document shared for search only
    document = teams["a"].post("/api/v1/documents", {"content": "Shared doc.", "path": "/shared.txt", "wait": True,
                                                     "share": {"keys": [teams["key_b"].pk]}}, format="json")
    assert document.status_code == 201, document.json()
    assert teams["b"].get(f"/api/v1/documents/{document.json()['id']}").status_code == 200
    purge = teams["b"].delete(f"/api/v1/documents/{document.json()['id']}")
    assert (purge.status_code, purge.json()["code"]) == (403, "GRANT_REQUIRED")


def test_share_with_a_key_of_another_project_is_refused_and_nothing_is_created(
        project: Any, teams: dict[str, Any], other_project: Any) -> None:
    _, foreign = keyed(other_project)
    before = MemoryStore.objects.filter(project=project).count()
    refused = teams["a"].post("/api/v1/memory-stores", {"name": "x", "share": {"keys": [foreign.pk]}}, format="json")
    unknown = teams["a"].post("/api/v1/memory-stores",
                              {"name": "x", "share": {"keys": ["key_0000000000aaaaaaaaaaaaaaaa"]}}, format="json")
    assert refused.status_code == unknown.status_code == 400
    assert refused.json()["code"] == unknown.json()["code"] == "VALIDATION_ERROR"
    assert MemoryStore.objects.filter(project=project).count() == before
    foreign.refresh_from_db()
    assert foreign.grants == []


def test_another_principals_subject_store_answers_404(teams: dict[str, Any]) -> None:
    created = teams["a"].get("/api/v1/subjects/user-42/memory-store")
    assert created.status_code == 201, created.json()
    assert MemoryStore.objects.get(pk=created.json()["id"]).access_tags == [owner_tag(teams["key_a"].pk)]
    assert teams["a"].get("/api/v1/subjects/user-42/memory-store").status_code == 200
    hidden = teams["b"].get("/api/v1/subjects/user-42/memory-store")
    assert (hidden.status_code, hidden.json()["code"]) == (404, "NOT_FOUND")
    assert created.json()["id"] not in hidden.content.decode()


def test_a_capture_that_would_update_a_document_needs_add_on_it(project: Any, teams: dict[str, Any]) -> None:
    first = teams["a"].put("/api/v1/documents/by-ref/wiki/page-1", {"content": "Version one.", "wait": True},
                           format="json")
    assert first.status_code == 201, first.json()
    for refused in (
        teams["b"].put("/api/v1/documents/by-ref/wiki/page-1", {"content": "Version two.", "wait": True},
                       format="json"),
        teams["b"].post("/api/v1/documents", {"content": "Version two.", "source": "wiki", "external_ref": "page-1",
                                              "wait": True}, format="json"),
    ):
        assert (refused.status_code, refused.json()["code"]) == (403, "GRANT_REQUIRED")
    assert Document.objects.get(pk=first.json()["id"]).versions.count() == 1
    again = teams["a"].put("/api/v1/documents/by-ref/wiki/page-1", {"content": "Version two.", "wait": True},
                           format="json")
    assert again.status_code in (200, 201), again.json()
