"""GET /api/v1/timeline: one event per document of the caller's reach, newest capture first; a
document captured again rises; forgotten ones leave; pages with `before`."""

from __future__ import annotations

from typing import Any

import pytest

from memory_engine.models import Document
from memory_engine.services.keys import api_key_create
from tests.conftest import api_client

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("hashing_embedder")]
TIMELINE = "/api/v1/timeline"


def capture(client: Any, ref: str, text: str) -> dict[str, Any]:
    answer = client.put(f"/api/v1/documents/by-ref/wiki/{ref}", {"content": text, "title": ref.title(), "wait": True},
                        format="json")
    assert answer.status_code in (200, 201), answer.content
    return answer.json()


def events(client: Any, **params: Any) -> list[dict[str, Any]]:
    answer = client.get(TIMELINE, params)
    assert answer.status_code == 200, answer.content
    return answer.json()["events"]


def test_newest_capture_first_and_a_recapture_rises(client: Any, project: Any) -> None:
    for ref in ("parking", "lunch", "badges"):
        capture(client, ref, f"The {ref} policy, first edition.")
    assert [e["title"] for e in events(client)] == ["Badges", "Lunch", "Parking"]
    capture(client, "parking", "The parking policy, second edition.")
    first = events(client)[0]
    assert first["title"] == "Parking" and first["source"] == "wiki" and first["principal_id"].startswith("key:")
    document = Document.objects.get(pk=first["document_id"])
    assert first["version_id"] == document.active_version_id and document.versions.count() == 2
    older = events(client, before=first["at"])
    assert [e["title"] for e in older] == ["Badges", "Lunch"]
    assert [e["title"] for e in events(client, limit=1)] == ["Parking"]
    forgotten = client.post(f"/api/v1/documents/{first['document_id']}/forget", {"reason": "old"}, format="json")
    assert forgotten.status_code == 200
    assert "Parking" not in [e["title"] for e in events(client)]


def test_each_principal_sees_its_reach(project: Any) -> None:
    team_a = api_client(api_key_create(
        project=project, grants=[{"pattern": "team:a", "actions": ["search", "add"]}])[1])
    team_b = api_client(api_key_create(
        project=project, grants=[{"pattern": "team:b", "actions": ["search", "add"]}])[1])
    capture(team_a, "a-notes", "Notes of team a.")
    capture(team_b, "b-notes", "Notes of team b.")
    assert [e["title"] for e in events(team_a)] == ["A-Notes"]
    assert [e["title"] for e in events(team_b)] == ["B-Notes"]


def test_its_query_is_checked(client: Any) -> None:
    for params, code in (({"limit": 0}, "VALIDATION_ERROR"), ({"befor": "2026-01-01T00:00:00Z"}, "UNKNOWN_FIELD")):
        answer = client.get(TIMELINE, params)
        assert (answer.status_code, answer.json()["code"]) == (400, code), params
