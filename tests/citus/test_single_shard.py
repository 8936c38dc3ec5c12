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

A memory rule fires on a completed generation, a resident distiller ticks through the API and by
the schedule (whose search for distillers is the one statement across projects), a replay is
staged, searched, promoted and demoted, and a real django-q2 worker ingests a queued document, all
by the project. After the project's shards move to the other worker, the feed reads on from a
cursor taken before (migration 0035's feed clock).

Not yet covered: pg_textsearch's bm25 on the shards (the search runs on the tsvector fallback)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from .api_flows import SCHEDULED_TASKS
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
    assert sum(kind == "distributed" for kind in distributed.values()) == 34
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


def test_the_feed_reads_on_from_its_cursor_after_the_project_moved_to_another_worker(
        flows: dict[str, dict[str, Any]]) -> None:
    """A feed position holds a transaction id, which belongs to one node. The project's node ran
    a thousand transactions ahead of the other; a reader read to the end there; then its shards
    moved (``citus_move_shard_placement``, docs/scaling.md). The first entry written on the new
    node starts the project's next era (migration 0035), so it sorts after the reader's cursor:
    without it, the new node's lower transaction ids would put it behind, and the reader would
    never see it."""
    assert step(flows, "the feed read to its end on the node that holds the project (far ahead of the other)") > 0
    moved = step(flows, "the project's shards moved to the other worker (citus_move_shard_placement)")
    assert moved["from"] != moved["to"]
    written = step(flows, "POST /api/v1/memories (after the move)")
    assert written["status"] == 201, written
    read = step(flows, "GET /api/v1/feed?after=… (the cursor read before the move)")
    memory = written["answer"]["id"]
    assert read == {"entries": [["memory", memory], ["assertion", memory]], "era": 1}


def test_a_memory_rule_is_set_up_and_fires_on_a_completed_generation(flows: dict[str, dict[str, Any]]) -> None:
    """An agent and a rule on the store (its source agents written through their own table);
    completing a generation marks the firing pending under the generation's row lock and queues
    it with its project; the firing (the task as the worker runs it) reads the rule, its store
    and the generation by the project, writes through the funnel and records its counts."""
    agent = step(flows, "POST /api/v1/agents")
    assert agent["status"] == 201, agent
    rule = step(flows, "POST /api/v1/memory-stores/{store}/rules (callable)")
    assert rule["status"] == 201 and rule["answer"]["source_agent_ids"] == [], rule
    completed = step(flows, "POST /api/v1/generations (completed: the rule's firing queued)")
    assert completed["status"] == 201, completed
    counts = {"created": 1, "superseded": 0, "skipped": 0, "failed": 0, "error": None}
    assert step(flows, "the rule's firing run as the worker runs it") == [counts]
    read = step(flows, "GET /api/v1/generations/{generation}")
    assert read["answer"]["extraction"] == {rule["answer"]["id"]: counts}


def test_a_distiller_is_ticked_through_the_api_and_by_the_schedule(flows: dict[str, dict[str, Any]]) -> None:
    """A resident distiller's tick names the project on every table it reads (its lease, the
    feed, the versions with their documents, the claims' writes, the retirement); a document's
    second version is captured and ingested by its project (its raw capture, its versions); the schedule's
    task finds every project's distillers in one statement across projects
    (memory_engine.db.across_projects), then ticks each by its project."""
    assert step(flows, "PUT /api/v1/documents/by-ref/wiki/expenses (to distil)")["status"] == 201
    created = step(flows, "POST /api/v1/distillers")
    assert created["status"] == 201, created
    ticked = step(flows, "POST /api/v1/distillers/{distiller}/tick")
    assert ticked["status"] == 200, ticked
    assert (ticked["answer"]["counts"]["versions"], ticked["answer"]["counts"]["created"]) == (1, 1), ticked
    assert step(flows, "PUT /api/v1/documents/by-ref/wiki/expenses (a new version)")["status"] == 201
    scheduled = step(flows, "the schedule's distiller tick (memory_engine.tasks.distillers_tick_task)")
    assert scheduled["ran"] and scheduled["errors"] == [], scheduled
    # the new claim supersedes the old one; the retirement's reading ran with it, single-shard
    assert (scheduled["counts"]["versions"], scheduled["counts"]["superseded"]) == (1, 1), scheduled
    read = step(flows, "GET /api/v1/distillers/{distiller}")
    assert read["status"] == 200, read
    assert read["answer"]["versions"] == {"done": 2, "failed": 0}, read


@pytest.mark.parametrize("task", SCHEDULED_TASKS)
def test_the_schedules_task_runs_with_multi_shard_statements_refused(flows: dict[str, dict[str, Any]],
                                                                     task: str) -> None:
    """Each task of the schedule finds its work in every project in statements marked as across
    projects (memory_engine.db.across_projects), then does it with statements on one project's
    shards: on a worker whose connection refuses multi-shard statements, it runs."""
    assert step(flows, "a memory expired, one trashed long ago, a version past its time, a text unjudged (SQL)") == [
        1, 1, 1, 1]
    done = step(flows, f"the schedule's {task}")
    if task == "memory_sweep_task":
        assert done["expired"] >= 1 and done["purged"] >= 1, done
    if task == "retention_sweep_task":
        assert done["versions"] >= 1 and done["documents_forgotten"] >= 1, done
    if task == "guard_sweep_task":
        assert done["memory_contents"] >= 1, done


def test_the_swept_rows_are_gone(flows: dict[str, dict[str, Any]]) -> None:
    assert step(flows, "GET /api/v1/memories/{expiring} (after the sweep)")["status"] == 404
    assert step(flows, "GET /api/v1/documents/{drill} (after the sweep)")["answer"]["forgotten_at"] is not None


def test_every_admin_list_answers_a_superuser_and_a_member(flows: dict[str, dict[str, Any]]) -> None:
    """A superuser's lists read every project (multi-shard, as the docs say), and Citus accepts
    each of their joins: every foreign key between tenant tables joins on ``project_id`` too
    (memory_engine.models.tenancy.join_tenant_rows_by_project). A staff member of the project
    reads each list, its filters and the parents it shows on the project's node alone."""
    root = step(flows, "every admin changelist as a superuser (every project)")
    member = step(flows, "every admin changelist as a member of the project (multi-shard refused)")
    assert len(root) == 20 and set(root.values()) == {200}, root
    # a member's view permissions do not include the staff grants (superusers manage those)
    assert {model: status for model, status in member.items() if status != 200} == {"staffgrants": 403}, member


def test_a_replay_is_staged_searched_promoted_and_demoted(flows: dict[str, dict[str, Any]]) -> None:
    """A staged generation (replay): the run reads its config, documents and raw captures by the
    project; a search of the staged chunks reads the run's ranking knobs by the project; promote
    and demote lock the run and its documents by their project and swap versions and chunks
    without a join (memory_engine.services.documents.replay)."""
    handbook = step(flows, "POST /api/v1/documents (the handbook, wait: ingested inline)")
    assert handbook["status"] == 201 and handbook["answer"]["total_chunks"] == 1, handbook
    staged = step(flows, "a replay of the project's raw captures (smaller chunks), staged")
    assert staged["status"] == "completed" and staged["error"] is None and staged["chunks"] > 1, staged
    found = step(flows, "a search of the staged generation (the service a staff session's search calls)")
    assert found == [handbook["answer"]["id"]]
    assert step(flows, "the staged generation promoted") == {"status": "promoted", "total_chunks": staged["chunks"]}
    assert step(flows, "the promoted generation demoted") == {"status": "demoted", "total_chunks": 1}


def test_a_django_q2_worker_ingests_a_queued_document_single_shard(flows: dict[str, dict[str, Any]]) -> None:
    """The document's ingestion task and the entity reading it queues carry the project: a real
    worker whose connection refuses multi-shard statements runs both."""
    queued = step(flows, "POST /api/v1/documents (queued for the worker)")
    assert queued["status"] == 202 and queued["answer"]["status"] == "pending", queued
    assert step(flows, "the document ingested by a django-q2 worker on the cluster") == {
        "status": "ready", "error": None, "indexed_chunks": 1, "entities_read": True}
