"""GET /api/v1/feed: shape, paging, exclude_generator, project isolation, bad cursors, and
every committed change exactly once in cursor order under concurrent writers and a real worker.

The feed only shows committed transactions, so these tests commit (transactional_db)."""

from __future__ import annotations

import random
import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from django.db import close_old_connections, connection, transaction
from django.db.models import F
from django.utils import timezone

from memory_engine.models import FeedClock, FeedEntry, Memory, MemoryAssertion
from memory_engine.services.memories import memory_write
from memory_engine.services.memory_lifecycle import memory_forget

from ..conftest import api_client, wait_for
from ..factories import MemoryStoreFactory, ProjectFactory, make_key

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def world(hashing_embedder: None) -> dict[str, Any]:
    project = ProjectFactory()
    key = make_key(project)
    return {"project": project, "store": MemoryStoreFactory(project=project), "client": api_client(key)}


def read_all(client: Any, after: str = "", **params: Any) -> tuple[list[dict[str, Any]], str]:
    entries: list[dict[str, Any]] = []
    cursor = after
    while True:
        body = client.get("/api/v1/feed", {"after": cursor, **params}).json()
        entries += body["entries"]
        if body["next_cursor"] == cursor or not body["entries"]:
            return entries, body["next_cursor"]
        cursor = body["next_cursor"]


def test_memory_and_assertion_entries_in_order_with_principal(world: dict[str, Any]) -> None:
    store, client = world["store"], world["client"]
    result = memory_write(store=store, content="The office moved to Oslo.", principal="key:someone")
    memory_forget(memory=result.memory, principal="user:admin", mechanism="api")
    entries, _ = read_all(client)
    assert [(e["kind"], e["id"], e["state"], e["principal"]) for e in entries] == [
        ("memory", result.memory.pk, "live", "key:someone"),
        ("assertion", result.assertion.pk, "created", "key:someone"),
        ("assertion", MemoryAssertion.objects.get(outcome="forgotten").pk, "forgotten", "user:admin"),
    ]
    first = entries[1]
    assert first["store_id"] == store.pk and first["memory_id"] == result.memory.pk
    assert first["document_id"] is None and first["created_at"]


def test_paging_with_limit_and_stable_cursor(world: dict[str, Any]) -> None:
    store, client = world["store"], world["client"]
    for n in range(5):
        memory_write(store=store, content=f"Fact number {n} about topic {n * 7}.", principal="key:x")
    everything = client.get("/api/v1/feed", {"limit": 1000}).json()["entries"]
    assert len(everything) == 10
    seen, cursor = [], ""
    for _ in range(4):
        body = client.get("/api/v1/feed", {"after": cursor, "limit": 3}).json()
        seen += body["entries"]
        cursor = body["next_cursor"]
    assert seen == everything
    # nothing new: the same cursor back, and asking again gives the same (empty) answer
    assert client.get("/api/v1/feed", {"after": cursor}).json() == {"entries": [], "next_cursor": cursor}
    # the same cursor reads the same page again
    again = client.get("/api/v1/feed", {"limit": 3}).json()
    assert again == client.get("/api/v1/feed", {"limit": 3}).json()
    memory_write(store=store, content="A later fact about the weather.", principal="key:x")
    later = client.get("/api/v1/feed", {"after": cursor}).json()["entries"]
    assert [e["kind"] for e in later] == ["memory", "assertion"]


def test_exclude_generator_skips_the_callers_own_writes(world: dict[str, Any]) -> None:
    store, client = world["store"], world["client"]
    mine = client.post("/api/v1/memories", {"memory_store_id": store.pk, "content": "Written by the caller itself."},
                       format="json")
    assert mine.status_code == 201, mine.content
    other = memory_write(store=store, content="Written by somebody else entirely.", principal="key:other")
    everything, _ = read_all(client)
    others, _ = read_all(client, exclude_generator="true")
    assert len(everything) == 4
    assert [(e["kind"], e["id"]) for e in others] == [("memory", other.memory.pk), ("assertion", other.assertion.pk)]


