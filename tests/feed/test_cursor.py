"""Feed cursors are opaque per project (docs/feed.md, *Cursors*): a cursor carries its position
sealed under the project's key, so it reveals nothing of the server-wide transaction counter
(other tenants' activity), another project's feed refuses it, a tampered one is refused, and a
cursor of the earlier, readable form still resumes.

The feed only shows committed transactions, so these tests commit (transactional_db)."""

from __future__ import annotations

import base64
import struct
from typing import Any

import pytest

from memory_engine.models import FeedEntry
from memory_engine.services.memories import memory_write

from ..conftest import api_client
from ..factories import MemoryStoreFactory, ProjectFactory, make_key

pytestmark = pytest.mark.django_db(transaction=True)


def _project(texts: list[str]) -> tuple[Any, Any]:
    project = ProjectFactory()
    store = MemoryStoreFactory(project=project)
    for text in texts:
        memory_write(store=store, content=text, principal="test")
    return project, api_client(make_key(project))


def test_a_cursor_reveals_no_position_and_belongs_to_its_project(hashing_embedder: None) -> None:
    project, client = _project(["The office plants are watered on Mondays."])
    _, other_client = _project(["Invoices are paid within 30 days."])
    page = client.get("/api/v1/feed", {"limit": 1})
    assert page.status_code == 200, page.json()
    cursor = page.json()["next_cursor"]
    first = FeedEntry.objects.filter(project=project).order_by("txid", "seq").first()
    assert first is not None
    raw = base64.urlsafe_b64decode(cursor[2:] + "=" * (-len(cursor[2:]) % 4)) if cursor.startswith("c2") else b""
    readable = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    for form in (raw, readable):
        assert str(first.txid).encode() not in form and struct.pack(">Q", first.txid) not in form
    # another project's feed refuses it, as any cursor it did not issue
    refused = other_client.get("/api/v1/feed", {"after": cursor})
    assert (refused.status_code, refused.json()["code"]) == (400, "FEED_CURSOR_INVALID")
    # one character changed: refused
    tampered = cursor[:-1] + ("A" if cursor[-1] != "A" else "B")
    assert client.get("/api/v1/feed", {"after": tampered}).status_code == 400
    # it resumes: the rest of the feed, then the same cursor back
    rest = client.get("/api/v1/feed", {"after": cursor}).json()
    assert rest["entries"] and all(e["id"] != page.json()["entries"][0]["id"] for e in rest["entries"])
    assert client.get("/api/v1/feed", {"after": rest["next_cursor"]}).json() == {
        "entries": [], "next_cursor": rest["next_cursor"]}


def test_a_cursor_of_the_earlier_readable_form_still_resumes(hashing_embedder: None) -> None:
    project, client = _project(["The office plants are watered on Mondays.", "Invoices are paid within 30 days."])
    entries = list(FeedEntry.objects.filter(project=project).order_by("txid", "seq"))
    first = entries[0]
    legacy = base64.urlsafe_b64encode(f"f1.{first.txid}.{first.seq}".encode()).decode().rstrip("=")
    page = client.get("/api/v1/feed", {"after": legacy})
    assert page.status_code == 200, page.json()
    assert [e["id"] for e in page.json()["entries"]] == [e.object_id for e in entries[1:]]
    assert page.json()["next_cursor"].startswith("c2")
