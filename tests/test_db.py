"""insert_sql and one_round_trip: a write's rows in one round trip, the rows Django's ``create``
writes, in order, all or none."""

from __future__ import annotations

import pytest
from django.db import DataError, connection, transaction
from django.test.utils import CaptureQueriesContext

from memory_engine.db import insert_sql, one_round_trip
from memory_engine.models import Memory, MemoryAssertion, MemoryContent
from memory_engine.services.memory_write import content_hash

pytestmark = pytest.mark.django_db

COLUMNS = ("id", "store_id", "content_id", "tags", "metadata", "kind", "title", "confidence", "created_at",
           "about_key", "expires_at")


@pytest.fixture
def content(store):
    text = "The deploy window opens on Tuesday 'at noon'; café ☕"
    return MemoryContent.objects.create(store=store, text=text, content_hash=content_hash(text))


def memory_of(store, content, **fields):
    return Memory(store=store, content=content, tags={"team": "ops", "quote": "it's"}, metadata={"n": [1, 2.5]},
                  title="Deploys", **fields)


def test_the_rows_are_those_create_writes(store, content):
    ours, theirs = memory_of(store, content), memory_of(store, content)
    assertion = MemoryAssertion(store=store, memory=ours, content=content.text, outcome="created",
                                details={"thresholds": {"duplicate": 0.95}}, principal="test")
    with CaptureQueriesContext(connection) as queries:
        one_round_trip([insert_sql(ours), insert_sql(assertion)], saved=[ours, assertion])
    theirs.save()
    assert len(queries.captured_queries) == 1
    assert not ours._state.adding and not assertion._state.adding  # a later save() updates

    def row(pk):
        values = Memory.objects.filter(pk=pk).values(*COLUMNS).get()
        return {name: value for name, value in values.items() if name not in ("id", "created_at")}

    assert row(ours.pk) == row(theirs.pk)
    stored = MemoryAssertion.objects.get(pk=assertion.pk)
    assert (stored.memory_id, stored.details, stored.content) == (ours.pk, {"thresholds": {"duplicate": 0.95}},
                                                                 content.text)


def test_a_failing_write_leaves_none_of_the_others(store, content):
    memory = memory_of(store, content)
    too_long = MemoryAssertion(store=store, memory=memory, content="x", outcome="o" * 500, principal="test")
    with pytest.raises(DataError), transaction.atomic():
        one_round_trip([insert_sql(memory), insert_sql(too_long)], saved=[memory, too_long])
    assert not Memory.objects.filter(pk=memory.pk).exists()
    assert memory._state.adding


def test_with_server_side_binding_the_statements_go_one_by_one(store, content, monkeypatch):
    """Several statements in one query need client-side binding; a host that turned on
    psycopg's server-side binding gets one round trip per statement, the same rows."""
    monkeypatch.setitem(connection.settings_dict["OPTIONS"], "server_side_binding", True)
    memory = memory_of(store, content)
    assertion = MemoryAssertion(store=store, memory=memory, content=content.text, outcome="created", principal="t")
    with CaptureQueriesContext(connection) as queries:
        one_round_trip([insert_sql(memory), insert_sql(assertion)], saved=[memory, assertion])
    assert len(queries.captured_queries) == 2
    assert MemoryAssertion.objects.get(pk=assertion.pk).memory_id == memory.pk
