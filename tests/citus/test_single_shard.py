"""One project's first API flows are single-shard statements on the cluster (issue 73): the schema
as migrated, placed by ``manage.py memory_engine_distribute`` (memory_engine.distribution), and
the API run against it by Django in a process of its own with
``citus.multi_task_query_log_level = 'error'`` (tests/citus/api_flows.py): the key looked up by its
prefix (a reference table) passes.

The schema is distributed with its keys and foreign keys as migrated (migration 0030: every key
carries ``project_id``); a store is created and read back with its count of live memories; the
change feed's triggers run on the shard's node at commit (migration 0031) and write a memory's
entries.

The write funnel (a write, its duplicate, a supersede, a batch), the memory listing, a search,
the feed and a legal hold name the project on every table they read (migration 0033 keeps that
cheap on one PostgreSQL). Deletes go through memory_engine.db.delete_in_project, which names the
project where Django's collector looks related rows up by id alone: an erasure that goes ahead
with its receipt, a memory forgotten to the trash and restored, a store deleted.

The command distributes the tables with their triggers (``citus.enable_unsafe_triggers``); the
lexical statistics count a content row written and deleted on the shard (migration 0032).

Not yet covered: pg_textsearch's bm25 on the shards (the search runs on the tsvector fallback)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from .cluster import CitusCluster
from .schema import ROOT, database_url, migrate
from .test_distribute import manage

pytestmark = pytest.mark.timeout(1200)

DATABASE = "memory_engine_single_shard"


@pytest.fixture(scope="module")
def distributed(citus_cluster: CitusCluster) -> Iterator[dict[str, str]]:
    """Each table of the migrated, distributed database by its Citus type."""
    migrate(citus_cluster, DATABASE)
    done = manage(citus_cluster, "memory_engine_distribute", database=DATABASE)
    assert done.returncode == 0, done.stderr[-3000:]
    yield dict(citus_cluster.coordinator.execute("SELECT table_name::text, citus_table_type FROM citus_tables",
                                                 dbname=DATABASE))


@pytest.fixture(scope="module")
def flows(distributed: dict[str, str], citus_cluster: CitusCluster) -> dict[str, dict[str, Any]]:
    """Each step of tests/citus/api_flows.py by its label."""
    done = subprocess.run([sys.executable, "-m", "tests.citus.api_flows", database_url(citus_cluster, DATABASE)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    steps = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {step["step"]: step for step in steps}


def test_the_api_key_is_a_reference_table(distributed: dict[str, str]) -> None:
    assert distributed["memory_engine_apikey"] == "reference"


@pytest.mark.parametrize("table", ["memory_engine_memorystore", "memory_engine_memory",
                                   "memory_engine_memorycontent", "memory_engine_memoryassertion"])
def test_the_memory_tables_are_distributed(distributed: dict[str, str], table: str) -> None:
    assert distributed[table] == "distributed"


def test_every_tenant_table_is_distributed_with_its_keys_as_migrated(citus_cluster: CitusCluster,
                                                                      distributed: dict[str, str]) -> None:
    """Migration 0030: Citus takes every key and foreign key as migrated, none rebuilt."""
    assert sum(kind == "distributed" for kind in distributed.values()) == 33
    without_project = citus_cluster.coordinator.execute("""
        SELECT count(*) FROM pg_index x JOIN pg_class t ON t.oid = x.indrelid
        JOIN citus_tables ct ON ct.table_name = t.oid AND ct.citus_table_type = 'distributed'
        WHERE x.indisunique AND NOT EXISTS (SELECT 1 FROM unnest(x.indkey) k JOIN pg_attribute a
                                            ON a.attrelid = t.oid AND a.attnum = k AND a.attname = 'project_id')""",
                                                        dbname=DATABASE)
    assert without_project == [(0,)]


def step(flows: dict[str, dict[str, Any]], label: str) -> Any:
    found = flows[label]
    assert "error" not in found, f"{found['error']}\n  refused statement: {found.get('statement')}"
    return found["outcome"]


def test_the_flows_run_with_multi_shard_statements_refused(flows: dict[str, dict[str, Any]]) -> None:
    assert step(flows, "SHOW citus.multi_task_query_log_level") == "error"
    refused = flows["every project's memories counted (a multi-shard statement)"]
    assert "multi-task query about to be executed" in refused.get("error", ""), refused


def test_the_key_is_looked_up_by_its_prefix(flows: dict[str, dict[str, Any]]) -> None:
    step(flows, "create a project and an API key (ORM)")
    assert step(flows, "api_key_authenticate: the key looked up by its prefix") is True


def test_a_store_is_created_and_read_back_with_its_count(flows: dict[str, dict[str, Any]]) -> None:
    """The read-back counts the store's live memories by a subquery correlated on the project
    (memory_engine.db.SubqueryCount), not a ``GROUP BY`` on the store's id."""
    created = step(flows, "POST /api/v1/memory-stores")
    assert created["status"] == 201, created
    assert created["answer"]["valid_memories"] == 0


