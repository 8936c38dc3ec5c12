"""Webhooks on the change feed (docs/webhooks.md): subscriptions through the API and the admin,
the outbound guard on their URL, and delivery by a real django-q2 worker to a real receiver on
127.0.0.1 — retried with backoff after failures, delivered once, signed."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from memory_engine.models import WebhookDelivery, WebhookSubscription
from memory_engine.providers.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, signature_matches
from memory_engine.queue import WEBHOOKS_SCHEDULE_NAME, WEBHOOKS_TASK
from memory_engine.selectors.feed import shown_cursor
from memory_engine.services.keys import api_key_create
from memory_engine.services.memories import memory_write
from memory_engine.webhooks import webhooks_dispatch
from tests.conftest import api_client, wait_for
from tests.factories import MemoryStoreFactory, ProjectFactory
from tests.httpserver import LocalServer

WEBHOOKS = "/api/v1/webhooks"


def engine(settings: Any, **values: Any) -> None:
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, **values}


class Receiver:
    """Answers ``statuses`` in turn (then 200) and keeps what it was sent."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = list(statuses)
        self.lock = threading.Lock()

    def __call__(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, Any]:
        with self.lock:
            status = self.statuses.pop(0) if self.statuses else 200
        return status, b""


@pytest.mark.django_db
def test_a_private_url_is_refused_unless_outbound_allow_names_it(settings: Any, project: Any, client: Any) -> None:
    engine(settings, OUTBOUND_ALLOW=[])
    refused = client.post(WEBHOOKS, {"url": "http://127.0.0.1:9/hook"}, format="json")
    assert (refused.status_code, refused.json()["code"]) == (400, "URL_NOT_ALLOWED")
    assert not WebhookSubscription.objects.exists()
    engine(settings, OUTBOUND_ALLOW=["127.0.0.1"])
    created = client.post(WEBHOOKS, {"url": "http://127.0.0.1:9/hook", "event_kinds": ["memory"]}, format="json")
    assert created.status_code == 201, created.json()
    body = created.json()
    assert len(body["secret"]) >= 40 and body["event_kinds"] == ["memory"]
    shown = client.get(f"{WEBHOOKS}/{body['id']}").json()
    assert "secret" not in shown  # shown once, in the answer that created it
    other = api_client(api_key_create(project=ProjectFactory())[1])
    assert other.get(f"{WEBHOOKS}/{body['id']}").status_code == 404


@pytest.mark.django_db
def test_a_key_with_grants_cannot_follow_the_whole_feed(project: Any, client: Any) -> None:
    existing = client.post(WEBHOOKS, {"url": "http://127.0.0.1:9/hook"}, format="json").json()
    _, raw = api_key_create(project=project, grants=[{"pattern": "team:a", "actions": ["search"]}])
    narrowed = api_client(raw)
    refused = narrowed.post(WEBHOOKS, {"url": "http://127.0.0.1:9/other"}, format="json")
    assert (refused.status_code, refused.json()["code"]) == (403, "GRANT_REQUIRED")
    assert narrowed.get(WEBHOOKS).json()["results"] == []
    assert narrowed.get(f"{WEBHOOKS}/{existing['id']}").status_code == 404
    assert narrowed.delete(f"{WEBHOOKS}/{existing['id']}").status_code == 404
    assert WebhookSubscription.objects.filter(project=project).count() == 1


@pytest.mark.django_db
def test_the_schedule_exists() -> None:
    from django_q.models import Schedule

    assert Schedule.objects.get(name=WEBHOOKS_SCHEDULE_NAME).func == WEBHOOKS_TASK


@pytest.mark.django_db(transaction=True)  # the feed shows committed changes only
def test_failed_posts_back_off_and_the_batch_is_retried_unchanged(project: Any, client: Any) -> None:
    """In process (no worker): the cursor holds on failure; the next attempt waits."""
    receiver = Receiver([500, 503])
    with LocalServer(receiver) as server:
        hook = client.post(WEBHOOKS, {"url": f"{server.url}/hook"}, format="json").json()
        store = MemoryStoreFactory(project=project)
        memory_write(store=store, content="The office moved to Lyon.", principal="test")
        assert webhooks_dispatch() == 1
        first = WebhookDelivery.objects.get(subscription_id=hook["id"])
        assert (first.status, first.attempt, first.http_status) == ("failed", 1, 500)
        assert webhooks_dispatch() == 0  # not due yet: backing off
        subscription = WebhookSubscription.objects.get(pk=hook["id"])
        assert subscription.next_attempt_at == first.next_retry_at > timezone.now()
        subscription.next_attempt_at = timezone.now() - timedelta(seconds=1)
        subscription.save()
        assert webhooks_dispatch() == 1
        second = WebhookDelivery.objects.filter(subscription_id=hook["id"]).order_by("-created_at").first()
        assert (second.status, second.attempt, second.http_status) == ("failed", 2, 503)
        assert second.next_retry_at - second.created_at > first.next_retry_at - first.created_at  # doubled
        assert [r["body"] for r in server.requests][0] == server.requests[1]["body"]  # the same batch
    deliveries = client.get(f"{WEBHOOKS}/{hook['id']}/deliveries").json()["results"]
    assert [d["status"] for d in deliveries] == ["failed", "failed"]