def test_document_version_becoming_active_is_an_entry(world: dict[str, Any]) -> None:
    client = world["client"]
    created = client.post("/api/v1/documents", {"content": "plain words", "title": "Note", "wait": True},
                          format="json")
    assert created.status_code in (200, 201), created.content
    entries, _ = read_all(client)
    versions = [e for e in entries if e["kind"] == "document_version"]
    assert len(versions) == 1
    assert versions[0]["document_id"] == created.json()["id"] and versions[0]["state"] == "active"
    assert versions[0]["principal"].startswith("key:")


def test_another_projects_entries_never_appear(world: dict[str, Any]) -> None:
    other_project = ProjectFactory()
    memory_write(store=MemoryStoreFactory(project=other_project), content="Their secret plan.", principal="key:o")
    memory_write(store=world["store"], content="Our public plan.", principal="key:o")
    entries, _ = read_all(world["client"])
    assert {e["store_id"] for e in entries} == {world["store"].pk}
    theirs, _ = read_all(api_client(make_key(other_project)))
    assert len(theirs) == 2 and world["store"].pk not in {e["store_id"] for e in theirs}


BAD_CURSORS = ["nonsense", "Zm9vYmFy", "ZjEuMS4y!", "ZjEuLTEuMg", "ZjEuOTk5OTk5OTk5OTk5OTk5OTk5OTkuMQ"]


@pytest.mark.parametrize("cursor", BAD_CURSORS)
def test_bad_cursor_is_400_with_a_code(world: dict[str, Any], cursor: str) -> None:
    response = world["client"].get("/api/v1/feed", {"after": cursor})
    assert response.status_code == 400
    assert response.json()["code"] == "FEED_CURSOR_INVALID"


def test_bad_limit_is_400(world: dict[str, Any]) -> None:
    response = world["client"].get("/api/v1/feed", {"limit": 0})
    assert response.status_code == 400 and response.json()["code"] == "VALIDATION_ERROR"


def test_an_open_transaction_holds_back_later_commits_until_it_ends(world: dict[str, Any]) -> None:
    """The case a plain sequence gets wrong: the older transaction commits last. (It forgets a
    memory of another project: the horizon is the server's, so it holds this project's feed back
    all the same.)"""
    store, client = world["store"], world["client"]
    started, release = threading.Event(), threading.Event()
    slow_project = ProjectFactory()
    doomed = memory_write(store=MemoryStoreFactory(project=slow_project), content="Slow fact.",
                          principal="key:slow").memory

    def slow_writer() -> None:
        try:
            with transaction.atomic():
                memory_forget(memory=doomed, principal="key:slow", mechanism="api")
                started.set()
                release.wait(30)
        finally:
            connection.close()

    thread = threading.Thread(target=slow_writer)
    thread.start()
    assert started.wait(30)
    fast = memory_write(store=store, content="Fast fact.", principal="key:fast")
    body = client.get("/api/v1/feed").json()
    assert body["entries"] == []  # the fast commit waits behind the open, older transaction
    release.set()
    thread.join()
    entries, _ = read_all(client)
    assert [(e["kind"], e["id"]) for e in entries] == [("memory", fast.memory.pk), ("assertion", fast.assertion.pk)]
    slow_entries, _ = read_all(api_client(make_key(slow_project)))
    assert [e["state"] for e in slow_entries] == ["live", "created", "forgotten"]


def test_entries_written_after_the_project_moved_here_follow_the_cursor(world: dict[str, Any]) -> None:
    """The project's rows were copied from another server whose transaction ids run far ahead of
    this one's (a Citus shard move, a restored dump): a reader's cursor holds a position from
    there. The first entry written here starts the next era, above every position of the last."""
    project, store, client = world["project"], world["store"], world["client"]
    memory_write(store=store, content="Written before the move.", principal="key:x")
    clock = FeedClock.objects.get(project=project)
    assert clock.era == 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT (pg_control_system()).system_identifier")
        here = cursor.fetchone()[0]
    assert clock.node == here
    # as the other server wrote them: its ids a billion transactions ahead, its clock
    FeedEntry.objects.filter(project=project).update(txid=F("txid") + 10**9)
    FeedClock.objects.filter(project=project).update(node=here + 1)
    before, cursor_there = read_all(client)
    assert [e["kind"] for e in before] == ["memory", "assertion"]
    moved_in = memory_write(store=store, content="Written after the move.", principal="key:x")
    again = memory_write(store=store, content="Written later still.", principal="key:x")
    after, _ = read_all(client, after=cursor_there)
    assert [e["memory_id"] for e in after] == [moved_in.memory.pk] * 2 + [again.memory.pk] * 2
    clock.refresh_from_db()
    assert (clock.era, clock.node) == (1, here)
    assert [e["id"] for e in read_all(client)[0]] == [e["id"] for e in before + after]


