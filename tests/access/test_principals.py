"""Grants apply everywhere a principal acts (docs/security.md, *Access inside a project*): the
agent's write_memory tool, retention classes and erasure for keys; and staff users with grants
(``StaffGrants``) on the REST API with a session and in the admin. Each path is refused without
the grant and allowed with it; a superuser and a staff user without grants are not narrowed."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from memory_engine.grants import owner_tag
from memory_engine.models import Document, ErasureReceipt, Memory, MemoryStore, StaffGrants
from tests.access.helpers import ALL, keyed
from tests.factories import AgentFactory

pytestmark = pytest.mark.django_db

A = "/admin/memory_engine"


def tool_write(client: Any, agent: Any, **body: Any) -> Any:
    return client.post(f"/api/v1/agents/{agent.pk}/tools/write_memory",
                       {"content": "The deploy window moved to Thursday.", **body}, format="json")


def staff(project: Any, username: str, grants: list[dict[str, Any]] | None = None, *,
          superuser: bool = False) -> User:
    """A staff member of ``project`` with every memory_engine permission (and ``grants``, if any)."""
    if superuser:
        user = User.objects.create_superuser(username, f"{username}@example.com", "pw")
    else:
        user = User.objects.create_user(username, f"{username}@example.com", "pw", is_staff=True)
        user.user_permissions.set(Permission.objects.filter(content_type__app_label="memory_engine"))
    project.members.add(user)
    if grants is not None:
        StaffGrants.objects.create(user=user, grants=grants)
    return user


def session(user: User, project: Any) -> tuple[Client, dict[str, str]]:
    """A browser-like client (CSRF enforced) and the headers of an API call in ``project``."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    client.get("/admin/")  # sets the csrftoken cookie
    return client, {"HTTP_X_CSRFTOKEN": client.cookies["csrftoken"].value, "HTTP_X_PROJECT_ID": project.pk}


def listed(client: Client, path: str, headers: dict[str, str]) -> set[str]:
    response = client.get(path, **headers)
    assert response.status_code == 200, response.content
    body = response.json()
    return {row["id"] for row in (body["results"] if isinstance(body, dict) else body)}


# --------------------------------------------------------------------------- keys: tools, retention, erasure


def test_write_memory_tool_needs_add_on_the_write_store(project: Any, teams: dict[str, Any]) -> None:
    agent = AgentFactory(project=project, write_memory_store=teams["store_b"], access_tags=["team:b"])
    before = Memory.objects.filter(store=teams["store_b"]).count()
    refused = tool_write(teams["b"], agent)  # b: search only on team:b
    assert (refused.status_code, refused.json()["code"]) == (403, "GRANT_REQUIRED")
    assert refused.json()["details"] == {"action": "add"}
    assert Memory.objects.filter(store=teams["store_b"]).count() == before
    _, key = keyed(project, [{"pattern": "team:b", "actions": ["search", "add"]}])
    client_add, _ = keyed(project, [{"pattern": "team:b", "actions": ["search", "add"]}])
    written = tool_write(client_add, agent)
    assert written.status_code == 201, written.json()
    assert Memory.objects.filter(store=teams["store_b"]).count() == before + 1
    unrestricted, _ = keyed(project)  # no grants: the whole project, as before
    assert tool_write(unrestricted, agent, content="Standups are at ten.").status_code == 201


def test_write_memory_tool_for_a_subject_checks_and_tags_the_subject_store(project: Any,
                                                                           teams: dict[str, Any]) -> None:
    agent = AgentFactory(project=project, write_memory_store=teams["store_a"], access_tags=["team:a", "team:b"])
    created = tool_write(teams["a"], agent, subject="user-7")
    assert created.status_code == 201, created.json()
    store = MemoryStore.objects.get(project=project, subject_external_id="user-7")
    assert store.access_tags == [owner_tag(teams["key_a"].pk)]
    # team b reaches the agent but not a's subject store: it answers like GET /subjects/{id}/memory-store
    refused = tool_write(teams["b"], agent, subject="user-7", content="The user prefers tea.")
    assert (refused.status_code, refused.json()["code"]) == (404, "NOT_FOUND")
    assert Memory.objects.filter(store=store).count() == 1