@pytest.fixture
def qcluster_env() -> dict[str, str]:
    return {"MEMORY_ENGINE_EMBEDDING_PROVIDER": "tests.providers.HashingEmbeddingProvider", "Q_WORKERS": "1"}


@pytest.mark.slow
def test_a_real_worker_retries_and_delivers_once_signed(qcluster: Any, hashing_embedder: Any) -> None:
    """The receiver fails twice, then accepts: three POSTs of the same batch, one delivered,
    every memory written once, the signature checks, and nothing is sent again afterwards."""
    from django_q.tasks import async_task

    project = ProjectFactory()
    client = api_client(api_key_create(project=project)[1])
    receiver = Receiver([500, 502])
    with LocalServer(receiver) as server:
        hook = client.post(WEBHOOKS, {"url": f"{server.url}/hook", "event_kinds": ["memory"]}, format="json").json()
        store = MemoryStoreFactory(project=project)
        written = [memory_write(store=store, content=f"Fact number {i} about the Lyon office.", principal="test",
                                duplicate_threshold=1.0, supersede_threshold=1.0).memory.pk for i in range(5)]

        def attempts() -> int:
            return WebhookDelivery.objects.filter(subscription_id=hook["id"]).count()

        for expected in (1, 2, 3):
            # the backoff has passed: a retry is due now (the worker's Schedule or this call runs it)
            WebhookSubscription.objects.filter(pk=hook["id"]).update(next_attempt_at=timezone.now())
            async_task("memory_engine.tasks.webhooks_dispatch_task")
            wait_for(lambda expected=expected: attempts() >= expected, timeout=60)
        async_task("memory_engine.tasks.webhooks_dispatch_task")  # nothing new: nothing sent
        wait_for(lambda: WebhookSubscription.objects.get(pk=hook["id"]).failures == 0, timeout=60)
        requests = list(server.requests)

    deliveries = list(WebhookDelivery.objects.filter(subscription_id=hook["id"]).order_by("created_at"))
    assert [(d.status, d.attempt, d.http_status) for d in deliveries] == [
        ("failed", 1, 500), ("failed", 2, 502), ("delivered", 3, 200)]
    assert deliveries[0].next_retry_at and deliveries[1].next_retry_at and deliveries[2].next_retry_at is None
    assert len(requests) == 3 and len({r["body"] for r in requests}) == 1  # the same batch, retried
    batch = json.loads(requests[-1]["body"])
    assert [e["id"] for e in batch["events"]] == written  # each memory once, in commit order
    secret = WebhookSubscription.objects.get(pk=hook["id"]).secret
    headers = requests[-1]["headers"]
    assert signature_matches(secret, requests[-1]["body"], headers[SIGNATURE_HEADER],
                             timestamp=headers[TIMESTAMP_HEADER])
    assert not signature_matches("another secret", requests[-1]["body"], headers[SIGNATURE_HEADER],
                                 timestamp=headers[TIMESTAMP_HEADER])
    # the position stays on the server; the receiver gets it sealed, as GET /feed gives it
    stored = WebhookSubscription.objects.get(pk=hook["id"]).cursor
    assert batch["cursor"] == shown_cursor(stored, project_id=project.pk) != stored
    assert client.get("/api/v1/feed", {"after": batch["cursor"]}).json() == {"entries": [],
                                                                             "next_cursor": batch["cursor"]}


@pytest.mark.django_db
def test_staff_create_subscriptions_in_the_admin_and_see_deliveries(settings: Any, project: Any) -> None:
    root = User.objects.create_superuser("root", "root@example.com", "pw")
    admin = Client()
    admin.force_login(root)
    engine(settings, OUTBOUND_ALLOW=[])
    refused = admin.post("/admin/memory_engine/webhooksubscription/add/",
                         {"project": project.pk, "url": "http://127.0.0.1:9/hook", "active": "on"})
    assert refused.status_code == 200 and b"URL_NOT_ALLOWED" in refused.content
    engine(settings, OUTBOUND_ALLOW=["127.0.0.1"])
    added = admin.post("/admin/memory_engine/webhooksubscription/add/",
                       {"project": project.pk, "url": "http://127.0.0.1:9/hook", "active": "on",
                        "event_kinds": ["assertion"], "deliveries-TOTAL_FORMS": "0",
                        "deliveries-INITIAL_FORMS": "0"})
    # the secret is shown once, in the answer to the request that created it
    subscription = WebhookSubscription.objects.get(project=project)
    assert added.status_code == 200 and subscription.secret.encode() in added.content
    assert "no-store" in added["Cache-Control"]
    assert subscription.event_kinds == ["assertion"] and subscription.created_by == "user:root"
    WebhookDelivery.objects.create(subscription=subscription, status="failed", attempt=1, http_status=500,
                                   event_count=2, cursor_to="x", error="answered HTTP 500")
    page = admin.get(f"/admin/memory_engine/webhooksubscription/{subscription.pk}/change/")
    assert page.status_code == 200 and b"answered HTTP 500" in page.content
    assert subscription.secret.encode() not in page.content
