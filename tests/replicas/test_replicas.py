"""Read replicas against a real streaming standby (memory_engine.replicas, docs/scaling.md): the
reads of requests that only read run there, writes and a principal's reads of its own recent
writes on the primary, search only where the replica's lexical channel answers, and a replica
that goes away costs nothing but its speed (no 5xx)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext

from memory_engine.models import Memory, MemoryStore
from memory_engine.services.keys import api_key_create
from memory_engine.services.memories import memory_write
from tests.conftest import api_client
from tests.factories import ProjectFactory

from .conftest import ALIAS, Standby

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600),
              pytest.mark.django_db(transaction=True, databases=["default", ALIAS])]


@pytest.fixture
def tenant(replica: Standby, hashing_embedder: None) -> dict[str, Any]:
    project = ProjectFactory()
    store = MemoryStore.objects.create(project=project, name="ops")
    for text in ("The VPN gateway restarts at midnight.", "Backups run every four hours."):
        memory_write(store=store, content=text, principal="test", mechanism="api")
    writer = api_key_create(project=project)[1]
    reader = api_key_create(project=project)[1]
    replica.catch_up()
    return {"project": project, "store": store, "writer": api_client(writer), "reader": api_client(reader)}


def on_replica(call: Any) -> tuple[Any, int]:
    """The answer, and how many statements the replica ran for it."""
    with CaptureQueriesContext(connections[ALIAS]) as replica_queries:
        answer = call()
    return answer, len(replica_queries.captured_queries)


def test_reads_run_on_the_replica_and_writes_on_the_primary(replica: Standby, tenant: dict[str, Any]) -> None:
    listed, used = on_replica(lambda: tenant["reader"].get("/api/v1/memories",
                                                           {"memory_store_id": tenant["store"].pk}))
    assert listed.status_code == 200 and listed.json()["count"] == 2
    assert used > 0
    written, used = on_replica(lambda: tenant["writer"].post("/api/v1/memories", {
        "memory_store_id": tenant["store"].pk, "content": "The staging cluster runs PostgreSQL 18."}, format="json"))
    assert written.status_code == 201 and used == 0
    assert Memory.objects.filter(pk=written.json()["id"]).exists()  # on the primary
    replica.catch_up()
    feed, used = on_replica(lambda: tenant["reader"].get("/api/v1/feed", {"limit": 1000}))
    assert feed.status_code == 200 and used > 0 and written.json()["id"] in feed.content.decode()


def test_a_principal_reads_its_own_writes_while_the_replica_lags(replica: Standby, tenant: dict[str, Any]) -> None:
    replica.execute("SELECT pg_wal_replay_pause()")
    try:
        written = tenant["writer"].post("/api/v1/memories", {
            "memory_store_id": tenant["store"].pk, "content": "Deploys freeze on the last Friday."}, format="json")
        assert written.status_code == 201
        mine, used = on_replica(lambda: tenant["writer"].get("/api/v1/memories",
                                                             {"memory_store_id": tenant["store"].pk}))
        # the writer sees its write: its reads went to the primary (the replica answered one position check)
        assert written.json()["id"] in mine.content.decode() and mine.json()["count"] == 3
        assert used == 1
        theirs, used = on_replica(lambda: tenant["reader"].get("/api/v1/memories",
                                                               {"memory_store_id": tenant["store"].pk}))
        assert theirs.status_code == 200 and used > 1  # another principal reads the replica as it is
        assert theirs.json()["count"] == 2  # stale by design: it did not write
    finally:
        replica.execute("SELECT pg_wal_replay_resume()")
    replica.catch_up()
    mine, used = on_replica(lambda: tenant["writer"].get("/api/v1/memories", {"memory_store_id": tenant["store"].pk}))
    assert mine.json()["count"] == 3 and used > 1  # caught up: back on the replica


def test_search_stays_on_the_primary_where_the_replica_finds_nothing_lexically(replica: Standby,
                                                                              tenant: dict[str, Any]) -> None:
    """The embedded server's pg_textsearch 1.0 keeps part of its bm25 index in memory: a standby
    answers BM25 queries with nothing, so searches read the primary (listings still use it)."""
    found, used = on_replica(lambda: tenant["reader"].post("/api/v1/knowledge/search", {
        "query": "When does the VPN gateway restart?", "memory_store_ids": [tenant["store"].pk]}, format="json"))
    assert found.status_code == 200 and found.json()["results"][0]["text"] == "The VPN gateway restarts at midnight."
    assert "lexical_unavailable" not in found.json()["degraded"]
    searched = " ".join(query["sql"] for query in on_replica_queries(tenant))
    assert "<@>" not in searched and "<=>" not in searched


def on_replica_queries(tenant: dict[str, Any]) -> list[dict[str, Any]]:
    with CaptureQueriesContext(connections[ALIAS]) as replica_queries:
        tenant["reader"].post("/api/v1/knowledge/search", {"query": "backups", "memory_store_ids": [
            tenant["store"].pk]}, format="json")
    return replica_queries.captured_queries


def test_a_replica_that_goes_away_costs_no_request(replica: Standby, tenant: dict[str, Any]) -> None:
    replica.stop()
    try:
        for _ in range(3):
            listed = tenant["reader"].get("/api/v1/memories", {"memory_store_id": tenant["store"].pk})
            assert listed.status_code == 200 and listed.json()["count"] == 2
            found = tenant["reader"].post("/api/v1/knowledge/search", {
                "query": "backups", "memory_store_ids": [tenant["store"].pk]}, format="json")
            assert found.status_code == 200
    finally:
        replica.start()
    replica.catch_up()
    listed, used = on_replica(lambda: tenant["reader"].get("/api/v1/memories",
                                                           {"memory_store_id": tenant["store"].pk}))
    assert listed.status_code == 200 and used > 0  # back (REPLICA_RETRY_SECONDS is 0 here)


def test_mcp_reading_tools_use_the_replica(replica: Standby, tenant: dict[str, Any]) -> None:
    from memory_engine.policy import SYSTEM
    from memory_engine.services.agents import agent_create
    from tests.hardening.mcp_wsgi import mcp_call

    agent = agent_create(project=tenant["project"], name="ops-agent", caller=SYSTEM,
                         knowledge_config={"memory_store_ids": [tenant["store"].pk]})
    key = api_key_create(project=tenant["project"])[1]
    replica.catch_up()
    listed, used = on_replica(lambda: mcp_call(key, "list_memories", {}, agent=agent.pk))
    assert not listed.is_error and used > 0


def test_the_setting_is_checked(standby: Standby, settings: Any) -> None:
    from memory_engine.checks import check_read_replicas

    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "READ_REPLICAS": ["nowhere"]}
    settings.DATABASE_ROUTERS = []
    assert [error.id for error in check_read_replicas()] == ["memory_engine.E011", "memory_engine.E011"]
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "READ_REPLICAS": []}
    assert check_read_replicas() == []