def test_retention_class_changes_need_forget(teams: dict[str, Any]) -> None:
    memory, document = teams["memory_b"], teams["doc_b"]
    for path in (f"/api/v1/memories/{memory.pk}/retention", f"/api/v1/documents/{document.pk}/retention"):
        refused = teams["b"].post(path, {"retention_class": "legal_hold"}, format="json")
        assert (refused.status_code, refused.json()["code"]) == (403, "GRANT_REQUIRED"), path
        assert refused.json()["details"] == {"action": "forget"}
    memory.refresh_from_db()
    assert memory.retention_class != "legal_hold"
    allowed = teams["a"].post(f"/api/v1/memories/{teams['memory_a'].pk}/retention",
                              {"retention_class": "legal_hold"}, format="json")
    assert allowed.status_code == 200, allowed.json()
    assert allowed.json()["retention_class"] == "legal_hold"


def test_erasure_by_tags_needs_purge_on_every_row_it_reaches(project: Any, teams: dict[str, Any]) -> None:
    Document.objects.filter(pk__in=[teams["doc_a"].pk, teams["doc_b"].pk]).update(tags={"case": "c-1"})
    # a key that sees team b's document but may not purge it: the whole erasure stops
    seeing, _ = keyed(project, [{"pattern": "team:a", "actions": ALL}, {"pattern": "team:b", "actions": ["search"]}])
    refused = seeing.post("/api/v1/erasure", {"tags": {"case": "c-1"}}, format="json")
    assert (refused.status_code, refused.json()["code"]) == (403, "GRANT_REQUIRED")
    assert refused.json()["details"] == {"action": "purge"}
    assert Document.objects.filter(pk__in=[teams["doc_a"].pk, teams["doc_b"].pk]).count() == 2
    assert not ErasureReceipt.objects.filter(project=project).exists()  # never a partial erasure
    # team a's key does not reach team b's document at all: for it, that row does not exist
    erased = teams["a"].post("/api/v1/erasure", {"tags": {"case": "c-1"}}, format="json")
    assert erased.status_code == 201, erased.json()
    assert erased.json()["ids"]["document"] == [teams["doc_a"].pk]
    assert teams["doc_b"].pk not in erased.content.decode()
    assert not Document.objects.filter(pk=teams["doc_a"].pk).exists()
    assert Document.objects.filter(pk=teams["doc_b"].pk).exists()


def test_subject_erasure_needs_purge_on_the_subject_store(project: Any, teams: dict[str, Any]) -> None:
    assert teams["a"].get("/api/v1/subjects/user-9/memory-store").status_code == 201
    subject_store = MemoryStore.objects.get(project=project, subject_external_id="user-9")
    assert owner_tag(teams["key_a"].pk) in subject_store.access_tags  # made for, and owned by, team a's key
    written = teams["a"].post("/api/v1/memories", {"memory_store_id": subject_store.pk,
                                                    "content": "User nine prefers tea."}, format="json")
    assert written.status_code == 201
    assert Memory.objects.get(pk=written.json()["id"]).store_id == subject_store.pk
    # team b does not reach a's subject store: for it the subject has nothing to erase
    nothing = teams["b"].post("/api/v1/erasure", {"subject_external_id": "user-9"}, format="json")
    assert nothing.status_code == 201, nothing.json()
    assert nothing.json()["counts"].get("memory") == 0
    assert Memory.objects.filter(store__subject_external_id="user-9").count() == 1
    # a key that sees the store but may not purge it is refused
    seeing, _ = keyed(project, [{"pattern": owner_tag(teams["key_a"].pk), "actions": ["search"]}])
    MemoryStore.objects.filter(subject_external_id="user-9").update(
        access_tags=[owner_tag(teams["key_a"].pk), "team:x"])
    seeing_x, _ = keyed(project, [{"pattern": "team:x", "actions": ["search"]}])
    refused = seeing_x.post("/api/v1/erasure", {"subject_external_id": "user-9"}, format="json")
    assert (refused.status_code, refused.json()["code"]) == (403, "GRANT_REQUIRED")
    assert Memory.objects.filter(pk=written.json()["id"]).exists()  # a refused erasure erases nothing
    erased = teams["a"].post("/api/v1/erasure", {"subject_external_id": "user-9"}, format="json")
    assert erased.status_code == 201
    assert erased.json()["counts"]["memory"] == 1
    assert not Memory.objects.filter(store__subject_external_id="user-9").exists()
    assert ErasureReceipt.objects.filter(project=project, pk=erased.json()["id"]).exists()


