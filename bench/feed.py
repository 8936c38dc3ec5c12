"""The change feed under load: 8 writers through the write funnel for 60 s while one reader
follows ``feed_page`` (the selector behind GET /api/v1/feed) from the start.

Each writer holds its transaction open a random 0-20 ms after writing, so transactions commit
out of the order they began. The reader polls every 50 ms. Reported: entries per second seen
by the reader, lag from a writer's commit to the reader seeing its assertion (p50/p95/max),
and the checks users rely on: gaps (a committed assertion never delivered), repeats and
order violations, all expected to be 0.

    python bench/feed.py [--seconds 60] [--writers 8]

The hashing test embedder is used (the feed, not the embedder, is measured).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import percentile, print_table, setup_django, write_results  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--writers", type=int, default=8)
    args = parser.parse_args()
    os.environ.setdefault("MEMORY_ENGINE_EMBEDDING_PROVIDER", "tests.providers.HashingEmbeddingProvider")
    setup_django("bench_feed")

    from django.db import connection, transaction

    from memory_engine.models import MemoryStore, Project
    from memory_engine.policy import SYSTEM
    from memory_engine.selectors.feed import feed_page
    from memory_engine.services.memories import memory_write
    from memory_engine.services.stores import project_delete

    existing = Project.objects.filter(name="bench-feed").first()
    if existing is not None:
        project_delete(project=existing)
    project = Project.objects.create(name="bench-feed")
    stores = [MemoryStore.objects.create(project=project, name=f"feed-{n}") for n in range(8)]

    stop = threading.Event()
    lock = threading.Lock()
    committed: dict[str, float] = {}  # assertion id -> monotonic time its transaction committed
    seen: list[tuple[str, str, float]] = []  # (kind, id, monotonic time the reader saw it)
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        rng = random.Random(n)
        count = 0
        try:
            while not stop.is_set():
                count += 1
                with transaction.atomic():
                    result = memory_write(store=stores[rng.randrange(len(stores))],
                                          content=f"writer {n} fact {count} {rng.random()}",
                                          principal=f"key:writer{n}")
                    time.sleep(rng.random() * 0.02)
                done = time.monotonic()
                with lock:
                    committed[result.assertion.pk] = done
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    drained = threading.Event()

    def reader() -> None:
        cursor: str | None = None
        try:
            while True:
                page = feed_page(project=project, caller=SYSTEM, after=cursor, limit=1000)
                now = time.monotonic()
                seen.extend((e.kind, e.object_id, now) for e in page.entries)
                cursor = page.next_cursor
                if drained.is_set() and not page.entries:
                    return
                if not page.entries:
                    time.sleep(0.05)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(args.writers)]
    follower = threading.Thread(target=reader)
    started = time.monotonic()
    for thread in [*threads, follower]:
        thread.start()
    time.sleep(args.seconds)
    stop.set()
    for thread in threads:
        thread.join()
    write_seconds = time.monotonic() - started
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with lock:
            got = {i for kind, i, _ in seen if kind == "assertion"}
        if set(committed) <= got:
            break
        time.sleep(0.1)
    drained.set()
    follower.join()
    if errors:
        raise SystemExit(f"errors: {errors[:3]}")

    assertion_ids = [i for kind, i, _ in seen if kind == "assertion"]
    first_seen: dict[str, float] = {}
    for kind, i, at in seen:
        if kind == "assertion":
            first_seen.setdefault(i, at)
    gaps = len(set(committed) - set(assertion_ids))
    repeats = len(seen) - len({(kind, i) for kind, i, _ in seen})
    from memory_engine.models import FeedEntry

    positions = {(row.kind, row.object_id): (row.txid, row.seq) for row in FeedEntry.objects.filter(project=project)}
    order = [positions[(kind, i)] for kind, i, _ in seen]
    order_violations = sum(1 for a, b in zip(order, order[1:], strict=False) if b <= a)
    lags = [first_seen[i] - committed[i] for i in committed if i in first_seen]
    result: dict[str, Any] = {
        "writers": args.writers, "seconds": round(write_seconds, 1),
        "assertions_committed": len(committed), "entries_seen": len(seen),
        "entries_per_second": round(len(seen) / write_seconds, 1),
        "lag_p50_ms": round(percentile(lags, 50) * 1000, 1), "lag_p95_ms": round(percentile(lags, 95) * 1000, 1),
        "lag_max_ms": round(max(lags) * 1000, 1) if lags else None,
        "gaps": gaps, "repeats": repeats, "order_violations": order_violations,
    }
    print_table(list(result), [list(result.values())])
    write_results("feed", result)
    project_delete(project=project)


if __name__ == "__main__":
    main()
