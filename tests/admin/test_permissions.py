"""Django model permissions hold for staff users everywhere: the API with a session cookie,
admin actions and the operator console's own views. A view-only user stays view-only."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from memory_engine.models import ApiKey, Document, Generation, MemoryStore
from tests.conftest import api_client
from tests.factories import make_key

from .conftest import World, staff_user

A = "/admin/memory_engine"
VIEW_ONLY = ["view_project", "view_memorystore", "view_memory", "view_memoryassertion", "view_document",
             "view_ingestionrule", "view_generation", "view_memoryrule", "view_agent", "view_apikey"]


def session_client(user: User) -> tuple[Client, dict[str, str]]:
    """A browser-like client: session cookie, CSRF enforced, token read from the cookie."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    client.get("/admin/")  # sets the csrftoken cookie
    return client, {"HTTP_X_CSRFTOKEN": client.cookies["csrftoken"].value}


@pytest.fixture
def viewer(mine: World) -> User:
    user = staff_user("viewer", codenames=VIEW_ONLY)
    mine.project.members.add(user)
    return user


# --------------------------------------------------------------------------- the API with a session


def test_view_only_session_cannot_write_through_the_api(viewer: User, mine: World) -> None:
    client, csrf = session_client(viewer)
    project = {"HTTP_X_PROJECT_ID": mine.project.pk, **csrf}
    assert client.get("/api/v1/memory-stores", **project).status_code == 200
    created = client.post("/api/v1/memory-stores", {"name": "sneaky"}, content_type="application/json", **project)
    assert created.status_code == 403, created.content
    assert created.json()["code"] == "MODEL_PERMISSION_REQUIRED"
    assert created.json()["details"]["missing"] == ["memory_engine.add_memorystore"]
    assert not MemoryStore.objects.filter(name="sneaky").exists()
    deleted = client.delete(f"/api/v1/documents/{mine.ready.pk}", **project)
    assert deleted.status_code == 403 and Document.objects.filter(pk=mine.ready.pk).exists()
    reingest = client.post(f"/api/v1/documents/{mine.ready.pk}/ingest", {}, content_type="application/json",
                           **project)
    assert reingest.status_code == 403
    assert reingest.json()["details"]["missing"] == ["memory_engine.change_document"]
    memory = client.post("/api/v1/memories", {"memory_store_id": mine.store.pk, "content": "x"},
                         content_type="application/json", **project)
    assert memory.status_code == 403
    forget = client.delete(f"/api/v1/memories/{mine.new.pk}", **project)
    assert forget.status_code == 403
    complete = client.post(f"/api/v1/generations/{mine.generation.pk}/complete", {"output": "x"},
                           content_type="application/json", **project)
    assert complete.status_code == 403
    rule = client.patch(f"/api/v1/memory-stores/{mine.store.pk}/rules/{mine.rule.pk}", {"enabled": False},
                        content_type="application/json", **project)
    assert rule.status_code == 403
    # Reads that travel as POST stay open to a viewer.
    search = client.post("/api/v1/knowledge/search", {"query": "office"}, content_type="application/json",
                         **project)
    assert search.status_code == 200, search.content
    context = client.post(f"/api/v1/agents/{mine.agent.pk}/context", {"messages": [
        {"role": "user", "content": "office"}]}, content_type="application/json", **project)
    assert context.status_code == 200, context.content


def test_session_with_add_permission_can_create(mine: World) -> None:
    user = staff_user("writer", codenames=[*VIEW_ONLY, "add_memorystore", "delete_document"])
    mine.project.members.add(user)
    client, csrf = session_client(user)
    project = {"HTTP_X_PROJECT_ID": mine.project.pk, **csrf}
    created = client.post("/api/v1/memory-stores", {"name": "allowed"}, content_type="application/json", **project)
    assert created.status_code == 201, created.content
    assert client.delete(f"/api/v1/documents/{mine.ready.pk}", **project).status_code == 204
    # Without the CSRF token the session cannot write at all.
    refused = client.post("/api/v1/memory-stores", {"name": "nocsrf"}, content_type="application/json",
                          HTTP_X_PROJECT_ID=mine.project.pk)
    assert refused.status_code == 403 and not MemoryStore.objects.filter(name="nocsrf").exists()


