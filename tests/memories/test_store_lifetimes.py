"""A store's lifetimes over HTTP: ttl_default / ttl_max / trash_days set on the store shape the
memories written into it, and nonsense is refused with LIFETIME_INVALID (docs/memory.md)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memory_engine.models import Memory

pytestmark = pytest.mark.django_db

STORES = "/api/v1/memory-stores"


def test_store_lifetimes_apply_to_writes(client):
    created = client.post(STORES, {"name": "session", "ttl_default": 3600, "ttl_max": 86400, "trash_days": 2},
                          format="json")
    assert created.status_code == 201, created.json()
    store = created.json()
    assert (store["ttl_default"], store["ttl_max"], store["trash_days"]) == (3600, 86400, 2)
    before = timezone.now()
    plain = client.post("/api/v1/memories", {"memory_store_id": store["id"],
                                             "content": "The visitor parked on level 3."}, format="json")
    assert plain.status_code == 201, plain.json()
    expires = Memory.objects.get(pk=plain.json()["id"]).expires_at
    assert expires is not None and timedelta(seconds=3590) < expires - before < timedelta(seconds=3610)
    # A writer's later expiry is capped at ttl_max.
    far = (timezone.now() + timedelta(days=30)).isoformat()
    capped = client.post("/api/v1/memories", {"memory_store_id": store["id"], "expires_at": far,
                                              "content": "The visitor badge number is 4411."}, format="json")
    assert capped.status_code == 201, capped.json()
    expires = Memory.objects.get(pk=capped.json()["id"]).expires_at
    assert expires is not None and expires - before < timedelta(seconds=86410)
    # Lifetimes can be cleared again.
    cleared = client.patch(f"{STORES}/{store['id']}", {"ttl_default": None, "ttl_max": None}, format="json")
    assert cleared.status_code == 200 and cleared.json()["ttl_default"] is None


@pytest.mark.parametrize("body", [
    {"ttl_default": 0},
    {"ttl_max": -5},
    {"trash_days": -1},
    {"ttl_default": 7200, "ttl_max": 3600},
])
def test_nonsense_lifetimes_are_refused(client, body):
    response = client.post(STORES, {"name": "bad", **body}, format="json")
    assert response.status_code == 400 and response.json()["code"] == "LIFETIME_INVALID", response.json()
    assert all(store["name"] != "bad" for store in client.get(STORES).json()["results"])
