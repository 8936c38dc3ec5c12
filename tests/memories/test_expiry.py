"""Expiry: an expired memory is gone for every read before the sweep deletes it; the sweep
(a django-q2 Schedule) deletes it and writes an ``expired`` ledger row."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memory_engine.models import Memory, MemoryAssertion, MemoryContent
from memory_engine.selectors.search import SearchRequest, knowledge_search
from memory_engine.services.memories import memory_write
from memory_engine.services.memory_lifecycle import memory_sweep
from tests.conftest import wait_for
from tests.factories import MemoryStoreFactory


def write(store, text, **kwargs):
    return memory_write(store=store, content=text, principal="test", **kwargs).memory


def expire(memory, ago=timedelta(minutes=1)):
    Memory.objects.filter(pk=memory.pk).update(expires_at=timezone.now() - ago)


@pytest.mark.django_db
def test_expired_memory_is_not_listed_opened_read_or_searched_before_the_sweep(client, project, hashing_embedder):
    store = MemoryStoreFactory(project=project)
    kept = write(store, "The parking garage opens at seven.")
    gone = write(store, "The parking garage closes at midnight.")
    expire(gone)
    Memory.objects.filter(pk=kept.pk).update(expires_at=timezone.now() + timedelta(days=1))
    unknown = client.get("/api/v1/memories/mem_unknown").json()

    for params in ({}, {"include_invalidated": "true"}):
        listed = client.get("/api/v1/memories", params).json()["results"]
        assert [m["id"] for m in listed] == [kept.pk]
    for url in (f"/api/v1/memories/{gone.pk}", f"/api/v1/memories/{gone.pk}/open"):
        response = client.get(url)
        assert response.status_code == 404 and response.json() == unknown
    assert client.delete(f"/api/v1/memories/{gone.pk}").status_code == 404
    hits = knowledge_search(SearchRequest(project=project, query="parking garage", memory_store_ids=[store.pk])).results
    assert [h.id for h in hits] == [kept.pk]

    counts = memory_sweep()
    assert (counts.expired, counts.purged) == (1, 0)
    assert not Memory.objects.filter(pk=gone.pk).exists()
    row = MemoryAssertion.objects.get(memory_id=gone.pk, outcome="expired")
    assert row.content == "The parking garage closes at midnight." and row.details["expires_at"]
    assert Memory.objects.filter(pk=kept.pk).exists()


@pytest.mark.django_db
def test_the_sweep_works_in_batches_and_keeps_shared_content(project, hashing_embedder, monkeypatch):
    from memory_engine.services import memory_lifecycle

    monkeypatch.setattr(memory_lifecycle, "SWEEP_BATCH", 2)
    store = MemoryStoreFactory(project=project)
    memories = [write(store, f"Room {n} is on floor {n}.") for n in range(5)]
    for memory in memories:
        expire(memory)
    assert memory_sweep().expired == 5
    assert MemoryAssertion.objects.filter(store=store, outcome="expired").count() == 5
    assert not MemoryContent.objects.filter(store=store).exists()


@pytest.mark.django_db
def test_schedule_and_command(project, hashing_embedder):
    from django.core.management import call_command
    from django_q.models import Schedule

    from memory_engine.queue import MEMORY_SWEEP_SCHEDULE_NAME, MEMORY_SWEEP_TASK

    schedule = Schedule.objects.get(name=MEMORY_SWEEP_SCHEDULE_NAME)
    assert schedule.func == MEMORY_SWEEP_TASK and schedule.minutes == 60
    store = MemoryStoreFactory(project=project)
    expire(write(store, "The canteen serves soup."))
    from io import StringIO

    out = StringIO()
    call_command("memory_engine_sweep_memories", stdout=out)
    assert "expired: 1  purged: 0" in out.getvalue()


@pytest.mark.slow
def test_the_scheduled_sweep_runs_on_a_real_worker(qcluster, project):
    from django_q.models import Schedule

    from memory_engine.queue import MEMORY_SWEEP_SCHEDULE_NAME, ensure_schedules

    store = MemoryStoreFactory(project=project)
    memory = write(store, "The visitor badge expires today.")
    expire(memory)
    ensure_schedules()  # the flush between transactional tests empties the schedule table
    Schedule.objects.filter(name=MEMORY_SWEEP_SCHEDULE_NAME).update(next_run=timezone.now())
    row = wait_for(lambda: MemoryAssertion.objects.filter(memory_id=memory.pk, outcome="expired").first(),
                   timeout=120)
    assert row.principal == "system:memory_sweep" and row.mechanism == "system"
    assert not Memory.objects.filter(pk=memory.pk).exists()


@pytest.mark.django_db(transaction=True)
def test_concurrent_sweeps_delete_each_memory_once(project, hashing_embedder, monkeypatch):
    import threading

    from django.db import connections

    from memory_engine.services import memory_lifecycle

    monkeypatch.setattr(memory_lifecycle, "SWEEP_BATCH", 3)
    stores = [MemoryStoreFactory(project=project) for _ in range(3)]
    memories = [write(store, f"Desk {n} in store {i} is free.") for i, store in enumerate(stores) for n in range(7)]
    for memory in memories:
        expire(memory)
    totals, errors = [], []

    def sweep():
        try:
            totals.append(memory_sweep().expired)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=sweep) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and sum(totals) == len(memories)
    assert MemoryAssertion.objects.filter(outcome="expired").count() == len(memories)
    assert not Memory.objects.filter(store__project=project).exists()