def test_the_feed_triggers_write_their_entries_on_the_projects_shard(flows: dict[str, dict[str, Any]]) -> None:
    """Migration 0031: the feed's triggers name the project in every lookup, so on the worker that
    holds the row they read and write only that project's co-located shards, and the write commits."""
    entries = step(flows, "a memory written by SQL, its feed entries written by the triggers at commit")
    assert sorted(map(tuple, entries)) == [("assertion", "ma_flow", "flows"), ("memory", "mem_flow", "flows")]


def test_the_lexical_statistics_follow_a_write_and_a_delete_on_the_shard(flows: dict[str, dict[str, Any]]) -> None:
    """Migration 0032: the statistics' triggers add with an upsert and take away one key at a
    time, each a statement on the project's own shard, which Citus runs inside a trigger."""
    before = step(flows, "the project's content rows counted before")
    assert step(flows, "its content counted in the project's lexical statistics") == before + 1
    assert step(flows, "the memory and its content deleted by SQL: the content uncounted") == before


def test_a_memory_is_written_then_deduplicated(flows: dict[str, dict[str, Any]]) -> None:
    """The write funnel's content lookup, upsert and dedup candidates name the project on every
    table they read: one shard's statements."""
    first = step(flows, "POST /api/v1/memories")
    again = step(flows, "POST /api/v1/memories (the same text again: dedup)")
    assert first["status"] == 201, first
    assert again["status"] in (200, 201), again
    assert again["answer"]["id"] == first["answer"]["id"], again


def test_the_stores_memories_are_listed(flows: dict[str, dict[str, Any]]) -> None:
    listed = step(flows, "GET /api/v1/memories?memory_store_id=…")
    assert listed["status"] == 200, listed
    first = step(flows, "POST /api/v1/memories")
    assert [row["id"] for row in listed["answer"]["results"]] == [first["answer"]["id"]]


def test_the_store_is_searched(flows: dict[str, dict[str, Any]]) -> None:
    found = step(flows, "POST /api/v1/knowledge/search")
    assert found["status"] == 200, found
    first = step(flows, "POST /api/v1/memories")
    assert first["answer"]["id"] in [hit["id"] for hit in found["answer"]["results"]], found


def test_a_new_value_about_the_same_key_supersedes(flows: dict[str, dict[str, Any]]) -> None:
    first = step(flows, "POST /api/v1/memories (about release_day)")
    second = step(flows, "POST /api/v1/memories (about release_day, a new value: supersede)")
    assert first["status"] == 201, first
    assert second["status"] == 201, second
    assert second["answer"]["action"] == "superseded", second
    assert second["answer"]["superseded_memory_id"] == first["answer"]["id"], second


def test_a_batch_is_written(flows: dict[str, dict[str, Any]]) -> None:
    batch = step(flows, "POST /api/v1/memories/batch")
    assert batch["status"] in (200, 201), batch
    assert batch["answer"]["counts"]["created"] == 2, batch


