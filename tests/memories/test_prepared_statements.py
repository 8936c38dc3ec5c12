"""The write funnel's content upsert and candidates statement, prepared once per connection
(memory_engine.db.prepared; docs/write-funnel.md, "Prepared statements"): planned once, the same
decisions, and a prepared statement that goes missing costs a write nothing."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator

import pytest
from django.db import DatabaseError, connection, transaction
from psycopg.pq import TransactionStatus

from memory_engine import db
from memory_engine.models import Memory, MemoryAssertion
from memory_engine.services.memories import memory_write
from tests.factories import MemoryStoreFactory
from tests.plans import queries_sent

pytestmark = pytest.mark.django_db

DATABASE = "Our main database is hosted in Frankfurt"
MOVED = "Our main database is now hosted in Frankfurt and Paris"


@pytest.fixture(autouse=True)
def _preparing() -> Iterator[None]:
    """Each test starts preparing, whatever a test before it lost (and so stopped)."""
    db._resume_preparing()
    yield
    db._resume_preparing()


def write(store, text, **kwargs):
    return memory_write(store=store, content=text, principal="test", **kwargs)


def prepared_here() -> dict[str, tuple[int, int]]:
    """The funnel's statements prepared on the test's connection since the test began (the
    names of a generation: earlier tests' stay prepared on the session): name -> (generic
    plans, custom plans)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT name, generic_plans, custom_plans FROM pg_prepared_statements WHERE name LIKE %s",
                       [f"me\\_%\\_{db._Preparing.generation}"])
        return {name: (generic, custom) for name, generic, custom in cursor.fetchall()}


def test_a_store_s_statements_are_prepared_once_and_planned_once(store):
    """The first write prepares the upsert and its candidates statement in its own query; after
    PostgreSQL's five custom plans, the writes run one generic plan each, and decide as before."""
    write(store, "The office plants are watered on Mondays")
    first = prepared_here()
    assert len(first) == 2  # the upsert, a new text's candidates statement
    for n in range(8):
        with queries_sent() as sent:
            assert write(store, f"Invoice {n} is paid by the finance team in week {n + 10}").action in (
                "created", "superseded")
        assert not any("PREPARE" in query for query in sent), sent  # the same two, executed
        assert sum("EXECUTE me_" in query for query in sent) == 1
    plans = prepared_here()
    assert plans.keys() == first.keys()
    assert all(generic >= 1 for generic, _ in plans.values()), plans
    # the decisions of an unprepared write
    assert write(store, DATABASE).action == "created"
    assert (again := write(store, DATABASE)).action == "skipped"
    assert (moved := write(store, MOVED)).action == "superseded" and moved.replaced.pk == again.memory.pk
    assert len(prepared_here()) == 3  # the same text's candidates statement reads the same-text memory too


def test_a_store_s_candidates_statement_is_its_own(project):
    """The store is a literal in the prepared candidates statement (the planner reads its share of
    the table), so two stores have two; the upsert is one for all."""
    for store in (MemoryStoreFactory(project=project), MemoryStoreFactory(project=project)):
        write(store, DATABASE)
    assert len(prepared_here()) == 3


def test_past_the_limit_the_least_recently_used_statement_is_deallocated(project, monkeypatch):
    monkeypatch.setattr(db, "PREPARED_MAX", 2)
    stores = [MemoryStoreFactory(project=project) for _ in range(3)]
    for store in stores:
        write(store, DATABASE)
    assert len(prepared_here()) == 2
    with queries_sent() as sent:
        assert write(stores[0], MOVED).action == "superseded"  # its statement was the one deallocated
    # first in the lock's query (after the savepoint of the test's transaction)
    assert any(re.sub(r"^SAVEPOINT \w+;\n", "", query).startswith("DEALLOCATE me_") for query in sent), sent
    assert len(prepared_here()) == 2


@pytest.mark.parametrize("lost", ["DEALLOCATE ALL", "forgotten"])
def test_a_lost_prepared_statement_costs_the_write_nothing(store, caplog, lost):
    """Deallocated on the server (DEALLOCATE ALL, DISCARD ALL, another server session behind
    PgBouncer) or prepared there already: the write's transaction (here a savepoint in the
    test's) is run again unprepared, and the process stops preparing, with a warning."""
    first = write(store, "The office plants are watered on Mondays")
    if lost == "forgotten":
        db._prepared.clear()  # still prepared on the server: the next PREPARE meets its own name
    else:
        with connection.cursor() as cursor:
            cursor.execute(lost)
    with caplog.at_level(logging.WARNING, logger="memory_engine.db"):
        result = write(store, DATABASE)
    assert result.action == "created"
    assert Memory.objects.filter(store=store).count() == 2
    assert list(MemoryAssertion.objects.filter(store=store).order_by("created_at")
                .values_list("memory_id", flat=True)) \
        == [first.memory.pk, result.memory.pk]
    assert "stops preparing" in caplog.text and "WRITE_PREPARED_STATEMENTS" in caplog.text
    assert not db.prepares_statements()
    with queries_sent() as sent:
        assert write(store, DATABASE).action == "skipped"
    assert not any("EXECUTE" in query or "PREPARE" in query for query in sent)


@pytest.mark.django_db(transaction=True)
def test_a_lost_statement_outside_a_transaction_leaves_the_connection_ready(project):
    """The write's own transaction (atomic()) is rolled back and run
    again; nothing of the failed attempt stays."""
    store = MemoryStoreFactory(project=project)
    write(store, "The office plants are watered on Mondays")
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")
    assert write(store, DATABASE).action == "created"
    assert connection.connection.info.transaction_status == TransactionStatus.IDLE
    assert MemoryAssertion.objects.filter(store=store).count() == 2
    assert Memory.objects.filter(store=store, content__text=DATABASE).count() == 1


def test_a_changed_table_under_a_prepared_statement_counts_as_lost(project):
    """PostgreSQL refuses a prepared statement whose result a table change altered (a
    migration under a running process); the write then runs unprepared."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("CREATE TEMPORARY TABLE plan_change (a int);"
                       " PREPARE me_plan_change AS SELECT * FROM plan_change;"
                       "ALTER TABLE plan_change ADD COLUMN b int")
        with pytest.raises(DatabaseError) as raised, transaction.atomic():
            cursor.execute("EXECUTE me_plan_change")
        cursor.execute("DEALLOCATE me_plan_change")
    assert db.lost_prepared_statement(raised.value)


def test_off_the_funnel_prepares_nothing(store, settings):
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "WRITE_PREPARED_STATEMENTS": False}
    with queries_sent() as sent:
        assert write(store, DATABASE).action == "created"
        assert write(store, DATABASE).action == "skipped"
    assert not any("EXECUTE" in query or "PREPARE" in query for query in sent)
    assert not prepared_here()


@pytest.mark.django_db(transaction=True)
def test_with_server_side_binding_nothing_is_prepared(server_side_binding, project):
    """An EXECUTE takes its arguments in its text: with parameters bound on the server, the
    funnel sends its statements as they are."""
    store = MemoryStoreFactory(project=project)
    assert [write(store, DATABASE).action, write(store, DATABASE).action] == ["created", "skipped"]
    assert not db.prepares_statements()
    assert not prepared_here()