@pytest.fixture
def qcluster_env() -> dict[str, str]:
    return {"MEMORY_ENGINE_EMBEDDING_PROVIDER": "tests.providers.HashingEmbeddingProvider", "Q_WORKERS": "1"}


@pytest.mark.slow
def test_concurrent_writers_and_a_worker_every_commit_once_in_cursor_order(qcluster: Any,
                                                                          world: dict[str, Any]) -> None:
    """8 writer threads for ~12 s (each holding its transaction open a random moment after the
    write, so commits land out of id order), short-lived memories the real worker's sweep
    expires, and a reader following the feed over HTTP the whole time."""
    from django_q.models import OrmQ
    from django_q.tasks import async_task

    project, client = world["project"], world["client"]
    stores = [MemoryStoreFactory(project=project) for _ in range(4)]
    stop = threading.Event()
    errors: list[BaseException] = []
    received: list[dict[str, Any]] = []

    def writer(n: int) -> None:
        rng = random.Random(n)
        count = 0
        try:
            while not stop.is_set():
                count += 1
                expires = timezone.now() + timedelta(seconds=1) if count % 5 == 0 else None
                with transaction.atomic():
                    memory_write(store=stores[rng.randrange(4)], content=f"writer {n} fact {count} {rng.random()}",
                                 principal=f"key:writer{n}", expires_at=expires)
                    time.sleep(rng.random() * 0.05)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            close_old_connections()
            connection.close()

    def sweeper() -> None:
        try:
            while not stop.is_set():
                async_task("memory_engine.tasks.memory_sweep_task")
                time.sleep(1.0)
        finally:
            connection.close()

    def reader() -> None:
        cursor = ""
        try:
            while True:
                body = client.get("/api/v1/feed", {"after": cursor, "limit": 200}).json()
                received.extend(body["entries"])
                cursor = body["next_cursor"]
                if stop.is_set() and reader_done.is_set() and not body["entries"]:
                    return
                time.sleep(0.05)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    reader_done = threading.Event()
    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    threads += [threading.Thread(target=sweeper), threading.Thread(target=reader)]
    for thread in threads:
        thread.start()
    time.sleep(12)
    stop.set()
    for thread in threads[:-1]:
        thread.join()
    # let the worker expire what is due, then let the reader drain
    time.sleep(2)
    async_task("memory_engine.tasks.memory_sweep_task")
    due = timezone.now()
    wait_for(lambda: not Memory.objects.filter(store__project=project, expires_at__lte=due).exists(), timeout=60)
    wait_for(lambda: not OrmQ.objects.exists(), timeout=60)
    reader_done.set()
    threads[-1].join(60)
    assert errors == []

    committed = list(MemoryAssertion.objects.filter(store__project=project).values_list("pk", flat=True))
    got = [e["id"] for e in received if e["kind"] == "assertion"]
    assert len(got) == len(set(got)), "an assertion was delivered twice"
    assert set(got) == set(committed), "an assertion was never delivered"
    assert len(committed) > 200
    assert {e["state"] for e in received} >= {"created", "expired"}  # the worker's writes came through
    positions = {row.object_id: (row.txid, row.seq) for row in FeedEntry.objects.filter(project=project)}
    order = [positions[e["id"]] for e in received]
    assert order == sorted(order) and len(set(order)) == len(order)
    # the race the horizon guards against happened: feed rows get their sequence number at
    # commit, so a smaller number after a larger one means transactions committed out of the
    # order they began (a reader of sequence numbers or of transaction ids alone would skip)
    seqs = [seq for _, seq in order]
    assert seqs != sorted(seqs)