# --------------------------------------------------------------------------- staff users with grants


def test_staff_grants_narrow_the_api_with_a_session(project: Any, teams: dict[str, Any]) -> None:
    user = staff(project, "team-a-operator", [{"pattern": "team:a", "actions": ALL},
                                              {"pattern": "team:b", "actions": ["search"]}])
    client, headers = session(user, project)
    assert listed(client, "/api/v1/documents", headers) == {teams["doc_a"].pk, teams["doc_b"].pk}
    user.memory_engine_grants.grants = [{"pattern": "team:a", "actions": ALL}]
    user.memory_engine_grants.save()
    assert listed(client, "/api/v1/documents", headers) == {teams["doc_a"].pk}
    assert listed(client, "/api/v1/memory-stores", headers) == {teams["store_a"].pk}
    hidden = client.get(f"/api/v1/documents/{teams['doc_b'].pk}", **headers)
    assert hidden.status_code == 404
    found = client.post("/api/v1/knowledge/search", {"query": "billing service runbook", "document_paths": ["/"]},
                        content_type="application/json", **headers).json()
    assert {h["document_id"] for h in found["results"] if h["source"] == "document"} == {teams["doc_a"].pk}
    # writes: allowed with the grant; a store it creates carries the user's owner tag
    assert client.delete(f"/api/v1/memories/{teams['memory_a'].pk}", **headers).status_code == 204
    created = client.post("/api/v1/memory-stores", {"name": "ops"}, content_type="application/json", **headers)
    assert created.status_code == 201, created.content
    assert MemoryStore.objects.get(pk=created.json()["id"]).access_tags == [owner_tag(f"user:{user.pk}")]


def test_staff_grants_refuse_writes_without_the_action(project: Any, teams: dict[str, Any]) -> None:
    user = staff(project, "reader-b", [{"pattern": "team:b", "actions": ["search"]}])
    client, headers = session(user, project)
    for method, path in (("delete", f"/api/v1/memories/{teams['memory_b'].pk}"),
                         ("delete", f"/api/v1/documents/{teams['doc_b'].pk}"),
                         ("post", f"/api/v1/documents/{teams['doc_b'].pk}/deprecate")):
        refused = getattr(client, method)(path, **headers)
        assert (refused.status_code, refused.json()["code"]) == (403, "GRANT_REQUIRED"), path
    agent = AgentFactory(project=project, write_memory_store=teams["store_b"], access_tags=["team:b"])
    refused = client.post(f"/api/v1/agents/{agent.pk}/tools/write_memory", {"content": "x y z"},
                          content_type="application/json", **headers)
    assert (refused.status_code, refused.json()["code"]) == (403, "GRANT_REQUIRED")
    assert Document.objects.filter(pk=teams["doc_b"].pk, deprecated_at__isnull=True).exists()


