"""Hybrid search latency at 10k -> 100k -> 300k rows (1/3 memories in 10 institutional stores, one
agent's own store and 10 users' stores; 2/3 chunks).

    .venv/bin/python bench/search.py                 # full run (~15 min on 2 cores)
    .venv/bin/python bench/search.py --sizes 10000 --queries 50
    .venv/bin/python bench/search.py --sizes 3000 --queries 30 --no-api --extra-backends "" --base-sample 300
    .venv/bin/python bench/search.py --data /path/to/shared/data   # default: see bench/_setup.py
    .venv/bin/python bench/search.py --sizes 300000 --stages-only --queries 100 --base-sample 300 \
        --extra-backends ""                          # each ranking stage's latency at 300k rows

Data is synthetic but shaped like the real thing: every row takes the text of a real
LoCoMo turn (memories, written as conversation turns) or SciFact abstract cut to 1,000 characters (chunks) and a vector
near that text's real embedding (cosine ~0.9), loaded with COPY into a database of its
own (``bench_search``), HNSW indexes rebuilt after each load. Queries are real LoCoMo
questions and SciFact claims embedded with the real model.

Measured:
- server-side: the database part of ``knowledge_search`` (timings["search_ms"]: scope
  check, SQL, fusion), query embedding excluded, at concurrency 1 and 8 (threads, one
  connection each);
- end to end: POST /api/v1/knowledge/search on `manage.py runserver` (threaded), query
  embedding included, at concurrency 1 and 8, with the embedding's share from the
  Server-Timing header;
for four query shapes: one store (1/21 of the memories), everything (every store + all
documents), documents only, and ``tiers``: an agent's recall for one user, fanned out over four
tiers in one statement (that user's store, a third of it written for the agent and so
user_for_agent; the agent's own store; one institutional store), next to ``one_store`` in a
table at the end. Results go to bench/results/search-<time>.json.

``--stages`` (``--stages-only``: without the concurrency runs) times each ranking stage at the
last size, concurrency 1, on the ``everything`` and ``one_store`` shapes: the search with every
stage off, then with every stage on (neighbouring turns, dedupe, MMR, authority 0.3, recency
boosts, corroboration over evidence links loaded for a third of the memories, rerank of the top
50 on a local fake TEI server), each stage's own time read from knowledge_search's timings.

``--base-sample N`` takes only the first N LoCoMo turns and SciFact abstracts as base material
(embedding them here when bench/eval_retrieval.py has not cached the corpus): a quick check.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
DB_NAME = "bench_search"
STORES = 10
SUBJECTS = 10
PORT = 8765

sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
import _setup  # noqa: E402
from _setup import parse_args, print_table, use_lexical_backend  # noqa: E402

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
os.environ.setdefault("MEMORY_ENGINE_LOG_LEVEL", "WARNING")


def setup_django(db_name: str) -> None:
    """A fresh database every run."""
    from _setup import setup_django as setup

    setup(db_name, fresh=True)


# --------------------------------------------------------------------------- data


def base_material(data: Path, provider: Any, sample: int = 0) -> dict[str, Any]:
    """Real texts with their real vectors: LoCoMo turns and SciFact abstracts (the first ``sample``
    of each when given)."""
    import numpy as np

    cache = RESULTS / "cache"
    corpus = [json.loads(line) for line in (data / "scifact" / "corpus.jsonl").read_text().splitlines()]
    npy = cache / f"scifact-corpus-{provider.model_name}-{provider.dimensions}.npy"
    doc_texts = [f"{d['title']}\n\n{d['text']}"[:1000] for d in corpus]
    if npy.exists():
        doc_vectors = np.load(npy)[:sample or None]
        doc_texts = doc_texts[:sample or None]
    elif sample:
        doc_texts = doc_texts[:sample]
        doc_vectors = np.asarray([v for i in range(0, sample, 64)
                                  for v in provider.embed_documents(doc_texts[i:i + 64])], dtype=np.float32)
    else:
        raise SystemExit(f"run bench/eval_retrieval.py first (it caches {npy.name}), or pass --base-sample")
    conversations = json.loads((data / "locomo" / "locomo-dev.json").read_text())
    turns = [f"{t['speaker']}: {t['text']}" for c in conversations for k, v in c["conversation"].items()
             if k.startswith("session_") and isinstance(v, list) for t in v][:sample or None]
    turn_cache = cache / f"texts-{provider.model_name}-{provider.dimensions}.json"
    cached = json.loads(turn_cache.read_text()) if turn_cache.exists() else {}
    keys = [hashlib.sha1(t.encode()).hexdigest() for t in turns]
    missing = [t for t, k in zip(turns, keys, strict=True) if k not in cached]
    if missing:
        for i in range(0, len(missing), 64):
            for t, v in zip(missing[i:i + 64], provider.embed_documents(missing[i:i + 64]), strict=True):
                cached[hashlib.sha1(t.encode()).hexdigest()] = v
    turn_vectors = np.asarray([cached[k] for k in keys], dtype=np.float32)
    questions = [qa["question"] for c in conversations for qa in c["qa"]]
    claims = [json.loads(line)["text"] for line in (data / "scifact" / "queries.jsonl").read_text().splitlines()]
    return {"doc_texts": doc_texts, "doc_vectors": doc_vectors, "turns": turns, "turn_vectors": turn_vectors,
            "questions": questions, "claims": claims}


def near(vectors: Any, rng: Any, n: int) -> tuple[Any, Any]:
    """n vectors at cosine ~0.9 from randomly chosen base vectors; returns (vectors, base indexes)."""
    import numpy as np

    idx = rng.integers(0, len(vectors), n)
    out = vectors[idx] + rng.normal(0, 0.025, (n, vectors.shape[1])).astype(np.float32)
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out, idx


def vec_text(v: Any) -> str:
    return "[" + ",".join(f"{x:.5f}" for x in v.tolist()) + "]"


def load_rows(project: Any, stores: list[Any], material: dict[str, Any], n_memories: int, n_chunks: int,
              seed: int) -> None:
    """Append n_memories memories (spread over the stores) and n_chunks chunks with COPY."""
    import numpy as np
    from django.db import connection
    from django.utils import timezone

    from memory_engine.ids import new_id
    from memory_engine.models import Document

    rng = np.random.default_rng(seed)
    now = timezone.now()
    model = "all-MiniLM-L6-v2"
    raw = connection.connection
    with raw.cursor() as cursor:
        vectors, idx = near(material["turn_vectors"], rng, n_memories)
        contents, memories = [], []
        for i in range(n_memories):
            store = stores[i % len(stores)]
            text = material["turns"][idx[i]]
            cid = new_id("mc")
            digest = hashlib.sha256(f"{text}#{seed}#{i}".encode()).hexdigest()
            contents.append((cid, store.pk, digest, text, vec_text(vectors[i]), model, now))
            # conversation turns, as LoCoMo's are: the neighbouring-turns stage runs on them
            memories.append((new_id("mem"), store.pk, cid, "{}", "{}", "conversation", now, "fact", "", "", 0.7, 1,
                             "durable"))
        _setup.copy_rows(cursor, "memory_engine_memorycontent",
                         "id, store_id, content_hash, text, embedding, embedding_model, created_at", contents)
        _setup.copy_rows(cursor, "memory_engine_memory", "id, store_id, content_id, tags, metadata, source_type, "
                         "created_at, kind, title, summary, confidence, evidence_count, retention_class", memories)
        per_doc = 100
        docs = Document.objects.bulk_create([
            Document(project=project, path=f"/bench/{seed}/{d:05d}.txt", title=f"doc {d}", content_type="text/plain",
                     chunk_strategy="size", status="ready", total_chunks=per_doc, indexed_chunks=per_doc)
            for d in range((n_chunks + per_doc - 1) // per_doc)
        ])
        vectors, idx = near(material["doc_vectors"], rng, n_chunks)
        with cursor.copy("COPY memory_engine_chunk (id, document_id, chunk_index, text, embedding, "
                         "embedding_model) FROM STDIN") as copy:
            for i in range(n_chunks):
                copy.write_row((new_id("chk"), docs[i // per_doc].pk, i % per_doc, material["doc_texts"][idx[i]],
                                vec_text(vectors[i]), model))
    raw.commit()


def mark_user_for_agent(agent: Any, user_stores: list[Any]) -> None:
    """A third of the users' memories were written for the agent: user_for_agent in its recall."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("UPDATE memory_engine_memory SET agent_id = %s WHERE store_id = ANY(%s) AND agent_id IS NULL "
                       "AND hashtext(id) %% 3 = 0", [agent.pk, [s.pk for s in user_stores]])


