"""A new store in an analyzed installation: write and search latency as the store grows.

    python bench/new_store.py --data ../shared/data              # 40 stores x 2,000 memories
    python bench/new_store.py --data ../shared/data --stores 10 --per-store 5000
    python bench/new_store.py --data ../shared/data --writes 5000 --block 1000 --no-autovacuum

The installation's other stores (synthetic rows, random vectors) are written in SQL and
analyzed; then one new store receives real sentences through the write funnel with no ANALYZE
in between, as a new tenant's import does: PostgreSQL's autoanalyze waits for 10% of a table to
change (the memory tables: 500 rows, migration 0016, but at most once a minute).
Until they are, PostgreSQL's statistics have never seen the new store, so its row estimates
are the planner's guess. Prints write latency per block of writes, then search latency on the store
(``--analyze-before-search``: after an ANALYZE of the memory tables), and whether the tables were
analyzed since the store was made.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import parse_args, print_table, setup_django, summary_ms, write_results  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stores", type=int, default=40, help="other stores in the installation")
    parser.add_argument("--per-store", type=int, default=2000, help="memories in each other store")
    parser.add_argument("--writes", type=int, default=1600, help="writes into the new store")
    parser.add_argument("--block", type=int, default=400, help="writes per reported block")
    parser.add_argument("--analyze-before-search", action="store_true",
                        help="ANALYZE the memory tables after the writes (statistics that know the new store)")
    parser.add_argument("--no-autovacuum", action="store_true",
                        help="keep autovacuum off the memory tables during the run: the statistics never see "
                             "the new store (the worst case)")
    parser.add_argument("--analyze-each-block", action="store_true",
                        help="ANALYZE the memory tables after each block of writes (statistics that know the store)")
    parser.add_argument("--dedup-exact-scan-max", type=int, metavar="N",
                        help="DEDUP_EXACT_SCAN_MAX for the run: the exact dedup scan's limit in a table of "
                             "100,000 content rows, scaled by the square root of the table (default: the setting's)")
    parser.add_argument("--searches", type=int, default=5,
                        help="searches per channel set")
    args = parse_args(parser)
    setup_django("bench_new_store")
    from django.db import connection

    from memory_engine.models import MemoryStore, Project
    from memory_engine.services.stores import project_delete

    for old in Project.objects.filter(name__startswith="bench-new-store"):
        project_delete(project=old)
    print("vacuuming the memory tables (earlier runs' rows) ...", file=sys.stderr)
    with connection.cursor() as cursor:  # dead HNSW entries of earlier runs would slow the scans
        cursor.execute("VACUUM memory_engine_memorycontent, memory_engine_memory")
    installation = Project.objects.create(name="bench-new-store-others")
    print(f"filling {args.stores} stores x {args.per_store:,} memories ...", file=sys.stderr)
    with connection.cursor() as cursor:
        for n in range(args.stores):
            other = MemoryStore.objects.create(project=installation, name=f"s{n}")
            cursor.execute(
                f"""INSERT INTO memory_engine_memorycontent
                        (id, store_id, content_hash, text, embedding, embedding_model, created_at)
                    SELECT 'mc_bns{n}_' || i, %s, md5('bns{n}' || i), 'Synthetic fact ' || i,
                           (SELECT array_agg(random() - 0.5)::vector FROM generate_series(1, 384) WHERE i > 0),
                           'all-MiniLM-L6-v2', now()
                    FROM generate_series(1, %s) i""",
                [other.pk, args.per_store],
            )
            cursor.execute(
                """INSERT INTO memory_engine_memory (id, store_id, content_id, tags, metadata, source_type,
                        created_at, kind, title, summary, confidence, evidence_count, retention_class)
                    SELECT 'mem_' || substr(id, 4), store_id, id, '{}', '{}', 'manual', now(),
                           'fact', '', '', 0.7, 1, 'durable'
                    FROM memory_engine_memorycontent WHERE store_id = %s""",
                [other.pk],
            )
        cursor.execute("ANALYZE memory_engine_memorycontent; ANALYZE memory_engine_memory")
    tables = ("memory_engine_memory", "memory_engine_memorycontent")
    if args.no_autovacuum:
        with connection.cursor() as cursor:
            for table in tables:
                cursor.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
    try:
        measure(args, tables)
    finally:
        if args.no_autovacuum:
            with connection.cursor() as cursor:
                for table in tables:
                    cursor.execute(f"ALTER TABLE {table} RESET (autovacuum_enabled)")
        project_delete(project=installation)


def measure(args: argparse.Namespace, tables: tuple[str, ...]) -> None:
    """:func:`measure_writes_and_searches` with the run's DEDUP_EXACT_SCAN_MAX."""
    if args.dedup_exact_scan_max is not None:
        from django.conf import settings
        from django.test.utils import override_settings

        with override_settings(MEMORY_ENGINE={**settings.MEMORY_ENGINE,
                                              "DEDUP_EXACT_SCAN_MAX": args.dedup_exact_scan_max}):
            return measure_writes_and_searches(args, tables)
    return measure_writes_and_searches(args, tables)


