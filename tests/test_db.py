"""insert_sql and one_round_trip: a write's rows in one round trip, the rows Django's ``create``
writes, in order, all or none."""

from __future__ import annotations

import json

import pytest
from django.db import DataError, OperationalError, connection, transaction
from django.test.utils import CaptureQueriesContext

from memory_engine import db
from memory_engine.db import in_order, insert_sql, one_round_trip, result_columns, update_sql
from memory_engine.models import Memory, MemoryAssertion, MemoryContent
from memory_engine.services.memories import content_hash, memory_write
from tests.factories import MemoryStoreFactory
from tests.plans import analyze_memory_tables, explain_analyze, fill, rows_read, statements_with

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


def test_update_sql_sets_what_update_sets(store, content):
    ours, theirs = memory_of(store, content), memory_of(store, content)
    ours.save()
    theirs.save()
    other = MemoryContent.objects.create(store=store, text="Deploys moved to Wednesday",
                                         content_hash=content_hash("Deploys moved to Wednesday"))
    changes = {"content": other, "confidence": 0.85, "evidence_count": 3, "reinforced_at": ours.created_at,
               "superseded_by": theirs, "metadata": {"it's": ["x"]}}
    with CaptureQueriesContext(connection) as queries:
        one_round_trip([update_sql(ours, changes)])
    Memory.objects.filter(pk=theirs.pk).update(**{**changes, "superseded_by": ours})
    assert len(queries.captured_queries) == 1
    fields = ("content_id", "confidence", "evidence_count", "reinforced_at", "metadata")
    assert (Memory.objects.filter(pk=ours.pk).values(*fields).get()
            == Memory.objects.filter(pk=theirs.pk).values(*fields).get())
    assert Memory.objects.get(pk=ours.pk).superseded_by_id == theirs.pk


@pytest.mark.django_db(transaction=True)
def test_with_server_side_binding_the_statements_go_one_by_one(server_side_binding, project):
    """Several statements in one query need client-side binding; a host that turned on
    server-side binding gets one round trip per statement, the same rows."""
    store = MemoryStoreFactory(project=project)
    text = "The deploy window opens on Tuesday"
    content = MemoryContent.objects.create(store=store, text=text, content_hash=content_hash(text))
    memory = memory_of(store, content)
    assertion = MemoryAssertion(store=store, memory=memory, content=content.text, outcome="created", principal="t")
    with CaptureQueriesContext(connection) as queries:
        one_round_trip([insert_sql(memory), insert_sql(assertion)], saved=[memory, assertion])
    assert len(queries.captured_queries) == 2
    assert MemoryAssertion.objects.get(pk=assertion.pk).memory_id == memory.pk


@pytest.mark.django_db(transaction=True)
def test_with_server_side_binding_an_in_list_past_the_parameter_limit_goes_in_batches(server_side_binding):
    """A statement takes at most 65,535 parameters when they are bound on the server, one per value
    of an ``__in`` list: in_batches keeps each query under IN_LIST_MAX."""
    ids = [f"mem_{n}" for n in range(65_600)]
    with pytest.raises(OperationalError, match="65535"):
        list(Memory.objects.filter(pk__in=ids).values_list("pk", flat=True))
    assert [list(Memory.objects.filter(pk__in=batch)) for batch in db.in_batches(ids)] == [[]] * 7
    assert db.IN_LIST_MAX * 6 < len(ids) <= db.IN_LIST_MAX * 7