INDEXES = {
    "me_content_embedding_hnsw": "memory_engine_memorycontent",
    "me_chunk_embedding_hnsw": "memory_engine_chunk",
}


def drop_hnsw() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        for name in INDEXES:
            cursor.execute(f"DROP INDEX IF EXISTS {name}")


def build_hnsw() -> float:
    from django.db import connection

    from memory_engine.services.embedding_models import active_model, hnsw_index_sql

    started = time.time()
    storage = active_model().storage
    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '1GB'")
        for name, table in INDEXES.items():
            cursor.execute(hnsw_index_sql(table, name, "embedding", storage))
        cursor.execute("VACUUM ANALYZE memory_engine_memorycontent")
        cursor.execute("VACUUM ANALYZE memory_engine_memory")
        cursor.execute("VACUUM ANALYZE memory_engine_chunk")
        cursor.execute("VACUUM ANALYZE memory_engine_document")
    return time.time() - started


# --------------------------------------------------------------------------- measuring


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def summary(values: list[float], wall: float | None = None) -> dict[str, float]:
    out = {"p50_ms": round(statistics.median(values), 2), "p95_ms": round(pct(values, 95), 2),
           "mean_ms": round(statistics.fmean(values), 2), "n": len(values)}
    if wall:
        out["qps"] = round(len(values) / wall, 1)
    return out