def test_superusers_and_staff_without_grants_are_not_narrowed(project: Any, teams: dict[str, Any]) -> None:
    everything = {teams["doc_a"].pk, teams["doc_b"].pk}
    root = staff(project, "root", [{"pattern": "team:a", "actions": ["search"]}], superuser=True)
    plain = staff(project, "plain")
    empty = staff(project, "empty", [])
    for user in (root, plain, empty):
        client, headers = session(user, project)
        assert listed(client, "/api/v1/documents", headers) == everything, user.username


# --------------------------------------------------------------------------- the admin


def test_admin_lists_and_actions_follow_staff_grants(project: Any, teams: dict[str, Any]) -> None:
    user = staff(project, "admin-a", [{"pattern": "team:a", "actions": ALL},
                                      {"pattern": "team:b", "actions": ["search"]}])
    client = Client()
    client.force_login(user)
    page = client.get(f"{A}/memory/")
    assert {teams["memory_a"].pk, teams["memory_b"].pk} <= set(page.context["cl"].queryset.values_list("pk", flat=True))
    # forget on a selection holding a row without the grant: refused, nothing forgotten
    refused = client.post(f"{A}/memory/", {"action": "forget",
                                           "_selected_action": [teams["memory_a"].pk, teams["memory_b"].pk]})
    assert refused.status_code == 403
    assert Memory.objects.filter(pk__in=[teams["memory_a"].pk, teams["memory_b"].pk],
                                 invalidated_at__isnull=True).count() == 2
    assert client.post(f"{A}/document/{teams['doc_b'].pk}/delete/", {"post": "yes"}).status_code == 403
    assert Document.objects.filter(pk=teams["doc_b"].pk).exists()
    refused = client.post(f"{A}/document/", {"action": "place_legal_hold", "_selected_action": [teams["doc_b"].pk]})
    assert refused.status_code == 403
    # with the grant
    done = client.post(f"{A}/memory/", {"action": "forget", "_selected_action": [teams["memory_a"].pk]})
    assert done.status_code == 302
    assert Memory.objects.get(pk=teams["memory_a"].pk).invalidated_at is not None
    # narrowed to team:a: the other rows leave the lists, details and the search playground
    user.memory_engine_grants.grants = [{"pattern": "team:a", "actions": ALL}]
    user.memory_engine_grants.save()
    documents = client.get(f"{A}/document/")
    assert set(documents.context["cl"].queryset.values_list("pk", flat=True)) == {teams["doc_a"].pk}
    assert client.get(f"{A}/document/{teams['doc_b'].pk}/change/").status_code in (302, 404)
    playground = client.get(f"{A}/project/playground/",
                            {"project": project.pk, "query": "billing service runbook", "limit": 20,
                             "min_similarity": 0, "rrf_k": 60, "channels": ["vector", "lexical"]})
    assert playground.status_code == 200
    assert playground.context.get("error") is None and playground.context["result"] is not None, \
        playground.context["form"].errors
    assert teams["doc_a"].pk in playground.content.decode() or teams["doc_a"].path in playground.content.decode()
    assert teams["doc_b"].path not in playground.content.decode()
    overview = client.get(f"{A}/project/{project.pk}/overview/")
    assert overview.status_code == 200
    assert "store-a" in overview.content.decode() and "store-b" not in overview.content.decode()
    # a staff user with grants makes no API key (one without grants would reach the whole project)
    # and deletes no project (that erases rows beyond the grants)
    assert client.get(f"{A}/apikey/add/").status_code == 403
    assert client.post(f"{A}/project/{project.pk}/delete/", {"post": "yes"}).status_code == 403


def test_staff_grants_are_managed_by_superusers_only(project: Any) -> None:
    user = staff(project, "climber", [{"pattern": "team:a", "actions": ["search"]}])
    client = Client()
    client.force_login(user)
    assert client.get(f"{A}/staffgrants/").status_code == 403
    assert client.get(f"{A}/staffgrants/{user.memory_engine_grants.pk}/change/").status_code == 403