def measure_writes_and_searches(args: argparse.Namespace, tables: tuple[str, ...]) -> None:
    """The writes into a new store, then the searches of it; prints and saves the table."""
    from django.db import connection
    from write import sentences

    from memory_engine.models import MemoryStore, Project
    from memory_engine.selectors.search import SearchRequest, knowledge_search
    from memory_engine.services.memories import memory_write
    from memory_engine.services.stores import project_delete

    project = Project.objects.create(name="bench-new-store")
    store = MemoryStore.objects.create(project=project, name="new")
    texts = sentences(args.data, args.writes)
    rows, blocks, times = [], [], []
    for i, text in enumerate(texts, 1):
        started = time.perf_counter()
        memory_write(store=store, content=text, principal="bench")
        times.append(time.perf_counter() - started)
        if i % args.block == 0:
            s = summary_ms(times[-args.block:])
            blocks.append({"writes": i, **s})
            rows.append([f"write (incl. embedder), writes {i - args.block + 1}-{i}", s["p50_ms"], s["p95_ms"]])
            print(f"{i} writes", file=sys.stderr)
            if args.analyze_each_block:
                with connection.cursor() as cursor:
                    cursor.execute("ANALYZE memory_engine_memorycontent; ANALYZE memory_engine_memory")
    if args.analyze_before_search:
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE memory_engine_memorycontent; ANALYZE memory_engine_memory")
    with connection.cursor() as cursor:  # has autovacuum analyzed both tables since the store was made?
        cursor.execute("SELECT count(*) = 2 FROM pg_stat_user_tables WHERE relname = ANY(%s) "
                       "AND greatest(last_analyze, last_autoanalyze) > %s",
                       [list(tables), store.created_at])
        analyzed = cursor.fetchone()[0]
    searches = {}
    for name, channels in (("vector", ("vector",)), ("hybrid", ("vector", "lexical"))):
        took = []
        for text in texts[: args.searches]:
            started = time.perf_counter()
            knowledge_search(SearchRequest(project=project, query=text[:60], memory_store_ids=[store.pk],
                                           channels=channels))
            took.append(time.perf_counter() - started)
        searches[name] = summary_ms(took)
        rows.append([f"search, {name}", searches[name]["p50_ms"], searches[name]["p95_ms"]])
    project_delete(project=project)
    print(f"\na new store among {args.stores} analyzed stores of {args.per_store:,} memories; "
          f"tables analyzed since it was made, before the searches: {'yes' if analyzed else 'no'}")
    print_table(["measure", "p50 ms", "p95 ms"], rows)
    write_results("new_store", {"stores": args.stores, "per_store": args.per_store, "writes": blocks,
                                "analyzed_before_search": args.analyze_before_search,
                                "autovacuum": not args.no_autovacuum, "analyze_each_block": args.analyze_each_block,
                                "dedup_exact_scan_max": args.dedup_exact_scan_max,
                                "analyzed_since_created": analyzed, "searches": searches})


if __name__ == "__main__":
    main()