def shapes(project: Any, stores: list[Any]) -> dict[str, dict[str, Any]]:
    """Request bodies; ``stores`` are the institutional ones, then the agent's, then the users'."""
    agent_store = stores[STORES]
    return {
        "one_store": {"memory_store_ids": [stores[0].pk]},
        "everything": {"memory_store_ids": [s.pk for s in stores], "document_paths": ["/"]},
        "documents": {},
        # The agent's knowledge_config names store 0; its own store and subject-0's store join.
        "tiers": {"memory_store_ids": [stores[0].pk], "agent_id": agent_store.agent_id, "subject": "subject-0"},
    }


def as_search_kwargs(body: dict[str, Any]) -> dict[str, Any]:
    """A request body as SearchRequest fields (agent_id + subject: an Actor)."""
    from memory_engine.models import Agent
    from memory_engine.selectors.search import Actor

    kwargs = dict(body)
    agent_id, subject = kwargs.pop("agent_id", None), kwargs.pop("subject", None)
    if agent_id:
        kwargs["actor"] = Actor(agent=Agent.objects.select_related("project").get(pk=agent_id), subject=subject)
    return kwargs


def server_side(project: Any, stores: list[Any], queries: list[str], concurrency: int) -> dict[str, Any]:
    from django.db import connections

    from memory_engine.selectors.search import SearchRequest, knowledge_search

    out = {}
    for shape, body in shapes(project, stores).items():
        timings: list[float] = []
        lock = threading.Lock()
        kwargs = as_search_kwargs(body)

        def run(query: str, kwargs: dict[str, Any] = kwargs, lock: threading.Lock = lock,
                timings: list[float] = timings) -> None:
            result = knowledge_search(SearchRequest(project=project, query=query, limit=10, **kwargs))
            with lock:
                timings.append(result.timings["search_ms"])

        for q in queries[:5]:
            run(q)  # warm up
        timings.clear()
        started = time.perf_counter()
        if concurrency == 1:
            for q in queries:
                run(q)
        else:
            def worker(chunk: list[str]) -> None:
                try:
                    for q in chunk:
                        run(q)
                finally:
                    connections.close_all()

            with ThreadPoolExecutor(concurrency) as pool:
                list(pool.map(worker, [queries[i::concurrency] for i in range(concurrency)]))
        out[shape] = summary(timings, time.perf_counter() - started)
    return out


# --------------------------------------------------------------------------- ranking stages

#: Each stage's time in knowledge_search's timings.
STAGE_TIMINGS = ["fusion_ms", "context_ms", "guard_ms", "corroboration_ms", "boosts_ms", "rerank_ms", "dedupe_ms",
                 "mmr_ms"]


