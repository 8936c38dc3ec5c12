"""Writes with a memory quota set (DESIGN.md, "Tenancy and identity"): the project's live
memories, counted under the store lock and the project's quota lock when a write would create one; over it, 429
QUOTA_EXCEEDED and nothing written. Skips and supersedes add nothing and pass at the quota."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memory_engine.exceptions import QuotaExceeded
from memory_engine.models import Memory, MemoryAssertion, MemoryContent
from memory_engine.services.memories import memory_write
from memory_engine.services.memory_lifecycle import memory_forget
from tests.factories import MemoryStoreFactory, ProjectFactory
from tests.threads import at_once

pytestmark = pytest.mark.django_db

FACTS = [
    "The office plants are watered on Mondays.",
    "Invoices are paid by the finance team within 30 days.",
    "The staging database runs PostgreSQL 15 on db-stage-2.",
    "Our main database is hosted in Frankfurt.",
    "The support hotline closes at 6pm on Fridays.",
    "New laptops are ordered through the IT portal.",
]


def write(store, text, **kwargs):
    return memory_write(store=store, content=text, principal="test", **kwargs)


def quota(project, limit):
    project.max_memories = limit
    project.save(update_fields=["max_memories"])


def test_creates_stop_at_the_quota_and_a_refusal_writes_nothing(project):
    quota(project, 2)
    store = MemoryStoreFactory(project=project)
    assert [write(store, text).action for text in FACTS[:2]] == ["created", "created"]
    with pytest.raises(QuotaExceeded) as refused:
        write(store, FACTS[2])
    assert (refused.value.code, refused.value.status_code) == ("QUOTA_EXCEEDED", 429)
    assert refused.value.details == {"used": 2, "limit": 2}
    assert MemoryAssertion.objects.filter(store=store).count() == 2  # no assertion for a refusal
    assert not MemoryContent.objects.filter(store=store, text=FACTS[2]).exists()


def test_at_the_quota_skips_and_supersedes_still_pass(project):
    quota(project, 1)
    store = MemoryStoreFactory(project=project)
    write(store, FACTS[2])
    assert write(store, FACTS[2]).action == "skipped"
    moved = write(store, "The staging database runs PostgreSQL 16 on db-stage-2.")
    assert moved.action == "superseded"  # one memory in, one out
    assert Memory.objects.live().filter(store__project=project).count() == 1
    with pytest.raises(QuotaExceeded):
        write(store, FACTS[0])


def test_the_quota_counts_the_project_s_live_memories_in_every_store(project):
    quota(project, 2)
    first, second = MemoryStoreFactory(project=project), MemoryStoreFactory(project=project)
    write(first, FACTS[0])
    expiring = write(second, FACTS[1])
    with pytest.raises(QuotaExceeded):
        write(second, FACTS[2])  # the other store's memory counts
    other = MemoryStoreFactory(project=ProjectFactory())
    assert write(other, FACTS[2]).action == "created"  # another project's quota is its own
    # a minute back: the live rule reads now() of the test's transaction, begun before these writes
    Memory.objects.filter(pk=expiring.memory.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    assert write(second, FACTS[2]).action == "created"  # an expired memory is not live
    memory_forget(memory=write(first, FACTS[0]).memory, principal="test")
    assert write(first, FACTS[3]).action == "created"  # nor a forgotten one
    with pytest.raises(QuotaExceeded):
        write(first, FACTS[4])


def test_the_setting_applies_when_the_project_sets_no_quota(project, settings):
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "MAX_MEMORIES_PER_PROJECT": 1}
    store = MemoryStoreFactory(project=project)
    write(store, FACTS[0])
    with pytest.raises(QuotaExceeded):
        write(store, FACTS[1])
    quota(project, 3)  # the project's own quota wins over the setting
    assert write(store, FACTS[1]).action == "created"


def test_the_api_answers_429_and_writes_nothing(client, project):
    quota(project, 1)
    store = MemoryStoreFactory(project=project)
    url = "/api/v1/memories"
    assert client.post(url, {"memory_store_id": store.pk, "content": FACTS[0]}, format="json").status_code == 201
    refused = client.post(url, {"memory_store_id": store.pk, "content": FACTS[1]}, format="json")
    assert (refused.status_code, refused.json()["code"]) == (429, "QUOTA_EXCEEDED")
    assert refused.json()["details"] == {"used": 1, "limit": 1}
    assert MemoryAssertion.objects.filter(store=store).count() == 1
    assert Memory.objects.filter(store=store).count() == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_creators_in_one_store_stop_exactly_at_the_quota():
    """The quota is read under the store lock: of six writers of six facts at once, three create
    and three are refused, whatever the order."""
    project = ProjectFactory(max_memories=3)
    store = MemoryStoreFactory(project=project)
    outcomes = at_once(lambda text: write(store, text).action, FACTS, expected=(QuotaExceeded,))
    assert sorted(o if isinstance(o, str) else o.code for o in outcomes) == ["QUOTA_EXCEEDED"] * 3 + ["created"] * 3
    assert Memory.objects.filter(store=store).count() == 3
    assert MemoryAssertion.objects.filter(store=store).count() == 3
