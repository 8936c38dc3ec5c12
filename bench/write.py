"""Write funnel speed with a large store (default: 100,000 memories in one store).

Measures, in one run on one machine:
  * the funnel's own time per write (everything but the embedder call) — p50/p95;
  * hash-hit writes per second (restatements: no embedder call, a skip);
  * end-to-end API write latency over real HTTP with the default embedder, and the
    ratio funnel time / total.

The store is filled with synthetic rows (random unit vectors, generated in SQL) so the
setup takes seconds instead of an hour of embedding; the measured writes are real
sentences embedded by the default model.

    python bench/write.py [--data DIR] [--memories 100000] [--writes 300]
"""

from __future__ import annotations

import argparse
import csv
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _setup  # noqa: E402
from _setup import parse_args, print_table, setup_django, summary_ms, write_results  # noqa: E402


def sentences(data: Path, count: int) -> list[str]:
    seen, out = set(), []
    with open(data / "paraphrase" / "sts-train.csv", encoding="utf-8") as handle:
        for row in csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE):
            for text in row[5:7]:
                if text not in seen and len(text) > 20:
                    seen.add(text)
                    out.append(text)
            if len(out) >= count:
                return out[:count]
    return out


def fill_store(store_id: str, count: int) -> float:
    """Insert ``count`` synthetic memories (random vectors; cosine needs no normalisation) and rebuild the HNSW index."""
    from django.db import connection

    from memory_engine.conf import embedding_dimensions

    dims = embedding_dimensions()
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("DROP INDEX IF EXISTS me_content_embedding_hnsw")
        cursor.execute(
            f"""
            INSERT INTO memory_engine_memorycontent (id, store_id, content_hash, text, embedding, embedding_model, created_at)
            SELECT 'mc_bench' || lpad(i::text, 9, '0'), %s, md5('bench' || i), 
                   'Synthetic fact number ' || i || ' about ' || (ARRAY['billing','infra','people','travel'])[1 + i %% 4],
                   (SELECT array_agg(random() - 0.5)::vector FROM generate_series(1, {dims}) WHERE i > 0),
                   'all-MiniLM-L6-v2', now()
            FROM generate_series(1, %s) AS i
            """,
            [store_id, count],
        )
        cursor.execute(
            """
            INSERT INTO memory_engine_memory (id, store_id, content_id, tags, metadata, source_type, created_at)
            SELECT 'mem_bench' || substr(id, 9), store_id, id, '{}', '{}', 'manual', now()
            FROM memory_engine_memorycontent WHERE store_id = %s AND id LIKE 'mc_bench%%'
            """,
            [store_id],
        )
        cursor.execute("SET maintenance_work_mem = '1GB'")
        cursor.execute(
            "CREATE INDEX me_content_embedding_hnsw ON memory_engine_memorycontent "
            "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
        )
        cursor.execute("ANALYZE memory_engine_memorycontent; ANALYZE memory_engine_memory")
    return time.perf_counter() - started


