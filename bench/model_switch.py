"""Embedding-model switch under search load: 20k chunks + 20k memories, 384 -> 256 dimensions.

A fast deterministic hashing embedder stands in for both models (so the run takes minutes,
not the hours two real models would; the cost measured is the engine's: storage, indexes,
locks), registered as ``hash-384`` (active) and ``hash-256`` (EMBEDDING_MODELS["next"]).
Search threads run throughout — memory-scoped and document-scoped queries in turn — while
the new model is registered, built and switched to. Reported: searches, failures, empty
answers and p50/p95 latency before, during the build, during the switch and after it, and
how long the switch held its locks.

Runs on its own database (``bench_model_switch``, dropped and recreated each run).

    python bench/model_switch.py [--chunks 20000] [--memories 20000] [--threads 2]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's memory_engine
from _setup import print_table, setup_django, summary_ms, write_results  # noqa: E402

DB_NAME = "bench_model_switch"
WORDS = ("deploy window worker restart queue backup invoice policy cache shard replica token "
         "schema ledger retry budget latency region tenant export import alert rollout canary").split()

try:  # the provider base class, once Django is set up (this module is imported by dotted path too)
    from memory_engine.providers.embeddings.base import EmbeddingProvider
except Exception:  # noqa: BLE001  (before django.setup(): the class is defined after it)
    EmbeddingProvider = object  # type: ignore[assignment,misc]


class HashingProvider(EmbeddingProvider):  # type: ignore[misc,valid-type]
    """Bag-of-words feature hashing, L2-normalised: deterministic, offline, fast."""

    default_model = "hash"

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        out = []
        for text in texts:
            vector = [0.0] * self.dimensions
            for word in re.findall(r"\w+", text.lower()):
                vector[int.from_bytes(hashlib.md5(word.encode()).digest()[:4], "big") % self.dimensions] += 1.0
            norm = sum(x * x for x in vector) ** 0.5 or 1.0
            out.append([x / norm for x in vector])
        return out


def sentence(i: int) -> str:
    pick = [WORDS[(i * 7 + k * 13) % len(WORDS)] for k in range(8)]
    return f"Note {i}: the {pick[0]} {pick[1]} of {pick[2]} needs a {pick[3]} {pick[4]} before the {pick[5]} {pick[6]}."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=20000)
    parser.add_argument("--memories", type=int, default=20000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=256)
    args = parser.parse_args()

    os.environ.update(MEMORY_ENGINE_EMBEDDING_PROVIDER="model_switch.HashingProvider",
                      MEMORY_ENGINE_EMBEDDING_MODEL="hash-384", MEMORY_ENGINE_EMBEDDING_DIMENSIONS="384")
    setup_django(DB_NAME, migrate=False)
    import psycopg
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection, connections
    from django.test import override_settings

    admin = settings.DATABASES["default"]
    conninfo = {"dbname": "postgres", "user": admin["USER"], "host": admin["HOST"], "port": admin["PORT"],
                "password": admin["PASSWORD"]}
    with psycopg.connect(**{k: v for k, v in conninfo.items() if v}, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{DB_NAME}"')
    call_command("migrate", verbosity=0, interactive=False)

    next_model = {"PROVIDER": "model_switch.HashingProvider", "MODEL": "hash-256", "DIMENSIONS": 256}
    override = override_settings(MEMORY_ENGINE={**settings.MEMORY_ENGINE, "EMBEDDING_MODELS": {"next": next_model}})
    override.enable()

    from memory_engine.models import Chunk, Document, Memory, MemoryContent, MemoryStore, Project
    from memory_engine.providers.embeddings import require_embedding_provider
    from memory_engine.selectors.search import SearchRequest, knowledge_search
    from memory_engine.services.embedding_models import (
        embedding_model_build,
        embedding_model_register,
        embedding_model_switch,
    )

    provider = require_embedding_provider()
    project = Project.objects.create(name="bench-model-switch")
    store = MemoryStore.objects.create(project=project, name="notes")
    started = time.perf_counter()
    step = 2000
    for start in range(0, args.memories, step):
        texts = [sentence(i) for i in range(start, min(start + step, args.memories))]
        vectors = provider.embed_documents(texts)
        contents = MemoryContent.objects.bulk_create([
            MemoryContent(store=store, content_hash=hashlib.sha256(t.encode()).hexdigest(), text=t, embedding=v,
                          embedding_model=provider.model_name) for t, v in zip(texts, vectors, strict=True)])
        Memory.objects.bulk_create([Memory(store=store, content=c) for c in contents])
    document = Document.objects.create(project=project, path="/bench/runbook.txt", title="runbook",
                                       content_type="text/plain", chunk_strategy="whole", status="ready",
                                       total_chunks=args.chunks, indexed_chunks=args.chunks)
    for start in range(0, args.chunks, step):
        texts = [sentence(10**6 + i) for i in range(start, min(start + step, args.chunks))]
        vectors = provider.embed_documents(texts)
        Chunk.objects.bulk_create([
            Chunk(document=document, chunk_index=start + i, text=t, embedding=v, embedding_model=provider.model_name)
            for i, (t, v) in enumerate(zip(texts, vectors, strict=True))])
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE memory_engine_memorycontent")
        cursor.execute("VACUUM ANALYZE memory_engine_chunk")
        cursor.execute("VACUUM ANALYZE memory_engine_memory")
    print(f"loaded {args.memories} memories + {args.chunks} chunks in {time.perf_counter() - started:.0f} s")

    phase = ["before"]
    samples: list[tuple[str, float, str]] = []
    stop = threading.Event()
    lock = threading.Lock()

    def searching(offset: int) -> None:
        n = offset
        try:
            while not stop.is_set():
                n += 1
                query = " ".join(WORDS[(n * k) % len(WORDS)] for k in (3, 5, 11))
                scope: dict[str, Any] = ({"memory_store_ids": [store.pk]} if n % 2 else {"document_ids": [document.pk]})
                current = phase[0]
                began = time.perf_counter()
                try:
                    hits = knowledge_search(SearchRequest(project=project, query=query, limit=10, **scope)).results
                    outcome = "ok" if hits else "empty"
                except Exception as exc:  # noqa: BLE001  (counted: the figure is how many)
                    outcome = f"failed: {type(exc).__name__}: {exc}"[:200]
                with lock:
                    samples.append((current, time.perf_counter() - began, outcome))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=searching, args=(i * 1000,), daemon=True) for i in range(args.threads)]
    for thread in threads:
        thread.start()
    try:
        time.sleep(10)
        phase[0] = "build"
        build_started = time.perf_counter()
        model = embedding_model_register(name="next")
        embedding_model_build(model=model, batch_size=args.batch_size)
        build_s = time.perf_counter() - build_started
        phase[0] = "switch"
        switch_started = time.perf_counter()
        report = embedding_model_switch(model=model, batch_size=args.batch_size)
        switch_s = time.perf_counter() - switch_started
        phase[0] = "after"
        time.sleep(10)
    finally:
        stop.set()
        for thread in threads:
            thread.join()

    rows, table = [], {}
    for name in ("before", "build", "switch", "after"):
        mine = [s for s in samples if s[0] == name]
        stats = summary_ms([s[1] for s in mine])
        failures = [s[2] for s in mine if s[2].startswith("failed")]
        table[name] = {"searches": len(mine), "failures": len(failures), "empty": sum(s[2] == "empty" for s in mine),
                       "p50_ms": stats["p50_ms"], "p95_ms": stats["p95_ms"], "first_failure": failures[:1]}
        rows.append([name, len(mine), len(failures), table[name]["empty"], stats["p50_ms"], stats["p95_ms"]])
    print_table(["phase", "searches", "failures", "empty", "p50 ms", "p95 ms"], rows)
    print(f"build {build_s:.1f} s, switch {switch_s:.2f} s (catch-up {report.caught_up} rows), "
          f"locks held {report.lock_ms:.0f} ms")
    write_results("model_switch", {
        "memories": args.memories, "chunks": args.chunks, "threads": args.threads, "embedder": "hashing (offline)",
        "phases": table, "build_s": round(build_s, 2), "switch_s": round(switch_s, 3),
        "switch_lock_ms": round(report.lock_ms, 1), "caught_up": report.caught_up,
    })
    override.disable()


if __name__ == "__main__":
    main()
