"""How many round trips (queries sent) one write makes: a regression guard for the funnel
(docs/write-funnel.md, "Round trips per write"). Each round trip costs a context switch on a
loaded machine; a new query in the funnel should be a deliberate change of these numbers."""

from __future__ import annotations

import re
import threading

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from psycopg.pq import TransactionStatus

from memory_engine.models import Memory, MemoryAssertion, MemoryRevision
from memory_engine.services.memories import memory_write
from tests.factories import AgentFactory
from tests.plans import queries_sent, unprepared

pytestmark = pytest.mark.django_db

DATABASE = "Our main database is hosted in Frankfurt"


def write(store, text, **kwargs):
    return memory_write(store=store, content=text, principal="test", **kwargs)


def statements_of(store, text, **kwargs):
    """(result, the queries of one write, each as it reads without prepared statements:
    tests.plans.unprepared), savepoints left out: in production the write's transaction is the
    outermost one, and its BEGIN and COMMIT are two round trips more
    (test_a_write_outside_a_transaction_sends_five_queries_in_all)."""
    with CaptureQueriesContext(connection) as queries:
        result = write(store, text, **kwargs)
    sql = [unprepared(q) for q in map(without_savepoints, (q["sql"] for q in queries.captured_queries)) if q]
    return result, sql


def without_savepoints(sql):
    """A query without the SAVEPOINT and the RELEASE of the write's atomic() block (nested in the
    test's transaction: Django's own queries, quoted names)."""
    sql = re.sub(r'^SAVEPOINT "?\w+"?(;\n|$)', "", sql)
    return re.sub(r'(^|;\n)RELEASE SAVEPOINT "?\w+"?$', "", sql)


@pytest.fixture
def warm_store(store):
    """A store holding one memory, its project loaded and its scan mode cached."""
    store.project  # noqa: B018  (the API's store comes with its project)
    write(store, "The office plants are watered on Mondays")
    return store


def test_a_new_fact_takes_three_round_trips(warm_store):
    # content stored? (before the lock) / lock + HNSW settings, then the content upsert, then
    # the candidates (about, same text, shortlist; with their rows) / the memory and its assertion
    result, sql = statements_of(warm_store, DATABASE)
    assert result.action == "created"
    assert len(sql) == 3, "\n".join(sql)
    lock, upsert, candidates = sql[1].split(";\n")
    assert lock.lstrip().startswith("SELECT pg_advisory_xact_lock")  # the lock before the upsert
    assert "INSERT INTO memory_engine_memorycontent" in upsert
    assert "'near' AS role" in candidates  # after the upsert: it reads the new row's vector
    assert sql[-1].startswith('INSERT INTO "memory_engine_memory"')  # the memory first (the feed's order)
    assert ';\nINSERT INTO "memory_engine_memoryassertion"' in sql[-1]
    memory = Memory.objects.get(pk=result.memory.pk)
    assert (memory.content_id, memory.tags, memory.kind) == (result.memory.content_id, {}, "fact")
    assertion = MemoryAssertion.objects.get(pk=result.assertion.pk)
    assert (assertion.memory_id, assertion.outcome, assertion.content) == (memory.pk, "created", DATABASE)


def test_an_exact_restatement_takes_three_round_trips(warm_store):
    first = write(warm_store, DATABASE)
    # content stored? / lock, content (a hit: not rewritten), candidates / assertion
    result, sql = statements_of(warm_store, DATABASE)
    assert (result.action, result.memory.pk) == ("skipped", first.memory.pk)
    assert len(sql) == 3, "\n".join(sql)
    assert not any(s.startswith("UPDATE") for s in sql)  # reinforced at most once per interval


def candidates_branches(sql):
    """The branches of the write's candidates statement, by role."""
    (statement,) = [s for s in sql if " AS role" in s]
    return {role for role in ("about", "same", "near", "scan") if f"'{role}' AS role" in statement}


def test_the_candidates_statement_leaves_out_the_branches_a_write_cannot_use(warm_store):
    """Planning is most of what the candidates statement costs in a small store: a new text's
    content row has no memory yet (no same-text branch), a write without ``about`` has no about
    match to find. Whether the row is new is what the write saw before it took the lock."""
    _, sql = statements_of(warm_store, DATABASE)
    assert candidates_branches(sql) == {"near", "scan"}  # a small store's exact shortlist

    _, sql = statements_of(warm_store, DATABASE)  # the same text again: its content row exists
    assert candidates_branches(sql) == {"same", "near", "scan"}

    about = {"kind": "service", "key": "main-database"}
    result, sql = statements_of(warm_store, "The main database runs PostgreSQL 18", about=about)
    assert candidates_branches(sql) == {"about", "near", "scan"}
    result, sql = statements_of(warm_store, "The main database runs PostgreSQL 19", about=about)
    assert candidates_branches(sql) == {"about", "near", "scan"}
    assert (result.action, result.decision_reason) == ("superseded", "about_key")