def load_links(project: Any, share: float = 1 / 3, seed: int = 7) -> int:
    """Evidence links for a ``share`` of the memories (one each, 4 in 5 supports), from random
    other memories, so corroboration counts real rows. Bench chunks have no version: their
    lookup runs and finds nothing."""
    import numpy as np
    from django.db import connection
    from django.utils import timezone

    from memory_engine.ids import new_id

    with connection.cursor() as cursor:
        cursor.execute("SELECT id FROM memory_engine_memory ORDER BY id")
        ids = [row[0] for row in cursor.fetchall()]
    rng = np.random.default_rng(seed)
    targets = rng.choice(len(ids), int(len(ids) * share), replace=False)
    sources = rng.integers(0, len(ids), len(targets))
    now = timezone.now()
    raw = connection.connection
    with raw.cursor() as cursor, cursor.copy(
            "COPY memory_engine_evidencelink (id, project_id, kind, source_memory_id, target_memory_id, created_by, "
            "created_at) FROM STDIN") as copy:
        for target, source in zip(targets, sources, strict=True):
            if target != source:
                copy.write_row((new_id("lnk"), project.pk, "supports" if rng.random() < 0.8 else "contradicts",
                                ids[source], ids[target], "bench", now))
    raw.commit()
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memory_engine_evidencelink")
        cursor.execute("SELECT count(*) FROM memory_engine_evidencelink")
        return int(cursor.fetchone()[0])


class FakeReranker:
    """A local TEI-style rerank server (``POST /rerank``): scores by passage length, answered at
    once, so ``rerank_ms`` is the HTTP round trip and the provider's work in this process."""

    def __enter__(self) -> str:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                data = json.dumps([{"index": i, "score": float(len(t) % 97)} for i, t in enumerate(body["texts"])])
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data.encode())

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()


def stage_latency(project: Any, stores: list[Any], queries: list[str]) -> dict[str, Any]:
    """Per-stage milliseconds on top of the base search, concurrency 1, two shapes: every stage
    off (the base), then every stage on in one search (each stage's own time from the timings)."""
    from django.conf import settings
    from django.test.utils import override_settings

    from memory_engine.selectors.search import SearchRequest, knowledge_search

    base = dict(getattr(settings, "MEMORY_ENGINE", None) or {})
    out: dict[str, Any] = {"links": load_links(project)}
    with FakeReranker() as url:
        stages_on = {**base, "SEARCH_DEDUPE_DOCUMENTS": True, "SEARCH_MMR": True, "SEARCH_AUTHORITY_WEIGHT": 0.3,
                     "SEARCH_BOOSTS": True, "SEARCH_CORROBORATION_SUPPORT": 0.1,
                     "SEARCH_CORROBORATION_CONTRADICT": 0.1, "SEARCH_CORROBORATION_CAP": 3,
                     "OUTBOUND_ALLOW": [*base.get("OUTBOUND_ALLOW", []), "127.0.0.1"],
                     "RERANK": {"PROVIDER": "tei", "OPTIONS": {"BASE_URL": url}, "TOP_N": 50, "TIMEOUT": 5}}
        for shape in ("everything", "one_store"):
            kwargs = as_search_kwargs(shapes(project, stores)[shape])
            for variant, overrides in (("off", {**base, "SEARCH_CONTEXT_TURNS": 0}), ("on", stages_on)):
                with override_settings(MEMORY_ENGINE=overrides):
                    rows: list[dict[str, float]] = []
                    for i, q in enumerate(queries[:5] + queries):
                        result = knowledge_search(SearchRequest(project=project, query=q, limit=10, **kwargs))
                        assert "rerank_unavailable" not in result.degraded, result.degraded
                        if i >= 5:  # the first five warm up
                            rows.append(result.timings)
                stats = {"search_ms": summary([r["search_ms"] for r in rows])}
                if variant == "on":
                    # search_ms counts the stages but not the rerank call: the base is what is left.
                    stats["base_ms"] = summary([r["search_ms"] - sum(r.get(n, 0.0) for n in STAGE_TIMINGS
                                                                     if n != "rerank_ms") for r in rows])
                    for name in STAGE_TIMINGS:
                        stats[name] = summary([r.get(name, 0.0) for r in rows])
                    stats["all_stages_ms"] = summary([r["search_ms"] + r.get("rerank_ms", 0.0) for r in rows])
                out[f"{shape}_{variant}"] = stats
    return out


