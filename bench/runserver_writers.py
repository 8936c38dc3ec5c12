"""Concurrent writers against the example project's own ``manage.py runserver``, once per way
of keeping database connections: a kept connection per thread, a connection per request, and
the psycopg pool (the example project's default).

Each of ``--writers`` threads writes ``--writes`` new facts, each on a new HTTP connection, and
leaves its last 16 connections open as clients that close late do: the dev server keeps a
thread per open connection, so a connection kept per thread outnumbers PostgreSQL's
``max_connections`` (issue 57: 503 DATABASE_UNAVAILABLE). Prints the statuses, writes per
second and the latency of each variant.

    python bench/runserver_writers.py                        # 8 writers x 150 writes, the test embedder
    python bench/runserver_writers.py --embedder onnx --writes 50

Runs on its own database (bench_runserver), with the server's DEBUG as the example project
sets it (on), its rate limit lifted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections import Counter, deque
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402
from _setup import print_table, setup_django, start_server  # noqa: E402

from bench.loadgen import free_port  # noqa: E402
from example_project.run import stop_children  # noqa: E402

DB_NAME = "bench_runserver"
EMBEDDERS = {"hashing": "tests.providers.HashingEmbeddingProvider", "onnx": "onnx"}
IDLE_CONNECTIONS = 16
VARIANTS = {
    "kept connection per thread (CONN_MAX_AGE 60)": {"DB_POOL_MAX_SIZE": "0", "CONN_MAX_AGE": "60"},
    "connection per request (CONN_MAX_AGE 0)": {"DB_POOL_MAX_SIZE": "0", "CONN_MAX_AGE": "0"},
    "pool of 10 (DB_POOL_MAX_SIZE 10, the default)": {"DB_POOL_MAX_SIZE": "10"},
}


def write_concurrently(url: str, key: str, store_id: str, *, writers: int, writes: int,
                       tag: str) -> tuple[Counter, list[float], float]:
    statuses: Counter = Counter()
    seconds: list[float] = []
    lock = threading.Lock()

    def writer(n: int) -> None:
        clients: deque[httpx.Client] = deque()
        try:
            for i in range(writes):
                client = httpx.Client(base_url=url, timeout=60, headers={"Authorization": f"Bearer {key}"})
                clients.append(client)
                body = {"memory_store_id": store_id, "content": f"Run {tag}: writer {n} recorded reading {i} "
                                                                f"of sensor w{n}r{i}."}
                started = time.monotonic()
                try:
                    status = client.post("/api/v1/memories", json=body).status_code
                except httpx.HTTPError:
                    status = 0
                with lock:
                    statuses[status] += 1
                    seconds.append(time.monotonic() - started)
                if len(clients) > IDLE_CONNECTIONS:
                    clients.popleft().close()
        finally:
            for client in clients:
                client.close()

    started = time.monotonic()
    threads = [threading.Thread(target=writer, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return statuses, seconds, time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--writes", type=int, default=150, help="writes per writer")
    parser.add_argument("--embedder", choices=sorted(EMBEDDERS), default="hashing")
    args = parser.parse_args()

    setup_django(DB_NAME)
    from memory_engine.models import MemoryStore, Project
    from memory_engine.services.keys import api_key_create

    tag = str(int(time.time()))
    project = Project.objects.create(name=f"runserver-{tag}")
    store = MemoryStore.objects.create(project=project, name=f"runserver-{tag}")
    _, key = api_key_create(project=project, name="bench/runserver_writers.py")
    rows = []
    for name, env in VARIANTS.items():
        port = free_port()
        server = start_server(DB_NAME, port, DJANGO_DEBUG="true",
                              MEMORY_ENGINE_EMBEDDING_PROVIDER=EMBEDDERS[args.embedder], **env)
        try:
            statuses, seconds, wall = write_concurrently(f"http://127.0.0.1:{port}", key, store.pk,
                                                         writers=args.writers, writes=args.writes,
                                                         tag=f"{tag} {name}")
        finally:
            stop_children([server])
        rows.append([name, dict(sorted(statuses.items())), f"{len(seconds) / wall:.1f}",
                     f"{statistics.median(seconds) * 1000:.1f}",
                     f"{statistics.quantiles(seconds, n=20)[18] * 1000:.1f}"])
    print_table(["connections", "statuses", "writes/s", "p50 ms", "p95 ms"], rows)


if __name__ == "__main__":
    main()
