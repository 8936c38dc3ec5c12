"""Feed cursors are opaque per project (docs/feed.md, *Cursors*): a client's cursor carries its
position sealed under the project's key, so it reveals nothing of the server-wide transaction
counter (other tenants' activity); another project's feed refuses it, as a changed one or a
readable position; a key rotated the Django way (SECRET_KEY_FALLBACKS) keeps it working. The
readers inside the server (distillers, webhook deliveries) keep the position itself and show it
sealed (the distiller's and the subscription's `cursor`, a delivery's cursors and its POST).

The feed only shows committed transactions, so these tests commit (transactional_db)."""

from __future__ import annotations

import base64
import json
import struct
from typing import Any

import pytest

from memory_engine.models import Distiller, FeedEntry, WebhookSubscription
from memory_engine.services.memories import memory_write
from memory_engine.webhooks import webhook_deliver
from tests.httpserver import LocalServer

from ..conftest import api_client
from ..factories import MemoryStoreFactory, ProjectFactory, make_key

pytestmark = pytest.mark.django_db(transaction=True)


def _project(texts: list[str]) -> tuple[Any, Any]:
    project = ProjectFactory()
    store = MemoryStoreFactory(project=project)
    for text in texts:
        memory_write(store=store, content=text, principal="test")
    return project, api_client(make_key(project))


def _readable(position: tuple[int, int]) -> str:
    """A position in the form cursors had before they were sealed (``f1.<txid>.<seq>``)."""
    return base64.urlsafe_b64encode(f"f1.{position[0]}.{position[1]}".encode()).decode().rstrip("=")


def _says_nothing_of(cursor: str, txid: int) -> None:
    assert cursor.startswith("c2") and str(txid) not in cursor
    raw = base64.urlsafe_b64decode(cursor[2:] + "=" * (-len(cursor[2:]) % 4))
    assert str(txid).encode() not in raw and struct.pack(">Q", txid) not in raw


def test_a_cursor_reveals_no_position_and_belongs_to_its_project(hashing_embedder: None) -> None:
    project, client = _project(["The office plants are watered on Mondays.", "Invoices are paid within 30 days."])
    _, other_client = _project(["Parking is free after six."])
    page = client.get("/api/v1/feed", {"limit": 1})
    assert page.status_code == 200, page.json()
    cursor = page.json()["next_cursor"]
    first = FeedEntry.objects.filter(project=project).order_by("txid", "seq").first()
    assert first is not None
    _says_nothing_of(cursor, first.txid)
    # another project's feed refuses it, as any cursor it did not issue
    refused = other_client.get("/api/v1/feed", {"after": cursor})
    assert (refused.status_code, refused.json()["code"]) == (400, "FEED_CURSOR_INVALID")
    # one character changed: refused
    tampered = cursor[:-1] + ("A" if cursor[-1] != "A" else "B")
    assert client.get("/api/v1/feed", {"after": tampered}).json()["code"] == "FEED_CURSOR_INVALID"
    # a readable position (the form cursors had) is refused: a client may not name positions
    readable = client.get("/api/v1/feed", {"after": _readable((first.txid, first.seq))})
    assert (readable.status_code, readable.json()["code"]) == (400, "FEED_CURSOR_INVALID")
    # it resumes: the rest of the feed, then the same cursor back
    rest = client.get("/api/v1/feed", {"after": cursor}).json()
    assert rest["entries"] and all(e["id"] != page.json()["entries"][0]["id"] for e in rest["entries"])
    assert client.get("/api/v1/feed", {"after": rest["next_cursor"]}).json() == {
        "entries": [], "next_cursor": rest["next_cursor"]}


def test_a_rotated_secret_key_in_the_fallbacks_keeps_cursors(hashing_embedder: None, settings: Any) -> None:
    project, client = _project(["The office plants are watered on Mondays.", "Invoices are paid within 30 days."])
    first = client.get("/api/v1/feed", {"limit": 1}).json()
    cursor = first["next_cursor"]
    old = settings.SECRET_KEY
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = "a-new-secret-key-for-the-rotation-test-0123456789", [old]
    resumed = client.get("/api/v1/feed", {"after": cursor})
    assert resumed.status_code == 200, resumed.json()
    assert [e["id"] for e in resumed.json()["entries"]] == [
        e.object_id for e in FeedEntry.objects.filter(project=project).order_by("txid", "seq")[1:]]
    assert resumed.json()["next_cursor"] != cursor  # issued under the new key
    settings.SECRET_KEY_FALLBACKS = []
    gone = client.get("/api/v1/feed", {"after": cursor})
    assert (gone.status_code, gone.json()["code"]) == (400, "FEED_CURSOR_INVALID")


def test_server_side_readers_keep_the_position_and_show_it_sealed(hashing_embedder: None, settings: Any) -> None:
    """A distiller's and a webhook subscription's `cursor`, a delivery's cursors and its POST show
    the sealed cursor (which GET /feed resumes from); the rows keep the position."""
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "OUTBOUND_ALLOW": ["127.0.0.1"]}
    project, client = _project(["The office plants are watered on Mondays."])
    store = MemoryStoreFactory(project=project)
    with LocalServer(lambda method, path, headers, body: (200, b"")) as server:
        hook = client.post("/api/v1/webhooks", {"url": f"{server.url}/hook"}, format="json").json()
        memory_write(store=store, content="Invoices are paid within 30 days.", principal="test")
        delivery = webhook_deliver(subscription_id=hook["id"])
        assert delivery is not None and delivery.status == "delivered"
        posted = server.requests[0]
    stored = WebhookSubscription.objects.get(pk=hook["id"]).cursor
    last = FeedEntry.objects.filter(project=project).order_by("txid", "seq").last()
    assert last is not None and stored == _readable((last.txid, last.seq))  # the position, server-side
    shown = client.get(f"/api/v1/webhooks/{hook['id']}").json()["cursor"]
    deliveries = client.get(f"/api/v1/webhooks/{hook['id']}/deliveries").json()["results"]
    batch = json.loads(posted["body"])
    assert shown == batch["cursor"] == deliveries[0]["cursor_to"] != stored
    assert posted["headers"]["X-Memory-Engine-Delivery-From"] == deliveries[0]["cursor_from"] == hook["cursor"]
    for cursor in (shown, hook["cursor"]):
        _says_nothing_of(cursor, last.txid)
    assert client.get("/api/v1/feed", {"after": shown}).json() == {"entries": [], "next_cursor": shown}

    distiller = client.post("/api/v1/distillers", {"memory_store_id": store.pk}, format="json").json()
    assert distiller["cursor"] == ""  # nothing read yet
    Distiller.objects.filter(pk=distiller["id"]).update(cursor=stored)
    assert client.get(f"/api/v1/distillers/{distiller['id']}").json()["cursor"] == shown