def test_the_feed_lists_the_writes(flows: dict[str, dict[str, Any]]) -> None:
    feed = step(flows, "GET /api/v1/feed")
    assert feed["status"] == 200, feed
    written = {step(flows, "POST /api/v1/memories")["answer"]["id"],
               step(flows, "POST /api/v1/memories (about release_day)")["answer"]["id"]}
    assert written <= {entry["memory_id"] for entry in feed["answer"]["entries"]}, feed


def test_legal_hold_stops_an_erasure(flows: dict[str, dict[str, Any]]) -> None:
    held = step(flows, "POST /api/v1/memories/{held}/retention (legal_hold)")
    assert held["status"] == 200, held
    refused = step(flows, "POST /api/v1/erasure (tags case: held: refused)")
    assert refused["status"] == 409, refused
    assert refused["answer"]["code"] == "LEGAL_HOLD", refused


def test_an_erasure_goes_ahead_and_its_receipt_is_listed(flows: dict[str, dict[str, Any]]) -> None:
    """memory_engine.db.delete_in_project: the erased memory, what cascades from it, its content
    row and ledger redaction name the project in every statement (Django's collector would look
    the related rows up by id alone)."""
    erased = step(flows, "POST /api/v1/erasure (tags team: gone)")
    assert erased["status"] == 201, erased
    assert erased["answer"]["counts"]["memory"] == 1, erased
    assert erased["answer"]["counts"]["memorycontent"] == 1, erased
    receipts = step(flows, "GET /api/v1/erasure-receipts")
    assert receipts["status"] == 200, receipts
    assert [receipt["id"] for receipt in receipts["answer"]["results"]] == [erased["answer"]["id"]]


def test_a_memory_goes_to_the_trash_and_comes_back(flows: dict[str, dict[str, Any]]) -> None:
    assert step(flows, "DELETE /api/v1/memories/{forgotten} (to the trash)")["status"] == 204
    restored = step(flows, "POST /api/v1/memories/{forgotten}/restore")
    assert restored["status"] == 200, restored
    assert restored["answer"]["trashed_at"] is None, restored


def test_a_store_is_deleted_with_its_memories(flows: dict[str, dict[str, Any]]) -> None:
    assert step(flows, "POST /api/v1/memories (into the store to delete)")["status"] == 201
    assert step(flows, "DELETE /api/v1/memory-stores/{scratch}")["status"] == 204


def test_a_document_is_ingested_inline_listed_and_searched(flows: dict[str, dict[str, Any]]) -> None:
    """The ingestion pipeline names the project in every statement (its claim, heartbeat, swap,
    versions) and ``insert_rows`` casts the vectors to the column's type, which Citus needs in an
    ``INSERT ... SELECT``."""
    created = step(flows, "POST /api/v1/documents (text, wait: ingested inline)")
    assert created["status"] == 201, created
    assert created["answer"]["status"] == "ready" and created["answer"]["total_chunks"] == 1, created
    assert step(flows, "GET /api/v1/documents/{document}")["status"] == 200
    chunks = step(flows, "GET /api/v1/documents/{document}/chunks")
    assert chunks["status"] == 200 and len(chunks["answer"]["results"]) == 1, chunks
    found = step(flows, "POST /api/v1/knowledge/search (the project's documents)")
    assert found["status"] == 200, found
    assert created["answer"]["id"] in [hit["document_id"] for hit in found["answer"]["results"]], found


def test_a_document_is_forgotten_then_deleted(flows: dict[str, dict[str, Any]]) -> None:
    forgotten = step(flows, "POST /api/v1/documents/{document}/forget")
    assert forgotten["status"] == 200 and forgotten["answer"]["forgotten_at"], forgotten
    assert step(flows, "DELETE /api/v1/documents/{document}")["status"] == 204


def test_an_erasure_by_tags_takes_a_document(flows: dict[str, dict[str, Any]]) -> None:
    assert step(flows, "POST /api/v1/documents (tags team: archived)")["status"] == 201
    erased = step(flows, "POST /api/v1/erasure (tags team: archived: a document)")
    assert erased["status"] == 201, erased
    counts = erased["answer"]["counts"]
    assert (counts["document"], counts["documentversion"], counts["chunk"]) == (1, 1, 1), counts