def serve_wsgi() -> tuple[str, Any]:
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server
    from socketserver import ThreadingMixIn

    from django.core.wsgi import get_wsgi_application

    class Server(ThreadingMixIn, WSGIServer):
        daemon_threads = True

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    server = make_server("127.0.0.1", 0, get_wsgi_application(), server_class=Server, handler_class=Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_port}", server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--writes", type=int, default=300)
    args = parse_args(parser)
    setup_django("bench_write")
    from django.conf import settings
    from django.test import override_settings

    from memory_engine.models import Project
    from memory_engine.services.keys import api_key_create
    from memory_engine.services.memory_write import memory_write
    from memory_engine.services.stores import project_delete

    config = {**settings.MEMORY_ENGINE,
              "EMBEDDING": {**settings.MEMORY_ENGINE["EMBEDDING"], "PROVIDER": _setup.timing_provider_path()}}
    with override_settings(MEMORY_ENGINE=config):
        for old in Project.objects.filter(name="bench-write"):
            project_delete(project=old)
        project = Project.objects.create(name="bench-write")
        from memory_engine.models import MemoryStore

        store = MemoryStore.objects.create(project=project, name="big")
        print(f"filling one store with {args.memories:,} synthetic memories ...", file=sys.stderr)
        fill_seconds = fill_store(store.pk, args.memories)
        texts = sentences(args.data, args.writes * 2)
        new_texts, api_texts = texts[: args.writes], texts[args.writes:]
        memory_write(store=store, content="warm-up sentence for the model", principal="bench")

        # 1. funnel time per new write = total - embedder time
        funnel, totals, embeds = [], [], []
        actions: dict[str, int] = {}
        for text in new_texts:
            _setup.EMBED_SECONDS.clear()
            started = time.perf_counter()
            result = memory_write(store=store, content=text, principal="bench")
            total = time.perf_counter() - started
            embed = sum(_setup.EMBED_SECONDS)
            totals.append(total)
            embeds.append(embed)
            funnel.append(total - embed)
            actions[result.action] = actions.get(result.action, 0) + 1

        # 2. hash hits: the same texts again -> skips, no embedder call
        _setup.EMBED_SECONDS.clear()
        started = time.perf_counter()
        hit_times = []
        for text in new_texts:
            t0 = time.perf_counter()
            memory_write(store=store, content=text, principal="bench")
            hit_times.append(time.perf_counter() - t0)
        hash_hit_rate = len(new_texts) / (time.perf_counter() - started)
        assert not _setup.EMBED_SECONDS, "hash hits must not call the embedder"

        # 3. end-to-end over HTTP (WSGI server on 127.0.0.1, real embedder)
        import httpx

        url, server = serve_wsgi()
        raw_key = api_key_create(project=project)[1]
        api_times = []
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {raw_key}"}, timeout=30) as client:
            for text in api_texts:
                t0 = time.perf_counter()
                response = client.post("/api/v1/memories", json={"memory_store_id": store.pk, "content": text})
                api_times.append(time.perf_counter() - t0)
                assert response.status_code in (200, 201), response.text
        server.shutdown()
        project_delete(project=project)

    f, t, e = summary_ms(funnel), summary_ms(totals), summary_ms(embeds)
    api = summary_ms(api_times)
    hits = summary_ms(hit_times)
    ratio = sum(funnel) / sum(totals)
    print(f"\nwrite funnel, one store of {args.memories:,} memories ({args.writes} new writes, "
          f"setup {fill_seconds:.0f} s); actions {actions}")
    print_table(
        ["measure", "p50 ms", "p95 ms", "p99 ms", "mean ms"],
        [
            ["funnel own time (new text)", f["p50_ms"], f["p95_ms"], f["p99_ms"], f["mean_ms"]],
            ["embedder call", e["p50_ms"], e["p95_ms"], e["p99_ms"], e["mean_ms"]],
            ["service total (new text)", t["p50_ms"], t["p95_ms"], t["p99_ms"], t["mean_ms"]],
            ["hash-hit write (skip)", hits["p50_ms"], hits["p95_ms"], hits["p99_ms"], hits["mean_ms"]],
            ["API write over HTTP", api["p50_ms"], api["p95_ms"], api["p99_ms"], api["mean_ms"]],
        ],
    )
    print(f"\nhash-hit writes per second (one client): {hash_hit_rate:.0f}")
    print(f"funnel time / service total: {ratio:.1%}  (the rest is the embedder)")
    write_results("write", {
        "memories_in_store": args.memories, "writes": args.writes, "actions": actions,
        "funnel_own_time": f, "embedder": e, "service_total": t, "hash_hit": hits,
        "hash_hit_writes_per_second": round(hash_hit_rate, 1), "api_write": api,
        "funnel_over_total": round(ratio, 4), "setup_seconds": round(fill_seconds, 1),
    })


if __name__ == "__main__":
    main()