def test_a_supersede_takes_three_round_trips(warm_store):
    first = write(warm_store, DATABASE)
    # MiniLM puts this pair at ~0.91, between 0.90 and 0.95: a supersede
    # ... the three of a new fact, the update retiring the old memory in the last one
    result, sql = statements_of(warm_store, "Our main database is now hosted in Frankfurt and Paris")
    assert (result.action, result.replaced.pk) == ("superseded", first.memory.pk)
    assert len(sql) == 3, "\n".join(sql)
    old = Memory.objects.get(pk=first.memory.pk)
    assert old.superseded_by_id == result.memory.pk and old.invalidated_at == result.memory.created_at
    assertion = MemoryAssertion.objects.get(pk=result.assertion.pk)
    assert (assertion.outcome, assertion.replaced_memory_id) == ("superseded", first.memory.pk)


def test_a_reworded_skip_takes_three_round_trips(warm_store):
    """A skip onto a memory in other words keeps the newer wording: the revision of the old one
    and the memory's update go in the last round trip, before the assertion."""
    first = write(warm_store, "The customer prefers email contact")
    # ~0.97 with MiniLM: a skip, not an exact restatement
    result, sql = statements_of(warm_store, "The customer prefers contact by email")
    assert (result.action, result.memory.pk) == ("skipped", first.memory.pk)
    assert len(sql) == 3, "\n".join(sql)
    revision, update, assertion = sql[-1].split(";\n")
    assert revision.startswith('INSERT INTO "memory_engine_memoryrevision"')
    assert update.startswith('UPDATE "memory_engine_memory"')
    assert assertion.startswith('INSERT INTO "memory_engine_memoryassertion"')
    memory = Memory.objects.get(pk=first.memory.pk)
    assert memory.content_id == result.memory.content_id != first.memory.content_id
    (kept,) = MemoryRevision.objects.filter(memory=memory)
    assert kept.content_id == first.memory.content_id
    assert MemoryAssertion.objects.get(pk=result.assertion.pk).details["revision_id"] == kept.pk


def test_a_reinforcing_restatement_takes_three_round_trips(warm_store, settings):
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "REINFORCE_INTERVAL_SECONDS": 0}
    first = write(warm_store, DATABASE)  # (its caches read again after the settings change)
    result, sql = statements_of(warm_store, DATABASE)
    assert (result.action, result.reinforced) == ("skipped", True)
    assert len(sql) == 3, "\n".join(sql)
    assert sql[-1].startswith('UPDATE "memory_engine_memory"')
    memory = Memory.objects.get(pk=first.memory.pk)
    assert (memory.evidence_count, memory.reinforced_at) == (2, result.memory.reinforced_at)
    assert memory.confidence == result.memory.confidence > first.memory.confidence


def test_a_write_opens_no_savepoint_of_its_own(warm_store):
    """The content upsert has no savepoint around it (two round trips per write): a model switch
    between the embedder call and the insert rolls the write back whole and writes again
    (tests/commands/test_embedding_model.py)."""
    with CaptureQueriesContext(connection) as queries:
        result = write(warm_store, DATABASE)
    savepoints = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("SAVEPOINT")]
    assert result.action == "created"
    assert len(savepoints) == 1, savepoints  # the write's transaction, nested in the test's


def project_reads(queries):
    return [q["sql"] for q in queries.captured_queries if q["sql"].startswith('SELECT "memory_engine_project"')]


def test_an_api_write_reads_its_project_once(client, store):
    """The API's store comes with the request's project: the quota check of a created memory
    reads no project row of its own (one round trip per API write)."""
    assert client.post("/api/v1/memories", {"memory_store_id": store.pk, "content": "Warm-up fact"},
                       format="json").status_code == 201
    with CaptureQueriesContext(connection) as queries:
        response = client.post("/api/v1/memories", {"memory_store_id": store.pk, "content": DATABASE}, format="json")
    assert response.status_code == 201 and response.json()["action"] == "created"
    assert project_reads(queries) == []


