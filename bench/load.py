"""Load: the app under gunicorn with a qcluster worker, N concurrent clients for T seconds.

Each client loops over a mix of writes of new facts (35 %), writes of repeated facts (25 %),
hybrid searches (30 %) and small markdown document uploads (10 %), over HTTP on 127.0.0.1.
Afterwards: every 5xx is counted, every acknowledged write must have its assertion, each
store's valid memories must equal what the funnel's decisions imply, and every uploaded
document must finish ingesting. Prints p50/p95/p99 per operation and throughput.

    python bench/load.py                      # 32 clients x 60 s, the real default embedder
    python bench/load.py --clients 8 --seconds 15 --web-workers 2 --threads 8

Runs on its own database (bench_load); the short version of this run is
tests/hardening/test_load.py.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _setup import ROOT, print_table, setup_django, write_results  # noqa: E402

from bench.loadgen import LiveApp, check_writes, latency_table, run_load  # noqa: E402

DB_NAME = "bench_load"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--web-workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--q-workers", type=int, default=2)
    parser.add_argument("--stores", type=int, default=4)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    args = parser.parse_args()

    setup_django(DB_NAME)
    from django.conf import settings

    from memory_engine.models import Document, MemoryStore, Project
    from memory_engine.services.keys import api_key_create

    project = Project.objects.create(name=f"load-{args.seed}")
    stores = [MemoryStore.objects.create(project=project, name=f"load-{args.seed}-{i}") for i in range(args.stores)]
    store_ids = [s.pk for s in stores]
    _, key = api_key_create(project=project, name="bench/load.py")
    db = settings.DATABASES["default"]
    conninfo = {"dbname": db["NAME"], "user": db["USER"], "host": db["HOST"], "port": db["PORT"],
                "password": db["PASSWORD"]}

    env = {"MEMORY_ENGINE_DB_NAME": DB_NAME, "MEMORY_ENGINE_LOG_LEVEL": "WARNING"}
    log = ROOT / "bench" / "results" / "load.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"{args.clients} clients x {args.seconds:g} s against gunicorn ({args.web_workers} workers x "
          f"{args.threads} threads) + qcluster ({args.q_workers} workers); log: {log.relative_to(ROOT)}")
    with LiveApp(env, web_workers=args.web_workers, threads=args.threads, qcluster=True,
                 q_workers=args.q_workers, log=log) as app:
        # Warm-up (not measured): every gunicorn worker loads the embedding model on first use.
        run_load(app.url, key, store_ids, clients=2 * args.web_workers, seconds=10, mix={"search": 1})
        result = run_load(app.url, key, store_ids, clients=args.clients, seconds=args.seconds, seed=args.seed)
        documents = result.document_ids()
        drain_started = time.perf_counter()
        deadline = time.monotonic() + 600
        while Document.objects.filter(pk__in=documents, status__in=["pending", "processing"]).exists():
            if time.monotonic() > deadline:
                break
            time.sleep(0.5)
        drain_seconds = time.perf_counter() - drain_started

    table = latency_table(result)
    print()
    print_table(["operation", "n", "p50 ms", "p95 ms", "p99 ms", "per s"],
                [[r["op"], r["n"], r["p50_ms"], r["p95_ms"], r["p99_ms"], r["per_s"]] for r in table])
    total = len(result.calls)
    errors = result.server_errors()
    problems = check_writes(conninfo, result, store_ids)
    statuses = Document.objects.filter(pk__in=documents).values_list("status", flat=True)
    document_states = {s: list(statuses).count(s) for s in set(statuses)}
    actions: dict[str, int] = {}
    for counts in result.actions_by_store().values():
        for action, n in counts.items():
            actions[action] = actions.get(action, 0) + n
    print(f"\n{total} requests in {result.seconds:.1f} s = {total / result.seconds:.1f} req/s; "
          f"statuses {dict(result.statuses())}; 5xx/no answer: {len(errors)}")
    print(f"funnel decisions: {actions}; documents: {document_states} (queue drained {drain_seconds:.1f} s "
          "after the clients stopped)")
    print("ledger check:", problems if problems else "OK")
    write_results("load", {
        "clients": args.clients, "seconds": args.seconds, "web_workers": args.web_workers, "threads": args.threads,
        "q_workers": args.q_workers, "embedder": settings.MEMORY_ENGINE["EMBEDDING"]["PROVIDER"],
        "requests": total, "throughput_per_s": round(total / result.seconds, 1),
        "statuses": {str(k): v for k, v in result.statuses().items()}, "server_errors": len(errors),
        "operations": table, "funnel_decisions": actions, "documents": document_states,
        "queue_drain_seconds": round(drain_seconds, 1), "ledger_problems": problems,
    })
    if errors or problems:
        sys.exit(1)


if __name__ == "__main__":
    main()