def print_stages(rows: int, report: dict[str, Any]) -> None:
    print(f"\nranking stages at {rows:,} rows ({report['links']:,} evidence links), c=1, ms per search:")
    table = []
    for shape in ("everything", "one_store"):
        off, on = report[f"{shape}_off"], report[f"{shape}_on"]
        table.append([shape, "search, stages off", off["search_ms"]["p50_ms"], off["search_ms"]["p95_ms"]])
        table.append([shape, "base (stages on, less the stages)", on["base_ms"]["p50_ms"], on["base_ms"]["p95_ms"]])
        for name in STAGE_TIMINGS:
            table.append([shape, "+ " + name.removesuffix("_ms"), on[name]["p50_ms"], on[name]["p95_ms"]])
        table.append([shape, "search, every stage on", on["all_stages_ms"]["p50_ms"], on["all_stages_ms"]["p95_ms"]])
    print_table(["shape", "stage", "p50", "p95"], table)


def start_server(db_name: str) -> subprocess.Popen:
    return _setup.start_server(db_name, PORT)


def end_to_end(key: str, stores: list[Any], queries: list[str], concurrency: int) -> dict[str, Any]:
    out = {}
    for shape, body in shapes(None, stores).items():
        totals: list[float] = []
        embeds: list[float] = []
        lock = threading.Lock()

        def call(query: str, body: dict[str, Any] = body, lock: threading.Lock = lock,
                 totals: list[float] = totals, embeds: list[float] = embeds) -> None:
            data = json.dumps({"query": query, "limit": 10, **body}).encode()
            request = urllib.request.Request(f"http://127.0.0.1:{PORT}/api/v1/knowledge/search", data=data,
                                             headers={"Authorization": f"Bearer {key}",
                                                      "Content-Type": "application/json"})
            started = time.perf_counter()
            with urllib.request.urlopen(request, timeout=60) as response:
                response.read()
                timing = response.headers.get("Server-Timing", "")
            elapsed = (time.perf_counter() - started) * 1000
            embed = next((float(part.split("dur=")[1]) for part in timing.split(",") if "embedding" in part), 0.0)
            with lock:
                totals.append(elapsed)
                embeds.append(embed)

        for q in queries[:5]:
            call(q)
        totals.clear()
        embeds.clear()
        started = time.perf_counter()
        with ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(call, queries))
        out[shape] = {**summary(totals, time.perf_counter() - started),
                      "embedding_p50_ms": round(statistics.median(embeds), 2)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000,300000", help="total rows per stage (1/3 memories)")
    parser.add_argument("--queries", type=int, default=200, help="queries per measurement")
    parser.add_argument("--db", default=DB_NAME)
    parser.add_argument("--no-api", action="store_true")
    parser.add_argument("--base-sample", type=int, default=0,
                        help="base material: only the first N turns and abstracts (0: all; needs the cached corpus)")
    parser.add_argument("--extra-backends", default="tsvector",
                        help="lexical backends also measured (server-side) at the last stage: tsvector = the "
                             "fallback for servers without pg_textsearch (its indexes replace the bm25 ones "
                             "for the measurement)")
    parser.add_argument("--stages", action="store_true",
                        help="at the last size, also time each ranking stage (fusion, corroboration, boosts, "
                             "rerank on a local fake TEI server, dedupe, MMR) on top of the base search")
    parser.add_argument("--stages-only", action="store_true",
                        help="--stages without the concurrency measurements (implies --no-api)")
    args = parse_args(parser)
    args.no_api = args.no_api or args.stages_only
    RESULTS.mkdir(parents=True, exist_ok=True)
    setup_django(args.db)
    from memory_engine.models import MemoryStore, Project
    from memory_engine.policy import SYSTEM
    from memory_engine.providers.embeddings import get_embedding_provider
    from memory_engine.services.agents import agent_create
    from memory_engine.services.keys import api_key_create
    from memory_engine.services.stores import subject_store_get_or_create

    provider = get_embedding_provider()
    material = base_material(args.data, provider, args.base_sample)
    project = Project.objects.create(name="bench-search")
    stores = [MemoryStore.objects.create(project=project, name=f"store-{i}") for i in range(STORES)]
    agent = agent_create(project=project, name="bench-agent", knowledge_config={"memory_store_ids": [stores[0].pk]},
                         caller=SYSTEM)
    stores.append(MemoryStore.objects.get(tier="agent", agent=agent))
    stores += [subject_store_get_or_create(project=project, external_id=f"subject-{i}")[0] for i in range(SUBJECTS)]
    key = api_key_create(project=project)[1]
    rng = random.Random(1)
    queries = material["questions"] + material["claims"]
    rng.shuffle(queries)
    queries = queries[: args.queries]
    provider.embed_documents(queries[:1])

    report: dict[str, Any] = {"stages": {}, "queries": len(queries)}
    loaded_mem = loaded_chunks = 0
    for stage, total in enumerate(int(s) for s in args.sizes.split(",")):
        want_mem, want_chunks = total // 3, total - total // 3
        started = time.time()
        drop_hnsw()
        load_rows(project, stores, material, want_mem - loaded_mem, want_chunks - loaded_chunks, seed=stage)
        loaded_mem, loaded_chunks = want_mem, want_chunks
        mark_user_for_agent(agent, stores[STORES + 1:])
        load_s = time.time() - started
        index_s = build_hnsw()
        print(f"[{total:,} rows: {loaded_mem:,} memories + {loaded_chunks:,} chunks] "
              f"load {load_s:.0f}s, HNSW + analyze {index_s:.0f}s", flush=True)
        stage_report: dict[str, Any] = {"memories": loaded_mem, "chunks": loaded_chunks,
                                        "load_seconds": round(load_s, 1), "index_seconds": round(index_s, 1)}
        for concurrency in () if args.stages_only else (1, 8):
            stage_report[f"server_c{concurrency}"] = server_side(project, stores, queries, concurrency)
            print(f"  server-side c={concurrency}: " + json.dumps(stage_report[f"server_c{concurrency}"]), flush=True)
        if (args.stages or args.stages_only) and stage == len(args.sizes.split(",")) - 1:
            stage_report["ranking_stages"] = stage_latency(project, stores, queries)
            print_stages(total, stage_report["ranking_stages"])
        if not args.no_api and stage == len(args.sizes.split(",")) - 1:
            server = start_server(args.db)
            try:
                for concurrency in (1, 8):
                    stage_report[f"api_c{concurrency}"] = end_to_end(key, stores, queries, concurrency)
                    print(f"  API c={concurrency}: " + json.dumps(stage_report[f"api_c{concurrency}"]), flush=True)
            finally:
                os.killpg(server.pid, 15)
                server.wait(timeout=20)
        if stage == len(args.sizes.split(",")) - 1:
            from django.conf import settings
            from django.test.utils import override_settings

            for backend in [b for b in args.extra_backends.split(",") if b]:
                overrides = {**(getattr(settings, "MEMORY_ENGINE", None) or {}),
                             "KNOWLEDGE_LEXICAL_BACKEND": backend}
                use_lexical_backend(backend)
                with override_settings(MEMORY_ENGINE=overrides):
                    for concurrency in (1, 8):
                        name = f"server_{backend}_c{concurrency}"
                        stage_report[name] = server_side(project, stores, queries, concurrency)
                        print(f"  server-side {backend} c={concurrency}: " + json.dumps(stage_report[name]),
                              flush=True)
                use_lexical_backend("auto")
        stage_report["load_average"] = [round(x, 2) for x in os.getloadavg()]
        report["stages"][str(total)] = stage_report
    print("\nrecall across 4 tiers (user, user_for_agent, agent, institutional) vs one store, server-side ms:")
    print_table(["rows", "concurrency", "one_store p50", "one_store p95", "tiers p50", "tiers p95"], [
        [total, c, stage[f"server_c{c}"]["one_store"]["p50_ms"], stage[f"server_c{c}"]["one_store"]["p95_ms"],
         stage[f"server_c{c}"]["tiers"]["p50_ms"], stage[f"server_c{c}"]["tiers"]["p95_ms"]]
        for total, stage in report["stages"].items() for c in (1, 8) if f"server_c{c}" in stage])
    out = RESULTS / f"search-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(report, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