def test_an_agent_tool_write_reads_its_project_once(client, store):
    """The same for the agent's write_memory tool: its agent and store come with the request's
    project."""
    agent = AgentFactory(project=store.project, write_memory_store=store)
    url = f"/api/v1/agents/{agent.pk}/tools/write_memory"
    assert client.post(url, {"content": "Warm-up fact"}, format="json").status_code == 201
    with CaptureQueriesContext(connection) as queries:
        response = client.post(url, {"content": DATABASE}, format="json")
    assert response.status_code == 201 and response.json()["action"] == "created"
    assert project_reads(queries) == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("embedder", ["default", "failing"])
def test_a_write_overtaken_by_the_same_text_still_finds_its_memory(monkeypatch, request, embedder):
    """The candidates statement goes with the upsert, its branches chosen by what the write saw
    before the lock. When another write of the same text commits in between, the row the write
    took for new has a memory: the write reads the candidates again and skips onto it. Without
    a vector (the embedder down) only that second reading finds it."""
    from memory_engine.services.memories import funnel
    from tests.factories import MemoryStoreFactory, ProjectFactory

    if embedder == "failing":
        request.getfixturevalue("failing_embedder")
    store = MemoryStoreFactory(project=ProjectFactory())
    seen = funnel.prepare_vector
    overtaking = []

    def then_another_writer(*args, **kwargs):
        prepared = seen(*args, **kwargs)
        if not overtaking:  # once: the other writer's own look passes through here too
            overtaking.append(None)
            thread = threading.Thread(target=write_elsewhere)
            thread.start()
            thread.join()
        return prepared

    def write_elsewhere():
        try:
            overtaking[0] = write(store, DATABASE)
        finally:
            connection.close()

    monkeypatch.setattr(funnel, "prepare_vector", then_another_writer)
    with CaptureQueriesContext(connection) as queries:
        result = write(store, DATABASE)
    other = overtaking[0]
    assert other is not None and other.action == "created"
    assert (result.action, result.decision_reason, result.memory.pk) == ("skipped", "duplicate", other.memory.pk)
    sent = [q["sql"] for q in queries.captured_queries if " AS role" in q["sql"]]
    assert "'same' AS role" in sent[-1] and not any("'same' AS role" in s for s in sent[:-1])  # read again
    assert Memory.objects.filter(store=store).count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_write_outside_a_transaction_sends_five_queries_in_all(project):
    """Counted on the wire (libpq's trace): Django's atomic() sends the write's BEGIN and COMMIT
    each in a round trip of their own, around its three queries of statements. (Sending them with
    the statements saved nothing measurable: `bench/write.py --atomic`, docs/write-funnel.md.)"""
    from tests.factories import MemoryStoreFactory

    store = MemoryStoreFactory(project=project)
    write(store, "The office plants are watered on Mondays")
    for text, action in ((DATABASE, "created"), (DATABASE, "skipped"),
                         ("Our main database is now hosted in Frankfurt and Paris", "superseded")):
        with queries_sent() as sent:
            result = write(store, text)
        assert result.action == action
        assert len(sent) == 5, sent
        # after the PREPARE of a statement the connection has not prepared yet (the same text's
        # candidates statement reads the same-text memory too)
        assert (sent[1], sent[4]) == ("BEGIN", "COMMIT"), sent
        assert unprepared(sent[2]).startswith("SELECT pg_advisory_xact_lock"), sent
        assert connection.connection.info.transaction_status == TransactionStatus.IDLE
    assert Memory.objects.filter(store=store, invalidated_at__isnull=True).count() == 2
    assert MemoryAssertion.objects.filter(store=store).count() == 4


@pytest.mark.django_db(transaction=True)
def test_a_write_refused_inside_its_transaction_leaves_nothing(project):
    """The quota is read under the store lock: a refused write rolls back its content row and
    leaves the connection ready for the next one."""
    from memory_engine.exceptions import QuotaExceeded
    from memory_engine.models import MemoryContent
    from tests.factories import MemoryStoreFactory

    project.max_memories = 1
    project.save()
    store = MemoryStoreFactory(project=project)
    write(store, "The office plants are watered on Mondays")
    with pytest.raises(QuotaExceeded):
        write(store, DATABASE)
    assert connection.connection.info.transaction_status == TransactionStatus.IDLE
    assert not MemoryContent.objects.filter(store=store, text=DATABASE).exists()
    assert write(store, "The office plants are watered on Mondays").action == "skipped"
    assert MemoryAssertion.objects.filter(store=store).count() == 2