@pytest.mark.django_db(transaction=True)
def test_with_server_side_binding_the_funnel_writes_as_usual(server_side_binding, project):
    """The funnel's own queries of several statements (the store lock, the content upsert and
    the candidates; the memory and its assertion) go one by one too: create, skip, supersede."""
    store = MemoryStoreFactory(project=project)
    first = memory_write(store=store, content="Our main database is hosted in Frankfurt", principal="t")
    again = memory_write(store=store, content="Our main database is hosted in Frankfurt", principal="t")
    moved = memory_write(store=store, content="Our main database is now hosted in Frankfurt and Paris",
                         principal="t")
    assert [first.action, again.action, moved.action] == ["created", "skipped", "superseded"]
    assert again.memory.pk == first.memory.pk and moved.replaced.pk == first.memory.pk
    assert MemoryAssertion.objects.filter(store=store).count() == 3


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("scan", ["exact", "hnsw"])
@pytest.mark.parametrize("facet", [None, "work"])
def test_with_server_side_binding_the_facet_filter_is_estimated(server_side_binding, project, settings, scan, facet):
    """Bound on the server, ``m.facet IS NOT DISTINCT FROM $1`` with NULL was estimated at one
    row: the planner then read every memory of the table and looked up each one's content row
    (250 ms per write in a store of 100,000, docs/benchmarks.md; here 10,922 rows against 604).
    The filter is written for the facet given, and the statements read what they read with
    their parameters in their text: beside a store of 5,000 memories, a store of 300."""
    if scan == "hnsw":
        settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "DEDUP_EXACT_SCAN_MAX": 50}
    fill(MemoryStoreFactory(project=project), 5000, "other", vectors=False)
    store = MemoryStoreFactory(project=project)
    fill(store, 300, "ssb")
    if facet is not None:
        Memory.objects.update(facet=facet)
    analyze_memory_tables()
    statements = []
    for content in ("Our main database is hosted in Frankfurt", "Our main database is hosted in Frankfurt"):
        with statements_with("'same'") as same, statements_with("'near'") as near:
            result = memory_write(store=store, content=content, facet=facet, principal="test")
        statements += same + near
    assert result.action == "skipped" and result.memory.facet == facet
    for sql, params in statements:
        server, client = explain_analyze(sql, params), explain_analyze(sql, params, client_side=True)
        # the rows the statement reads are those it reads with its parameters in its text
        read = {binding: rows_read(plan, "memory_engine_memory") + rows_read(plan, "memory_engine_memorycontent")
                for binding, plan in (("server", server), ("client", client))}
        assert read["server"] <= 2 * read["client"] + 20, (read, json.dumps(server, indent=1)[:4000])


def test_statements_sent_together_cannot_give_one_name_two_values():
    with connection.cursor() as cursor, pytest.raises(ValueError, match=r"\['n'\] different values"):
        list(in_order(cursor, [("SELECT %(n)s", {"n": 1}), ("SELECT %(n)s", {"n": 2})]))


def test_named_statements_sent_together_each_give_their_rows():
    with connection.cursor() as cursor:
        rows = [cursor.fetchall() for _ in in_order(cursor, [("SELECT %(a)s", {"a": 1}), ("SELECT %(b)s, %(a)s",
                                                                                          {"a": 1, "b": 2})])]
    assert rows == [[(1,)], [(2, 1)]]


STATEMENTS_AND_COLUMNS = [
    ('SELECT 1 AS one, \'café\' AS "naïve name", NULL AS "Mixed"', ["one", "naïve name", "Mixed"]),
    ("SELECT 1 AS one WHERE false", ["one"]),  # no rows, still a result with columns
    ("SELECT", []),  # a result without columns
    ("SET LOCAL statement_timeout = 1000", None),
    ("CREATE TEMPORARY TABLE result_columns_t (a int) ON COMMIT DROP", None),
    ("INSERT INTO result_columns_t VALUES (1)", None),
    ("INSERT INTO result_columns_t VALUES (2) RETURNING a, a + 1 AS b", ["a", "b"]),
]


def description_names(cursor):
    return None if cursor.description is None else [column.name for column in cursor.description]


def test_result_columns_are_those_the_description_names():
    """A result's column names as ``cursor.description`` gives them, and None for a statement that
    returns no rows, one statement at a time and several sent together."""
    with transaction.atomic(), connection.cursor() as cursor:
        for sql, names in STATEMENTS_AND_COLUMNS:
            cursor.execute(sql)
            assert result_columns(cursor) == description_names(cursor) == names, sql
        cursor.execute("DROP TABLE result_columns_t")
        together = [(sql, []) for sql, _ in STATEMENTS_AND_COLUMNS]
        assert [result_columns(cursor) for _ in in_order(cursor, together)] == [n for _, n in STATEMENTS_AND_COLUMNS]


@pytest.mark.django_db(transaction=True)
def test_with_server_side_binding_result_columns_are_those_the_description_names(server_side_binding):
    with transaction.atomic(), connection.cursor() as cursor:
        for sql, names in STATEMENTS_AND_COLUMNS:
            cursor.execute(sql, [])
            assert result_columns(cursor) == description_names(cursor) == names, sql


def test_across_projects_lifts_the_multi_shard_setting_for_its_block_only() -> None:
    """On one PostgreSQL the Citus setting is a placeholder; inside the block it reads ``off``,
    after it the caller's value again, nested or not."""
    def level() -> str:
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_setting(%s, true)", [db.MULTI_SHARD_LOG_LEVEL])
            return cursor.fetchone()[0]

    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config(%s, 'error', true)", [db.MULTI_SHARD_LOG_LEVEL])
        with db.across_projects():
            assert level() == "off"
        assert level() == "error"
        with db.across_projects():
            with db.across_projects():
                assert level() == "off"
            assert level() == "off"
        assert level() == "error"
