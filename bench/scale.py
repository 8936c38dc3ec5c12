"""Scale: search latency as one store grows to 300,000 memories, the batch write door against
one-by-one writes, and reads on a streaming replica (docs/scaling.md).

    .venv/bin/python bench/scale.py --data ../shared/data                   # 10k, 100k, 300k (~20 min)
    .venv/bin/python bench/scale.py --sizes 10000 --queries 50 --base-sample 300   # a quick check
    .venv/bin/python bench/scale.py --replica                               # + reads on a standby
    .venv/bin/python bench/scale.py --sizes 100000 --projects 10 --skip-writes   # ten projects in one table

One project in a database of its own (``bench_scale``): store A grows to N memories, three more
stores hold N/10 each. Every memory takes the text of a real LoCoMo turn and a vector near that
text's real embedding (cosine ~0.9; the shared data holds 4,805 dev turns, so texts repeat with
their own vectors), loaded with COPY, HNSW rebuilt after each load. Queries are real LoCoMo
questions embedded with the real model. Measured per size: ``knowledge_search`` less the query
embedding (``timings["search_ms"]``) for store A alone (``one store``) and for all four stores
(``project``), concurrency 1, each in two passes over the same questions: the first with the
instruction guard's caches emptied (``cold``: a process meeting the texts for the first time),
the second right after. Each row carries the guard's finding as a write stores it (judged once
per distinct text while loading), so neither pass should judge anything; a gap between them is
a cost of the read path.

``batch``: the same texts written one ``POST /memories`` at a time and through
``POST /memories/batch`` (the real embedder, a new store each, in-process API), writes per second
and ``batch_speedup`` = batch / single.

``--projects N``: the sizes divided among N projects of the same shape (store A and three others
each), the first one searched: one project among others in the same tables, as a hosted product
has them (docs/benchmarks.md, *Every table by its project*).

``--replica``: a hot standby of the embedded server (``memory_engine.embedded.EmbeddedStandby``)
as ``READ_REPLICAS``; a writer key writes and reads back at once, another key reads: reads served
by the replica, stale reads (a principal's read missing its own last write: the target is 0) and
the replication lag (from a write's commit until the standby has replayed it).

Writes bench/results/scale.json: ``sizes: [{memories, search_p50_ms, search_p95_ms,
project_p50_ms, project_p95_ms, search_cold_p50_ms, …}]``, ``batch_speedup``, ``replica:
{reads_on_replica, stale_reads, lag_p95_ms}``; targets: search p95 ≤ 20 ms at 300k in one store,
batch ≥ 3× single, 0 stale reads.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import DEFAULT_DATA, RESULTS, copy_rows, machine, percentile, print_table, write_results  # noqa: E402
from search import base_material, build_hnsw, drop_hnsw, near, setup_django, vec_text  # noqa: E402

DB_NAME = "bench_scale"
OTHER_STORES = 3
TARGET_P95_MS = 20.0
TARGET_BATCH_SPEEDUP = 3.0
#: Memories committed per transaction while loading.
LOAD_BATCH = 2000


def load_memories(store: Any, material: dict[str, Any], n: int, seed: int) -> None:
    """Append ``n`` memories to ``store`` with COPY (texts of real turns, vectors near theirs),
    committed every :data:`LOAD_BATCH` memories."""
    import numpy as np
    from django.db import connection
    from django.utils import timezone

    from memory_engine.ids import new_id

    if n <= 0:
        return
    guards = turn_findings(material)
    empty_fields = json.dumps(guard_findings([["", {}, {}]])[0].as_json())
    rng = np.random.default_rng(seed)
    vectors, idx = near(material["turn_vectors"], rng, n)
    now = timezone.now()
    raw = connection.connection
    for start in range(0, n, LOAD_BATCH):
        contents, memories = [], []
        for i in range(start, min(n, start + LOAD_BATCH)):
            text = material["turns"][idx[i]]
            cid = new_id("mc")
            digest = hashlib.sha256(f"{text}#{store.pk}#{seed}#{i}".encode()).hexdigest()
            contents.append((cid, store.pk, store.project_id, digest, text, vec_text(vectors[i]), "all-MiniLM-L6-v2",
                             guards[text], now))
            memories.append((new_id("mem"), store.pk, store.project_id, cid, "{}", "{}", "manual", now, "fact", "",
                             "", 0.7, 1, "durable", empty_fields))
        with raw.cursor() as cursor:
            copy_rows(cursor, "memory_engine_memorycontent", "id, store_id, project_id, content_hash, text, "
                      "embedding, embedding_model, guard, created_at", contents)
            copy_rows(cursor, "memory_engine_memory", "id, store_id, project_id, content_id, tags, metadata, "
                      "source_type, created_at, kind, title, summary, confidence, evidence_count, retention_class, "
                      "guard", memories)
        raw.commit()


def turn_findings(material: dict[str, Any]) -> dict[str, str]:
    """The instruction guard's finding on each distinct turn, as the write funnel stores it with
    its content row (the screen reading the turn's real vector), judged once per run: each write
    of the text would have paid it once. Judging time goes to ``material["guard_judging_s"]``."""
    if "guards" not in material:
        started = time.perf_counter()
        vectors = {text: material["turn_vectors"][i].tolist() for i, text in enumerate(material["turns"])}
        distinct = list(dict.fromkeys(material["turns"]))
        found = guard_findings([[text] for text in distinct], vectors=vectors)
        material["guards"] = {text: json.dumps(f.as_json()) for text, f in zip(distinct, found, strict=True)}
        material["guard_judging_s"] = round(time.perf_counter() - started, 1)
        print(f"judged {len(distinct)} distinct turns in {material['guard_judging_s']} s", file=sys.stderr)
    guards: dict[str, str] = material["guards"]
    return guards


def guard_findings(groups: list[list[Any]], vectors: dict[str, Any] | None = None) -> list[Any]:
    from memory_engine.instruction_guard import findings

    return findings(groups, vectors=vectors)


def search_latency(project: Any, store_ids: list[str], queries: list[str]) -> dict[str, float]:
    """Server-side ms of ``queries`` over ``store_ids``, in two passes from the same start.

    The instruction guard judges every fused candidate's text and keeps its readings per
    process (memory_engine.instruction_guard), and the texts repeat across stores and sizes: a
    scope measured after another found them judged, the first one measured paid the classifier
    for each. So the guard's caches are emptied before each scope; the first pass (``cold_*``)
    judges what it has not seen, as a fresh process does; the second, over the same questions,
    is the search itself. Rows loaded here carry the finding the write funnel stores
    (:func:`turn_findings`): a read judges nothing, cold or warm."""
    from memory_engine import instruction_guard
    from memory_engine.instruction_guard import classifier
    from memory_engine.selectors.search import SearchRequest, knowledge_search

    def timed() -> list[float]:
        return [knowledge_search(SearchRequest(project=project, query=query, memory_store_ids=store_ids, limit=10))
                .timings["search_ms"] for query in queries]

    classifier.clear_cache()
    instruction_guard._assessed.clear()
    cold = timed()
    warm = timed()
    return {"p50_ms": round(statistics.median(warm), 2), "p95_ms": round(percentile(warm, 95), 2),
            "cold_p50_ms": round(statistics.median(cold), 2), "cold_p95_ms": round(percentile(cold, 95), 2)}


def write_throughput(project: Any, texts: list[str], batch_size: int) -> dict[str, Any]:
    """Writes per second one by one and through the batch door, each into a new store."""
    from rest_framework.test import APIClient

    from memory_engine.models import MemoryStore
    from memory_engine.services.keys import api_key_create

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key_create(project=project)[1]}")
    single = MemoryStore.objects.create(project=project, name=f"single-{time.time_ns()}")
    started = time.perf_counter()
    for text in texts:
        answer = client.post("/api/v1/memories", {"memory_store_id": single.pk, "content": text}, format="json")
        assert answer.status_code in (200, 201), answer.content
    single_rate = len(texts) / (time.perf_counter() - started)
    batched = MemoryStore.objects.create(project=project, name=f"batch-{time.time_ns()}")
    started = time.perf_counter()
    for i in range(0, len(texts), batch_size):
        answer = client.post("/api/v1/memories/batch", {"memory_store_id": batched.pk, "memories": [
            {"content": text} for text in texts[i:i + batch_size]]}, format="json")
        assert answer.status_code in (200, 201), answer.content
    batch_rate = len(texts) / (time.perf_counter() - started)
    return {"writes": len(texts), "batch_size": batch_size, "single_per_s": round(single_rate, 1),
            "batch_per_s": round(batch_rate, 1), "batch_speedup": round(batch_rate / single_rate, 2)}


def replica_run(project: Any, store: Any, texts: list[str]) -> dict[str, Any]:
    """A writer writes and reads back at once; another key reads; on a real standby."""
    from django.conf import settings
    from django.db import connection, connections
    from django.test.utils import CaptureQueriesContext
    from rest_framework.test import APIClient

    from memory_engine.embedded import EmbeddedStandby
    from memory_engine.services.keys import api_key_create

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    root = Path(tempfile.mkdtemp(prefix="bench-standby-")) / "standby"
    standby = EmbeddedStandby(primary_host=connection.settings_dict["HOST"], root=root, port=port)
    print("  making a standby (pg_basebackup)...", flush=True)
    standby.create().start()
    connections.settings["replica"] = standby.database(connection.settings_dict)
    from django.db import router
    from django.test.utils import override_settings

    # through setting_changed, as a deployment's settings would be read: the engine's settings
    # are cached until it fires
    routed = override_settings(DATABASE_ROUTERS=["memory_engine.replicas.ReplicaRouter"],
                               MEMORY_ENGINE={**getattr(settings, "MEMORY_ENGINE", {}), "READ_REPLICAS": ["replica"]})
    routed.enable()
    router.routers = [__import__("memory_engine.replicas", fromlist=["ReplicaRouter"]).ReplicaRouter()]
    clients = {}
    for name in ("writer", "reader"):
        clients[name] = APIClient()
        clients[name].credentials(HTTP_AUTHORIZATION=f"Bearer {api_key_create(project=project)[1]}")
    reads_on_replica = reads = stale = 0
    lags: list[float] = []
    try:
        for text in texts:
            written = clients["writer"].post("/api/v1/memories", {"memory_store_id": store.pk, "content": text},
                                             format="json")
            committed = time.perf_counter()
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_current_wal_lsn()::text")
                position = cursor.fetchone()[0]
            for name in ("writer", "reader"):
                with CaptureQueriesContext(connections["replica"]) as on_replica:
                    answer = clients[name].get(f"/api/v1/memories/{written.json()['id']}")
                reads += 1
                reads_on_replica += len(on_replica.captured_queries) > 1  # more than the position check
                if name == "writer" and answer.status_code != 200:
                    stale += 1
            while True:
                with connections["replica"].cursor() as cursor:
                    cursor.execute("SELECT pg_wal_lsn_diff(pg_last_wal_replay_lsn(), %s::pg_lsn) >= 0", [position])
                    if cursor.fetchone()[0]:
                        break
                time.sleep(0.0005)
            lags.append((time.perf_counter() - committed) * 1000)
    finally:
        routed.disable()
        connections["replica"].close()
        standby.remove()
    return {"reads": reads, "reads_on_replica": reads_on_replica, "stale_reads": stale,
            "lag_p50_ms": round(statistics.median(lags), 2), "lag_p95_ms": round(percentile(lags, 95), 2)}


# --------------------------------------------------------------------------- --citus

CITUS_DB = "bench_scale_citus"
TARGET_CITUS_RATIO = 1.5


def side_run(args: argparse.Namespace) -> dict[str, Any]:
    """One side of ``--citus`` (a process of its own: Django holds one database per process):
    ``args.projects`` projects of store A and three others, the sizes divided among them, loaded
    and indexed; every project searched (store A, the same questions); then ``args.writers``
    threads writing ``args.writes`` memories each through the write funnel, each into a store of
    its own project. The lexical channel is the tsvector fallback on both sides (bm25 does not run
    on Citus shards, docs/scaling.md)."""
    import threading

    from _setup import setup_django as setup_database
    from _setup import use_lexical_backend

    on_cluster = args.side == "citus"
    setup_database(CITUS_DB, migrate=not on_cluster, fresh=not on_cluster)
    from django.conf import settings
    from django.db import connection, connections
    from django.test import override_settings

    override_settings(MEMORY_ENGINE={**settings.MEMORY_ENGINE, "KNOWLEDGE_LEXICAL_BACKEND": "tsvector"}).enable()
    use_lexical_backend("tsvector")
    from memory_engine.models import MemoryStore, Project
    from memory_engine.providers.embeddings import get_embedding_provider
    from memory_engine.services.memories import memory_write

    material = base_material(args.data, get_embedding_provider(), args.base_sample)
    n = int(args.sizes.split(",")[-1]) // args.projects
    tenants = []
    for number in range(args.projects):
        tenant = Project.objects.create(name=f"bench-scale-{number}")
        tenants.append((tenant, MemoryStore.objects.create(project=tenant, name="A"),
                        [MemoryStore.objects.create(project=tenant, name=f"other-{i}") for i in range(OTHER_STORES)]))
    started = time.perf_counter()
    for number, (_tenant, store, others) in enumerate(tenants):
        print(f"[{args.side}] loading project {number + 1}/{len(tenants)}: {n:,} + {OTHER_STORES} × {n // 10:,}",
              file=sys.stderr, flush=True)
        load_memories(store, material, n, seed=number * 7919)
        for i, other in enumerate(others):
            load_memories(other, material, n // 10, seed=number * 7919 * 10 + i)
    loaded_s = time.perf_counter() - started
    print(f"[{args.side}] building the HNSW indexes", file=sys.stderr, flush=True)
    built = build_hnsw()
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    questions = material["questions"][:args.queries]
    per_project = []
    for number, (tenant, store, _others) in enumerate(tenants):
        print(f"[{args.side}] searching project {number + 1}/{len(tenants)}", file=sys.stderr, flush=True)
        per_project.append(search_latency(tenant, [store.pk], questions))
    texts = [f"{turn} (writer note {i})" for i, turn in enumerate(material["turns"])]
    done: list[int] = []
    failures: list[str] = []

    def writer(number: int) -> None:
        tenant, _store, _others = tenants[number % len(tenants)]
        store = MemoryStore.objects.create(project=tenant, name=f"writer-{number}")
        count = 0
        try:
            for text in texts[number * args.writes:(number + 1) * args.writes]:
                memory_write(store=store, content=text, principal="bench")
                count += 1
        except Exception as exc:  # noqa: BLE001  (reported with the figures)
            failures.append(f"{type(exc).__name__}: {exc}"[:300])
        finally:
            done.append(count)
            connections.close_all()

    print(f"[{args.side}] {args.writers} writers × {args.writes} writes", file=sys.stderr, flush=True)
    threads = [threading.Thread(target=writer, args=(number,)) for number in range(args.writers)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    writes_s = time.perf_counter() - started
    return {"side": args.side, "projects": args.projects, "memories": args.projects * (n + OTHER_STORES * (n // 10)),
            "load_s": round(loaded_s, 1), "hnsw_build_s": round(built, 1),
            "search_p50_ms": round(statistics.median(p["p50_ms"] for p in per_project), 2),
            "search_p95_ms_worst_project": max(p["p95_ms"] for p in per_project),
            "search_p95_ms_by_project": [p["p95_ms"] for p in per_project],
            "writers": args.writers, "writes": sum(done), "writes_per_s": round(sum(done) / writes_s, 1),
            "write_failures": failures}


def run_side(args: argparse.Namespace, side: str, env: dict[str, str]) -> dict[str, Any]:
    """``side_run`` in a child process with ``env``; its figures."""
    import subprocess

    command = [sys.executable, str(Path(__file__).resolve()), "--side", side, "--data", str(args.data),
               "--sizes", args.sizes, "--projects", str(args.projects), "--queries", str(args.queries),
               "--writers", str(args.writers), "--writes", str(args.writes),
               "--base-sample", str(args.base_sample)]
    done = subprocess.run(command, env={**os.environ, **env}, stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the {side} side failed (exit {done.returncode})")
    return json.loads(done.stdout.strip().splitlines()[-1])


#: Where ``--citus`` keeps the nodes' server logs (the cluster's directory goes when it stops).
CITUS_LOGS = RESULTS / "scale-citus-logs"


@contextlib.contextmanager
def _logs_kept(cluster: Any) -> Iterator[None]:
    """Copy every node's server log to :data:`CITUS_LOGS` once the run is over, whatever its end."""
    try:
        yield
    finally:
        CITUS_LOGS.mkdir(parents=True, exist_ok=True)
        for log in cluster.root.glob("*.log"):
            shutil.copy(log, CITUS_LOGS / log.name)
        print(f"the nodes' logs: {CITUS_LOGS}", file=sys.stderr, flush=True)


def citus_compare(args: argparse.Namespace) -> None:
    """``--citus``: the same data, questions and writers on one node (the embedded PostgreSQL)
    and on a coordinator with two workers (tests/citus/cluster.py, built from ../shared/citus),
    the schema placed by ``manage.py memory_engine_distribute``; one table, the ratios."""
    import subprocess

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.citus.cluster import citus_source, running_cluster
    from tests.citus.schema import database_url, migrate

    if citus_source() is None:
        raise SystemExit("--citus needs the Citus source (../shared/citus, or MEMORY_ENGINE_CITUS_SOURCE)")
    one = run_side(args, "one", {})
    with running_cluster() as cluster, _logs_kept(cluster):
        print(f"the cluster: coordinator on {cluster.coordinator.port}, {len(cluster.workers)} workers; "
              "migrating and distributing", file=sys.stderr, flush=True)
        migrate(cluster, CITUS_DB)
        url = database_url(cluster, CITUS_DB)
        env = {"DATABASE_URL": url, "DB_POOL_MAX_SIZE": "0", "MEMORY_ENGINE_DB_NAME": CITUS_DB}
        placed = subprocess.run([sys.executable, "manage.py", "memory_engine_distribute"], env={**os.environ, **env},
                                cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True, check=False)
        if placed.returncode != 0:
            raise SystemExit(placed.stderr[-2000:])
        cluster_side = run_side(args, "citus", env)
        workers = len(cluster.workers)
    search_ratio = round(cluster_side["search_p95_ms_worst_project"] / one["search_p95_ms_worst_project"], 2)
    write_ratio = round(cluster_side["writes_per_s"] / one["writes_per_s"], 2)
    print_table(["", "memories", "search p50 ms", "worst project's search p95 ms", "writers", "writes / s",
                 "load s", "HNSW build s"],
                [[name, f"{side['memories']:,}", side["search_p50_ms"], side["search_p95_ms_worst_project"],
                  side["writers"], side["writes_per_s"], side["load_s"], side["hnsw_build_s"]]
                 for name, side in (("one node", one), (f"Citus, {workers} workers", cluster_side))])
    met = search_ratio <= TARGET_CITUS_RATIO
    print(f"cluster / one node: search p95 {search_ratio}× (target ≤ {TARGET_CITUS_RATIO}×: "
          f"{'met' if met else 'NOT met'}), writes per second {write_ratio}×")
    for side in (one, cluster_side):
        if side["write_failures"]:
            print(f"{side['side']}: {len(side['write_failures'])} writer(s) stopped: {side['write_failures'][0]}")
    path = write_results("scale-citus", {"machine": machine(), "one_node": one, "citus": cluster_side,
                                         "workers": workers, "search_p95_ratio": search_ratio,
                                         "writes_per_s_ratio": write_ratio,
                                         "targets": {"search_p95_ratio": TARGET_CITUS_RATIO}, "met": {"search": met},
                                         "args": {k: str(v) for k, v in vars(args).items()}})
    print(f"wrote {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--sizes", default="10000,100000,300000", help="memories in store A, ascending")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--base-sample", type=int, default=0, help="only the first N turns as base material")
    parser.add_argument("--writes", type=int, default=300, help="texts written per way (batch measurement)")
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--replica", action="store_true", help="also measure reads on a streaming standby")
    parser.add_argument("--projects", type=int, default=1,
                        help="spread the memories over this many projects of the same shape (store A and three "
                             "others each, sizes divided among them); the first is measured")
    parser.add_argument("--skip-writes", action="store_true", help="no batch measurement")
    parser.add_argument("--citus", action="store_true",
                        help="one node against a Citus coordinator with two workers: the last size over --projects "
                             "(default 10), every project searched, --writers threads writing --writes each")
    parser.add_argument("--writers", type=int, default=4, help="--citus: writer threads (two per worker)")
    parser.add_argument("--side", choices=["one", "citus"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        print(json.dumps(side_run(args)))
        return
    if args.citus:
        if args.projects == 1:
            args.projects = 10
        citus_compare(args)
        return
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
    setup_django(DB_NAME)
    from memory_engine.models import MemoryStore, Project
    from memory_engine.providers.embeddings import get_embedding_provider

    provider = get_embedding_provider()
    material = base_material(args.data, provider, args.base_sample)
    tenants = []
    for number in range(args.projects):
        tenant = Project.objects.create(name=f"bench-scale-{number}" if number else "bench-scale")
        tenants.append((tenant, MemoryStore.objects.create(project=tenant, name="A"),
                        [MemoryStore.objects.create(project=tenant, name=f"other-{i}") for i in range(OTHER_STORES)]))
    project, store, others = tenants[0]
    questions = material["questions"][:args.queries]
    sizes = [int(size) // args.projects for size in args.sizes.split(",")]
    loaded, rows = 0, []
    for n in sizes:
        print(f"loading {n:,} memories into store A (+{n // 10:,} into each other store)"
              + (f" of each of {args.projects} projects" if args.projects > 1 else "") + "...", flush=True)
        drop_hnsw()
        for number, (_tenant, tenant_store, tenant_others) in enumerate(tenants):
            load_memories(tenant_store, material, n - loaded, seed=n + number * 7919)
            for i, other in enumerate(tenant_others):
                load_memories(other, material, n // 10 - loaded // 10, seed=(n + number * 7919) * 10 + i)
        loaded = n
        built = build_hnsw()
        one = search_latency(project, [store.pk], questions)
        whole = search_latency(project, [store.pk, *(o.pk for o in others)], questions)
        rows.append({"memories": n, "project_memories": n + OTHER_STORES * (n // 10),
                     "table_memories": args.projects * (n + OTHER_STORES * (n // 10)), "hnsw_build_s": round(built, 1),
                     "search_p50_ms": one["p50_ms"], "search_p95_ms": one["p95_ms"],
                     "project_p50_ms": whole["p50_ms"], "project_p95_ms": whole["p95_ms"],
                     "search_cold_p50_ms": one["cold_p50_ms"], "search_cold_p95_ms": one["cold_p95_ms"],
                     "project_cold_p50_ms": whole["cold_p50_ms"], "project_cold_p95_ms": whole["cold_p95_ms"]})
        print_table(["memories in A", "project", "one store p50 / p95 ms", "project p50 / p95 ms",
                     "guard cold: one store / project p50 ms", "HNSW build s"],
                    [[f"{r['memories']:,}", f"{r['project_memories']:,}",
                      f"{r['search_p50_ms']} / {r['search_p95_ms']}", f"{r['project_p50_ms']} / {r['project_p95_ms']}",
                      f"{r['search_cold_p50_ms']} / {r['project_cold_p50_ms']}", r["hnsw_build_s"]] for r in rows])
    texts = [f"{turn} (note {i})" for i, turn in enumerate(material["turns"][:args.writes])]
    if args.skip_writes:
        path = write_results("scale", {"machine": machine(), "sizes": rows,
                                       "args": {k: str(v) for k, v in vars(args).items()}})
        print(f"wrote {path}")
        return
    print(f"writing {len(texts)} memories one by one, then in batches of {args.batch_size}...", flush=True)
    batch = write_throughput(project, texts, args.batch_size)
    print_table(["writes", "single / s", "batch / s", "batch speedup"],
                [[batch["writes"], batch["single_per_s"], batch["batch_per_s"], batch["batch_speedup"]]])
    replica = None
    if args.replica:
        replica = replica_run(project, store, [f"Replica note {i}: {t}" for i, t in enumerate(texts[:100])])
        print_table(["reads", "on the replica", "stale reads", "lag p50 / p95 ms"],
                    [[replica["reads"], replica["reads_on_replica"], replica["stale_reads"],
                      f"{replica['lag_p50_ms']} / {replica['lag_p95_ms']}"]])
    last = rows[-1]
    targets = {"search_p95_ms_at_300k": TARGET_P95_MS, "batch_speedup": TARGET_BATCH_SPEEDUP, "stale_reads": 0}
    met = {"search_p95": last["memories"] >= 300_000 and last["search_p95_ms"] <= TARGET_P95_MS,
           "batch_speedup": batch["batch_speedup"] >= TARGET_BATCH_SPEEDUP,
           "stale_reads": replica is None or replica["stale_reads"] == 0}
    print(f"targets: search p95 at 300k {'met' if met['search_p95'] else 'NOT met'} "
          f"({last['search_p95_ms']} ms at {last['memories']:,}), batch speedup "
          f"{'met' if met['batch_speedup'] else 'NOT met'} ({batch['batch_speedup']}×)"
          + (f", stale reads {replica['stale_reads']}" if replica else ""))
    path = write_results("scale", {"machine": machine(), "sizes": rows, "batch": batch,
                                   "batch_speedup": batch["batch_speedup"], "replica": replica,
                                   "targets": targets, "met": met,
                                   "args": {k: str(v) for k, v in vars(args).items()}})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