def test_search_needs_view_permissions(mine: World) -> None:
    user = staff_user("blind", codenames=["view_project", "view_agent"])
    mine.project.members.add(user)
    client, csrf = session_client(user)
    response = client.post("/api/v1/knowledge/search", {"query": "office"}, content_type="application/json",
                           HTTP_X_PROJECT_ID=mine.project.pk, **csrf)
    assert response.status_code == 403
    assert set(response.json()["details"]["missing"]) == {"memory_engine.view_memory", "memory_engine.view_document"}


def test_staff_session_cannot_name_another_project(mine: World, theirs: World) -> None:
    """A staff member (every permission, not a superuser) naming a project they are not a
    member of, by header or query parameter, gets the answer of a project that does not
    exist, reads and writes alike; a superuser reaches it."""
    member = staff_user("member")
    mine.project.members.add(member)
    client, csrf = session_client(member)
    for project_id in (theirs.project.pk, "prj_doesnotexist"):
        for named in ({"HTTP_X_PROJECT_ID": project_id}, {}):
            query = "" if named else f"?project_id={project_id}"
            listed = client.get(f"/api/v1/memories{query}", **named)
            assert listed.status_code == 404 and listed.json()["code"] == "PROJECT_NOT_FOUND", listed.content
            store = client.get(f"/api/v1/memory-stores/{theirs.store.pk}{query}", **named)
            assert store.status_code == 404 and store.json()["code"] == "PROJECT_NOT_FOUND"
            created = client.post(f"/api/v1/memory-stores{query}", {"name": "planted"},
                                  content_type="application/json", **named, **csrf)
            assert created.status_code == 404 and created.json()["code"] == "PROJECT_NOT_FOUND"
    assert not MemoryStore.objects.filter(name="planted").exists()
    # the member's own project answers; a superuser reaches the other one
    assert client.get("/api/v1/memories", HTTP_X_PROJECT_ID=mine.project.pk).status_code == 200
    root = User.objects.create_superuser("root", "root@example.com", "pw")
    superuser, _ = session_client(root)
    stores = superuser.get("/api/v1/memory-stores", HTTP_X_PROJECT_ID=theirs.project.pk)
    assert stores.status_code == 200 and [s["id"] for s in stores.json()["results"]] == [theirs.store.pk]


def test_api_keys_keep_their_scope(mine: World) -> None:
    """Keys are not users: a read-write key writes without any Django permission."""
    response = api_client(make_key(mine.project)).post("/api/v1/memory-stores", {"name": "by-key"}, format="json")
    assert response.status_code == 201


def test_every_api_view_names_its_session_permissions() -> None:
    """A new endpoint must map to model permissions (or say which), or staff sessions get a 500."""
    from memory_engine.api import urls as api_urls
    from memory_engine.api.documents import ConverterCallbackView, DocumentFileView
    from memory_engine.api.permissions import session_permissions

    seen = {}
    for pattern in api_urls.urlpatterns:
        callback = pattern.callback
        cls = getattr(callback, "cls", None)
        if cls is None or cls in (ConverterCallbackView, DocumentFileView):  # signed URLs: no session
            continue
        actions = getattr(callback, "actions", None) or {m: m for m in ("get", "post", "put", "patch", "delete")
                                                          if hasattr(cls, m)}
        view = cls(**getattr(callback, "initkwargs", {}))
        for method in actions:
            perms = session_permissions(SimpleNamespace(method=method.upper()), view)
            seen[(str(pattern.pattern), method)] = perms
    assert seen[("memory-stores/<str:store_id>/rules", "post")] == ["memory_engine.add_memoryrule"]
    assert seen[("^documents/(?P<pk>[^/.]+)/ingest$", "post")] == ["memory_engine.change_document"]
    assert seen[("^documents/ingest$", "post")] == ["memory_engine.add_document"]
    assert seen[("^generations/(?P<pk>[^/.]+)/complete$", "post")] == ["memory_engine.change_generation"]
    assert seen[("^memories/(?P<pk>[^/.]+)$", "delete")] == ["memory_engine.delete_memory"]
    assert seen[("agents/<str:agent_id>/tools/write_memory", "post")] == ["memory_engine.add_memory"]
    assert seen[("embeddings", "post")] == []
    assert seen[("memory-schema", "put")] == ["memory_engine.change_memoryschema"]
    assert seen[("memory-schema", "get")] == ["memory_engine.view_memoryschema"]


