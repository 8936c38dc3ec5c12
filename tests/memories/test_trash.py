"""Forget by tier, the trash, restore and the purge (docs/memory.md, "Expiry, forget and the trash")."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memory_engine.models import Memory, MemoryAssertion, MemoryContent
from memory_engine.services.memories import memory_write
from memory_engine.services.memory_lifecycle import memory_forget, memory_restore, memory_sweep
from tests.factories import MemoryStoreFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _embedder(hashing_embedder):
    pass


def write(store, text, **kwargs):
    return memory_write(store=store, content=text, principal="test", **kwargs).memory


def user_store(project):
    return MemoryStoreFactory(project=project, tier="user", subject_external_id="u-1")


def test_user_tier_forget_deletes_at_once_and_the_ledger_keeps_the_row(client, project):
    store = user_store(project)
    memory = write(store, "The user lives in Bergen.")
    content_id = memory.content_id
    response = client.delete(f"/api/v1/memories/{memory.pk}")
    assert response.status_code == 204
    assert not Memory.objects.filter(pk=memory.pk).exists()
    assert not MemoryContent.objects.filter(pk=content_id).exists()  # nothing else used the text
    row = MemoryAssertion.objects.get(memory_id=memory.pk, outcome="forgotten")
    assert row.content == "The user lives in Bergen." and row.replaced_memory_id == memory.pk
    gone = client.get(f"/api/v1/memories/{memory.pk}")
    assert gone.status_code == 404 and gone.json() == client.get("/api/v1/memories/mem_unknown").json()
    assert client.post(f"/api/v1/memories/{memory.pk}/restore").status_code == 404
    ledger = client.get("/api/v1/memory-assertions", {"memory_id": memory.pk}).json()["results"]
    assert {r["outcome"] for r in ledger} == {"created", "forgotten"}


def test_user_tier_forget_keeps_a_content_row_another_memory_uses(project):
    store = user_store(project)
    old = write(store, "The user prefers tea.", about={"kind": "preference", "key": "drink"})
    write(store, "The user prefers coffee.", about={"kind": "preference", "key": "drink"})
    # the superseded memory's text is still used by it: forgetting the new one leaves it alone
    new = Memory.objects.get(store=store, invalidated_at__isnull=True)
    memory_forget(memory=new, principal="test")
    assert Memory.objects.filter(pk=old.pk).exists()
    assert MemoryContent.objects.filter(pk=old.content_id).exists()


@pytest.mark.parametrize("tier", ["institutional", "agent"])
def test_agent_and_institutional_forget_go_to_the_trash_and_restore(client, project, tier):
    from tests.factories import AgentFactory

    agent = AgentFactory(project=project) if tier == "agent" else None
    store = MemoryStoreFactory(project=project, tier=tier, agent=agent)
    memory = write(store, "The deploy window is Tuesday.")
    assert client.delete(f"/api/v1/memories/{memory.pk}").status_code == 204
    memory.refresh_from_db()
    assert memory.trashed_at is not None and memory.invalidated_at == memory.trashed_at
    assert client.get("/api/v1/memories").json()["count"] == 0
    listed = client.get("/api/v1/memories", {"include_invalidated": "true"}).json()["results"]
    assert [m["id"] for m in listed] == [memory.pk]
    assert client.get(f"/api/v1/memories/{memory.pk}/open").status_code == 404

    restored = client.post(f"/api/v1/memories/{memory.pk}/restore")
    assert restored.status_code == 200, restored.json()
    assert restored.json()["trashed_at"] is None and restored.json()["invalidated_at"] is None
    assert client.get("/api/v1/memories").json()["count"] == 1
    assert MemoryAssertion.objects.filter(memory_id=memory.pk, outcome="restored").count() == 1
    again = client.post(f"/api/v1/memories/{memory.pk}/restore")
    assert again.status_code == 409 and again.json()["code"] == "NOT_IN_TRASH"


def test_restore_after_trash_days_is_refused_and_the_sweep_purges(client, project):
    store = MemoryStoreFactory(project=project, trash_days=2)
    memory = write(store, "The office closes at six.")
    memory_forget(memory=memory, principal="test")
    Memory.objects.filter(pk=memory.pk).update(trashed_at=timezone.now() - timedelta(days=3))
    refused = client.post(f"/api/v1/memories/{memory.pk}/restore")
    assert refused.status_code == 409 and refused.json()["code"] == "TRASH_EXPIRED"
    content_id = memory.content_id

    counts = memory_sweep()
    assert (counts.expired, counts.purged) == (0, 1)
    assert not Memory.objects.filter(pk=memory.pk).exists()
    assert not MemoryContent.objects.filter(pk=content_id).exists()
    purged = MemoryAssertion.objects.get(memory_id=memory.pk, outcome="purged")
    assert (purged.content, purged.principal, purged.mechanism) == (
        "The office closes at six.", "system:memory_sweep", "system")
    assert memory_sweep().as_dict() == {"expired": 0, "purged": 0}  # idempotent


def test_the_sweep_leaves_the_trash_alone_within_trash_days(project, settings):
    settings.MEMORY_ENGINE = {**(getattr(settings, "MEMORY_ENGINE", None) or {}), "TRASH_DAYS": 7}
    store = MemoryStoreFactory(project=project)
    memory = write(store, "The backup runs nightly.")
    memory_forget(memory=memory, principal="test")
    Memory.objects.filter(pk=memory.pk).update(trashed_at=timezone.now() - timedelta(days=6))
    assert memory_sweep().purged == 0
    memory_restore(memory=memory, principal="test")
    Memory.objects.filter(pk=memory.pk).update(trashed_at=timezone.now() - timedelta(days=8))
    assert memory_sweep().purged == 1


def test_a_restored_memory_comes_back_even_beside_a_live_duplicate(project):
    store = MemoryStoreFactory(project=project)
    first = write(store, "The user likes jazz.")
    memory_forget(memory=first, principal="test")
    second = write(store, "The user likes jazz.")
    assert second.pk != first.pk
    memory_restore(memory=first, principal="test")
    assert Memory.objects.filter(store=store, invalidated_at__isnull=True).count() == 2


def test_forget_and_restore_follow_the_facet(client, project):
    store = MemoryStoreFactory(project=project)
    memory = write(store, "Billing runs on the first.")
    Memory.objects.filter(pk=memory.pk).update(facet="billing")
    other = client.delete(f"/api/v1/memories/{memory.pk}", QUERY_STRING="facet=support")
    assert other.status_code == 404 and other.json() == client.delete("/api/v1/memories/mem_nope").json()
    bad = client.delete(f"/api/v1/memories/{memory.pk}", QUERY_STRING="facet=%20bad")
    assert bad.status_code == 400 and bad.json()["code"] == "FACET_INVALID"
    assert client.delete(f"/api/v1/memories/{memory.pk}", QUERY_STRING="facet=billing").status_code == 204


def test_restore_needs_a_read_write_key(readonly_client, project):
    store = MemoryStoreFactory(project=project)
    memory = write(store, "Lunch is at noon.")
    memory_forget(memory=memory, principal="test")
    assert readonly_client.post(f"/api/v1/memories/{memory.pk}/restore").status_code == 403