# --------------------------------------------------------------------------- admin actions and console views


def test_view_only_user_cannot_run_admin_actions(viewer: User, mine: World,
                                                 django_capture_on_commit_callbacks: Any) -> None:
    client, csrf = session_client(viewer)
    documents = f"{A}/document/"
    listing = client.get(documents)
    assert listing.status_code == 200
    assert listing.context["action_form"] is None  # no action is offered to a viewer
    before = Document.objects.get(pk=mine.ready.pk)
    for action in ["reingest", "reingest_with_settings", "reembed_missing"]:
        with django_capture_on_commit_callbacks(execute=True):
            response = client.post(documents, {"action": action, "_selected_action": [mine.ready.pk], "apply": "1",
                                               "strategy": "size", "size": "20", "overlap": "4"}, **csrf)
        assert response.status_code in (200, 302), action
        assert "queued" not in response.content.decode() and "Chunk size" not in response.content.decode()
    after = Document.objects.get(pk=mine.ready.pk)
    assert (after.chunk_strategy, after.attempts, after.ingested_at) == (before.chunk_strategy, before.attempts,
                                                                        before.ingested_at)
    generation = Generation.objects.get(pk=mine.generation.pk)
    fired = client.post(f"{A}/generation/", {"action": "fire_rules", "_selected_action": [generation.pk]},
                        follow=True, **csrf)
    assert "Enqueued" not in fired.content.decode()
    key = ApiKey.objects.filter(project=mine.project).first()
    revoked = client.post(f"{A}/apikey/", {"action": "revoke", "_selected_action": [key.pk]}, follow=True, **csrf)
    assert "Revoked 1 key" not in revoked.content.decode()
    key.refresh_from_db()
    assert key.revoked_at is None


def test_dry_run_needs_change_permission_on_the_rule(viewer: User, mine: World) -> None:
    client, csrf = session_client(viewer)
    url = f"{A}/memoryrule/{mine.rule.pk}/dry-run/"
    assert client.get(url).status_code == 403
    assert client.post(url, {"transcript": "user: fact x"}, **csrf).status_code == 403
    editor = staff_user("editor", codenames=[*VIEW_ONLY, "change_memoryrule"])
    mine.project.members.add(editor)
    client, csrf = session_client(editor)
    assert client.get(url).status_code == 200


def test_actions_work_with_change_permission(mine: World) -> None:
    user = staff_user("operator", codenames=[*VIEW_ONLY, "change_apikey", "change_generation", "change_document"])
    mine.project.members.add(user)
    client, csrf = session_client(user)
    offered = {name for name, _ in client.get(f"{A}/document/").context["action_form"].fields["action"].choices}
    assert {"reingest", "reingest_with_settings", "reembed_missing"} <= offered
    fired = client.post(f"{A}/generation/", {"action": "fire_rules", "_selected_action": [mine.generation.pk]},
                        follow=True, **csrf)
    assert "Enqueued" in fired.content.decode()
    key = ApiKey.objects.filter(project=mine.project).first()
    client.post(f"{A}/apikey/", {"action": "revoke", "_selected_action": [key.pk]}, follow=True, **csrf)
    key.refresh_from_db()
    assert key.revoked_at is not None
