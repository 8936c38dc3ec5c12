"""Retrieval quality of ``knowledge_search`` on real benchmarks (no LLM needed).

    .venv/bin/python bench/eval_retrieval.py                          # SciFact train + LoCoMo
    .venv/bin/python bench/eval_retrieval.py --qrels ../shared/data/scifact/qrels/test.tsv
    .venv/bin/python bench/eval_retrieval.py --skip-scifact --locomo other-conversations.json
    .venv/bin/python bench/eval_retrieval.py --data /path/to/shared/data   # default: see bench/_setup.py
    .venv/bin/python bench/eval_retrieval.py --limit-docs 800 --limit-queries 100 --skip-locomo
    .venv/bin/python bench/eval_retrieval.py --variant fallback:KNOWLEDGE_LEXICAL_BACKEND=tsvector
    .venv/bin/python bench/eval_retrieval.py --variant w2:SEARCH_LEXICAL_WEIGHT=2,SEARCH_LEXICAL_DEPTH=20
    .venv/bin/python bench/eval_retrieval.py --skip-locomo --limit-docs 500 --limit-queries 100 \
        --chunk-strategy whole,size,page,recursive                     # compare chunking
    .venv/bin/python bench/eval_retrieval.py --skip-locomo --db bench_replay --generation rr_...  # a staged generation

- SciFact (BEIR): every abstract is a document with one chunk ("title\\n\\ntext", the
  ``whole`` strategy), inserted in bulk with vectors cached under bench/results/cache/
  (keyed by model), so only the first run pays the ~6 minutes of embedding. Every query
  of the qrels file is searched; nDCG@10, recall@10, recall@100 and MRR@10.
- ``--chunk-strategy``: SciFact instead goes through the chunker (each abstract one page of
  text, cut by each named strategy with the defaults a text upload gets, tokens counted by
  the embedder); a document ranks where its best chunk ranks.
- LoCoMo: every dialogue turn is written as a memory through the write funnel
  (``speaker: text``; metadata conversation, turn id, session date), one store per
  conversation, and read into the entity graph; every question of categories 1-4 is searched in
  its conversation's store (``--variant graph:SEARCH_GRAPH_WEIGHT=1`` adds the graph channel);
  evidence recall@5 / recall@10 and MRR@10 by category.
- Three modes in one run: lexical only, vector only, hybrid (the default RRF fusion).

Runs in its own database (``bench_eval`` on the same server), never the test databases.
Tune only on qrels/train.tsv. Prints a table and writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
CACHE = RESULTS / "cache"
DB_NAME = "bench_eval"
#: A LoCoMo store's description once every turn of its conversation is written.
LOADED = "every turn written"
MODES = {"lexical": ("lexical",), "vector": ("vector",), "hybrid": ("vector", "lexical")}

sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from _setup import parse_args, print_table, use_lexical_backend, write_results  # noqa: E402

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
os.environ.setdefault("MEMORY_ENGINE_LOG_LEVEL", "WARNING")


def setup_django(db_name: str) -> None:
    """Create (once) and migrate a database of our own on the configured server."""
    from _setup import setup_django as setup

    setup(db_name)


# --------------------------------------------------------------------------- embeddings


class CachedEmbeddingProvider:
    """Wraps the deployment's provider: texts embedded once are served from a disk cache.

    Installed as MEMORY_ENGINE['EMBEDDING']['PROVIDER'] so the write funnel and the search
    function use it unchanged; the model name (and so every stored vector) is the real one's.
    """

    def __init__(self, inner: Any, path: Path) -> None:
        self.inner = inner
        self.model_name = inner.model_name
        self.dimensions = inner.dimensions
        self.path = path
        self.cache: dict[str, list[float]] = {}
        if path.exists():
            self.cache = json.loads(path.read_text())
        self.dirty = False

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha1(text.encode()).hexdigest()

    def prefill(self, texts: Sequence[str], batch: int = 64) -> None:
        missing = list(dict.fromkeys(t for t in texts if self.key(t) not in self.cache))
        for i in range(0, len(missing), batch):
            part = missing[i:i + batch]
            for text, vector in zip(part, self.inner.embed_documents(part), strict=True):
                self.cache[self.key(text)] = [round(x, 6) for x in vector]
            self.dirty = True

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.prefill(texts)
        return [self.cache[self.key(t)] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self.inner.count_tokens(texts)

    def save(self) -> None:
        if self.dirty:
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.cache))
            tmp.replace(self.path)
            self.dirty = False


def install_cached_provider() -> CachedEmbeddingProvider:
    import memory_engine.providers.embeddings as embeddings

    inner = embeddings.get_embedding_provider()
    if inner is None:
        raise SystemExit("An embedding provider must be configured.")
    cached = CachedEmbeddingProvider(inner, CACHE / f"texts-{inner.model_name}-{inner.dimensions}.json")
    embeddings._provider, embeddings._loaded = cached, True  # type: ignore[assignment]
    return cached


# --------------------------------------------------------------------------- metrics


def ndcg_at(ranked: list[str], relevant: dict[str, int], k: int) -> float:
    dcg = sum(relevant.get(doc, 0) / math.log2(i + 2) for i, doc in enumerate(ranked[:k]))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum(rel / math.log2(i + 2) for i, rel in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at(ranked: list[str], relevant: Sequence[str] | dict[str, int], k: int) -> float:
    wanted = set(relevant)
    return len(wanted & set(ranked[:k])) / len(wanted) if wanted else 0.0


def mrr_at(ranked: list[str], relevant: Sequence[str] | dict[str, int], k: int) -> float:
    wanted = set(relevant)
    return next((1.0 / (i + 1) for i, doc in enumerate(ranked[:k]) if doc in wanted), 0.0)


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


# --------------------------------------------------------------------------- SciFact


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path) as handle:
        return [json.loads(line) for line in handle if line.strip()]


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    with open(path) as handle:
        for line in handle:
            parts = line.strip().split("\t")
            if len(parts) != 3 or not parts[2].lstrip("-").isdigit():
                continue  # header
            qrels[parts[0]][parts[1]] = int(parts[2])
    return dict(qrels)


def corpus_vectors(texts: list[str], provider: CachedEmbeddingProvider) -> Any:
    """Vectors of the whole corpus, cached as .npy keyed by model (about 6 minutes once)."""
    import numpy as np

    path = CACHE / f"scifact-corpus-{provider.model_name}-{provider.dimensions}.npy"
    if path.exists():
        vectors = np.load(path)
        if len(vectors) == len(texts):
            return vectors
    started = time.time()
    out = []
    for i in range(0, len(texts), 64):
        out.extend(provider.inner.embed_documents(texts[i:i + 64]))
        print(f"  embedded {min(i + 64, len(texts))}/{len(texts)} ({time.time() - started:.0f}s)", flush=True)
    vectors = np.asarray(out, dtype=np.float32)
    np.save(path, vectors)
    return vectors


def load_scifact(project_name: str, docs: list[dict[str, Any]], vectors: Any, model: str) -> Any:
    """Documents + chunks in bulk (a benchmark shortcut around the ingestion pipeline)."""
    from django.db import transaction

    from memory_engine.models import Chunk, Document, Project

    project, _ = Project.objects.get_or_create(name=project_name)
    if Chunk.objects.filter(document__project=project).count() == len(docs):
        return project
    Document.objects.filter(project=project).delete()
    started = time.time()
    batch = 1000
    for start in range(0, len(docs), batch):
        part = docs[start:start + batch]
        with transaction.atomic():
            created = Document.objects.bulk_create([
                Document(project=project, path=f"/scifact/{d['_id']}", title=d["title"][:500],
                         content_type="text/plain", chunk_strategy="whole", status="ready", total_chunks=1,
                         indexed_chunks=1, size_bytes=len(d["text"].encode()), metadata={"corpus_id": d["_id"]})
                for d in part
            ])
            Chunk.objects.bulk_create([
                Chunk(document=doc, chunk_index=0, text=f"{d['title']}\n\n{d['text']}",
                      embedding=vectors[start + i].tolist(), embedding_model=model)
                for i, (doc, d) in enumerate(zip(created, part, strict=True))
            ])
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memory_engine_chunk; ANALYZE memory_engine_document")
    print(f"  loaded {len(docs)} documents in {time.time() - started:.0f}s", flush=True)
    return project


def load_scifact_chunked(project_name: str, docs: list[dict[str, Any]], provider: CachedEmbeddingProvider,
                         strategy: str, chunk_size: int | None, chunk_overlap: int | None) -> Any:
    """Documents cut by ``strategy`` (the pure chunker, as ingestion does), embedded through the cache."""
    from django.db import connection, transaction

    from memory_engine.chunking import Page, chunk_pages
    from memory_engine.conf import engine_settings
    from memory_engine.models import Chunk, Document, Project
    from memory_engine.services.documents import resolve_chunking

    requested = {"chunk_strategy": strategy, "chunk_size": chunk_size, "chunk_overlap": chunk_overlap}
    strategy, size, overlap = resolve_chunking(requested={k: v for k, v in requested.items() if v},
                                               rule=None, content_type="text/plain")
    name = f"{project_name}-{strategy}-{size}-{overlap}"
    project, _ = Project.objects.get_or_create(name=name)
    if Document.objects.filter(project=project, status="ready").count() == len(docs):
        return project, (strategy, size, overlap)
    Document.objects.filter(project=project).delete()
    started = time.time()
    per_doc = [chunk_pages([Page(f"{d['title']}\n\n{d['text']}", None)], strategy=strategy,
                           chunk_size=size or 1000, chunk_overlap=overlap if size else 200,
                           count_tokens=provider.count_tokens, max_chars=engine_settings.MAX_CHUNK_CHARS)
               for d in docs]
    provider.prefill([spec.text for specs in per_doc for spec in specs])
    provider.save()
    for start in range(0, len(docs), 500):
        with transaction.atomic():
            created = Document.objects.bulk_create([
                Document(project=project, path=f"/scifact/{d['_id']}", title=d["title"][:500],
                         content_type="text/plain", chunk_strategy=strategy, chunk_size=size, chunk_overlap=overlap,
                         status="ready", total_chunks=len(specs), indexed_chunks=len(specs))
                for d, specs in zip(docs[start:start + 500], per_doc[start:start + 500], strict=True)
            ])
            Chunk.objects.bulk_create([
                Chunk(document=doc, chunk_index=spec.chunk_index, text=spec.text,
                      embedding=provider.embed_documents([spec.text])[0], embedding_model=provider.model_name)
                for doc, specs in zip(created, per_doc[start:start + 500], strict=True) for spec in specs
            ])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memory_engine_chunk; ANALYZE memory_engine_document")
    chunks = sum(len(specs) for specs in per_doc)
    print(f"  {name}: {len(docs)} documents, {chunks} chunks in {time.time() - started:.0f}s", flush=True)
    return project, (strategy, size, overlap)


def eval_scifact(args: argparse.Namespace, provider: CachedEmbeddingProvider) -> dict[str, Any]:
    from memory_engine.selectors.search import SearchRequest, knowledge_search

    root = args.data / "scifact"
    qrels = read_qrels(Path(args.qrels))
    queries = {q["_id"]: q["text"] for q in read_jsonl(root / "queries.jsonl") if q["_id"] in qrels}
    query_ids = sorted(queries, key=lambda q: int(q) if q.isdigit() else q)[: args.limit_queries or None]
    corpus = read_jsonl(root / "corpus.jsonl")
    chunked = getattr(args, "current_chunk_strategy", "")
    texts = [f"{d['title']}\n\n{d['text']}" for d in corpus]
    vectors = None if chunked or getattr(args, "generation", "") else corpus_vectors(texts, provider)
    name = "eval-scifact"
    if args.limit_docs:
        wanted = {doc for q in query_ids for doc in qrels[q]}
        keep = [i for i, d in enumerate(corpus) if i < args.limit_docs or d["_id"] in wanted]
        corpus = [corpus[i] for i in keep]
        vectors = vectors[keep] if vectors is not None else None
        name = f"eval-scifact-{len(corpus)}"
    out: dict[str, Any] = {"queries": len(query_ids), "documents": len(corpus), "qrels": str(args.qrels)}
    generation = getattr(args, "generation", "") or None
    if generation:
        from memory_engine.models import ReplayRun

        run = ReplayRun.objects.filter(pk=generation).first()
        if run is None:
            raise SystemExit(f"--generation: no replay run {generation}")
        project = run.project  # its staged chunks are searched instead of the live ones
        out.update(generation=generation, documents=run.documents_total, chunks=run.chunks_total)
    elif chunked:
        project, used = load_scifact_chunked(name, corpus, provider, chunked, args.chunk_size, args.chunk_overlap)
        out["chunking"] = dict(zip(("strategy", "chunk_size", "chunk_overlap"), used, strict=True))
        out["chunks"] = project.documents.aggregate(n=models_sum("total_chunks"))["n"]
    else:
        project = load_scifact(name, corpus, vectors, provider.model_name)
    provider.prefill([queries[q] for q in query_ids])

    def path_to_id(path: str) -> str:
        return path.rsplit("/", 1)[-1]

    def documents_of(hits: Any) -> list[str]:
        # A document ranks where its best chunk ranks (several chunks of one document count once).
        return list(dict.fromkeys(path_to_id(h.document_path) for h in hits))

    samples: list[dict[str, Any]] = []
    for mode, channels in selected_modes(args):
        metrics: dict[str, list[float]] = defaultdict(list)
        started = time.time()
        for qid in query_ids:
            hits = knowledge_search(SearchRequest(project=project, query=queries[qid], limit=100, channels=channels,
                                                  generation=generation)).results
            ranked = documents_of(hits)
            rel = qrels[qid]
            metrics["ndcg@10"].append(ndcg_at(ranked, rel, 10))
            metrics["recall@10"].append(recall_at(ranked, rel, 10))
            metrics["recall@100"].append(recall_at(ranked, rel, 100))
            metrics["mrr@10"].append(mrr_at(ranked, rel, 10))
            if mode == "hybrid":  # the default configuration: limit 10, so per-channel depth 10
                answer = knowledge_search(SearchRequest(project=project, query=queries[qid], limit=10,
                                                        generation=generation))
                top10 = documents_of(answer.results)
                metrics["ndcg@10 (limit=10)"].append(ndcg_at(top10, rel, 10))
                metrics["recall@10 (limit=10)"].append(recall_at(top10, rel, 10))
                metrics["mrr@10 (limit=10)"].append(mrr_at(top10, rel, 10))
                samples.append(evidence_sample(answer, found=bool(set(top10[:3]) & set(rel))))
        out[mode] = {k: round(mean(v), 4) for k, v in metrics.items()}
        out[mode]["seconds"] = round(time.time() - started, 1)
    if samples:
        out["evidence"] = evidence_calibration(samples)
    return out


# --------------------------------------------------------------------------- LoCoMo


def turn_text(turn: dict[str, Any]) -> str:
    return f"{turn['speaker']}: {turn['text']}"


def evidence_of(qa: dict[str, Any]) -> set[str]:
    """A LoCoMo question's evidence turn ids (``"D3:12; D3:14"`` and ``"D3:12, D3:14"`` both split)."""
    return {e.strip() for item in qa.get("evidence", []) for e in item.replace(",", ";").split(";") if e.strip()}


#: A LoCoMo file's conversations in two halves, in file order: the ranking's defaults are tuned on
#: the first only; the second is the check on conversations they were not tuned on.
SPLITS = ("tuned", "held-out")


def locomo_split(conversations: list[dict[str, Any]]) -> dict[str, str]:
    """sample_id -> ``tuned`` (the first half of the file) or ``held-out`` (the rest)."""
    half = (len(conversations) + 1) // 2
    return {conv["sample_id"]: SPLITS[0] if i < half else SPLITS[1] for i, conv in enumerate(conversations)}


def load_locomo(conversations: list[dict[str, Any]], provider: CachedEmbeddingProvider) -> dict[str, Any]:
    """One store per conversation, every turn a memory through the funnel."""
    from memory_engine.exceptions import InstructionRejected
    from memory_engine.models import Memory, MemoryStore, Project
    from memory_engine.services.memories import memory_write

    project, _ = Project.objects.get_or_create(name="eval-locomo")
    turns_by_conv = {}
    for conv in conversations:
        c = conv["conversation"]
        turns = []
        for key in sorted((k for k in c if k.startswith("session_") and not k.endswith("date_time")),
                          key=lambda k: int(k.split("_")[1])):
            for turn in c[key] or []:
                turns.append((turn, c.get(f"{key}_date_time", "")))
        turns_by_conv[conv["sample_id"]] = turns
    provider.prefill([turn_text(t) for turns in turns_by_conv.values() for t, _ in turns])
    stores, memory_turns, refused = {}, defaultdict(set), []
    started = time.time()
    for sample_id, turns in turns_by_conv.items():
        store, _ = MemoryStore.objects.get_or_create(project=project, name=f"locomo-{sample_id}")
        stores[sample_id] = store
        if store.description == LOADED:
            for memory in Memory.objects.filter(store=store):
                for turn_id in memory.metadata.get("turn_ids", [memory.metadata.get("turn_id")]):
                    memory_turns[memory.pk].add(turn_id)
            continue
        Memory.objects.filter(store=store).delete()  # a load that stopped half way starts again
        for turn, date in turns:
            try:
                result = memory_write(
                    store=store, content=turn_text(turn), principal="eval", conversation_id=sample_id,
                    metadata={"conversation": sample_id, "turn_id": turn["dia_id"], "session_date": date},
                    duplicate_threshold=1.0, supersede_threshold=1.0,
                )
            except InstructionRejected:  # the guard refuses a turn as a user's write would be refused
                refused.append(turn["dia_id"])
                continue
            memory_turns[result.memory.pk].add(turn["dia_id"])
            if result.action == "skipped":  # the same words said twice: one memory, both turn ids
                memory = result.memory
                memory.metadata["turn_ids"] = sorted(memory_turns[memory.pk])
                Memory.objects.filter(pk=memory.pk).update(metadata=memory.metadata)
        MemoryStore.objects.filter(pk=store.pk).update(description=LOADED)
    if refused:
        print(f"  locomo: the instruction guard refused {len(refused)} turn(s): {', '.join(refused)}", flush=True)
    # The entity graph reads every turn (a worker does it after each write; here inline, once).
    from memory_engine.services.entities import entities_extract_memories

    while entities_extract_memories(limit=2000).memories:
        pass
    print(f"  locomo: {sum(len(t) for t in turns_by_conv.values())} turns ready in {time.time() - started:.0f}s",
          flush=True)
    return {"project": project, "stores": stores, "memory_turns": memory_turns}


def eval_locomo(args: argparse.Namespace, provider: CachedEmbeddingProvider) -> dict[str, Any]:
    from memory_engine.selectors.search import SearchRequest, knowledge_search

    conversations = json.loads(args.locomo.read_text())
    loaded = load_locomo(conversations, provider)
    questions = []
    split = locomo_split(conversations)
    for conv in conversations:
        for qa in conv["qa"]:
            if qa.get("category") in (1, 2, 3, 4):
                evidence = evidence_of(qa)
                if evidence:
                    questions.append((conv["sample_id"], qa["question"], int(qa["category"]), evidence))
    questions = questions[: args.limit_queries or None]
    provider.prefill([q for _, q, _, _ in questions])
    out: dict[str, Any] = {"questions": len(questions),
                           "split": {name: sorted(c for c, s in split.items() if s == name) for name in SPLITS}}
    samples: list[dict[str, Any]] = []
    for mode, channels in selected_modes(args):
        by_cat: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for sample_id, question, category, evidence in questions:
            answer = knowledge_search(SearchRequest(project=loaded["project"], query=question,
                                                    memory_store_ids=[loaded["stores"][sample_id].pk], limit=10,
                                                    channels=channels))
            hits = answer.results
            ranked: list[str] = []
            for hit in hits:  # a memory may stand for several identical turns
                ranked.extend(sorted(loaded["memory_turns"].get(hit.id, ())) or [hit.id])
            for bucket in (str(category), "all", split[sample_id]):
                by_cat[bucket]["recall@5"].append(recall_at(ranked[:5], evidence, 5))
                by_cat[bucket]["recall@10"].append(recall_at(ranked, evidence, len(ranked)))
                by_cat[bucket]["mrr@10"].append(mrr_at(ranked, evidence, len(ranked)))
            if mode == "hybrid":
                top3 = [turn for hit in hits[:3] for turn in (loaded["memory_turns"].get(hit.id) or {hit.id})]
                samples.append(evidence_sample(answer, found=bool(set(top3) & evidence)))
        if samples:
            out["evidence"] = evidence_calibration(samples)
        out[mode] = {cat: {k: round(mean(v), 4) for k, v in m.items()} | {"n": len(m["recall@5"])}
                     for cat, m in sorted(by_cat.items())}
    return out


# --------------------------------------------------------------------------- halfvec


def halfvec_check(args: argparse.Namespace, provider: CachedEmbeddingProvider) -> dict[str, Any]:
    """The vector channel's exact ranking with vectors stored in single precision (``vector``)
    and in half precision (``halfvec``: each value rounded to float16, as pgvector stores it):
    SciFact queries over the whole corpus, LoCoMo questions over their conversation's turns.
    No database: the ranking is the exact cosine order either way, so what differs is precision."""
    import numpy as np

    def unit(rows: Any) -> Any:
        rows = np.asarray(rows, dtype=np.float32)
        return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)

    def rank_both(docs: Any, queries: Any, k: int) -> tuple[Any, Any, float]:
        full = unit(queries) @ unit(docs).T
        half = unit(np.asarray(queries, dtype=np.float16)) @ unit(np.asarray(docs, dtype=np.float16)).T
        top = np.argsort(-full, axis=1, kind="stable")[:, :k]
        top_half = np.argsort(-half, axis=1, kind="stable")[:, :k]
        return top, top_half, float(np.abs(full - half).max())

    out: dict[str, Any] = {}
    if not args.skip_scifact:
        root = args.data / "scifact"
        qrels = read_qrels(Path(args.qrels))
        queries = {q["_id"]: q["text"] for q in read_jsonl(root / "queries.jsonl") if q["_id"] in qrels}
        query_ids = sorted(queries)[: args.limit_queries or None]
        corpus = read_jsonl(root / "corpus.jsonl")
        doc_ids = [d["_id"] for d in corpus]
        vectors = corpus_vectors([f"{d['title']}\n\n{d['text']}" for d in corpus], provider)
        top, top_half, delta = rank_both(vectors, provider.embed_documents([queries[q] for q in query_ids]), 10)
        rows = {"vector": top, "halfvec": top_half}
        out["scifact"] = {
            "queries": len(query_ids), "documents": len(corpus), "max_cosine_change": delta,
            "same_top10": round(float(np.mean([list(a) == list(b) for a, b in zip(top, top_half, strict=True)])), 4),
            **{f"{name} ndcg@10": round(mean([ndcg_at([doc_ids[i] for i in ranked], qrels[q], 10)
                                            for q, ranked in zip(query_ids, found, strict=True)]), 4)
               for name, found in rows.items()},
        }
    if not args.skip_locomo:
        conversations = json.loads(args.locomo.read_text())
        recalls: dict[str, list[float]] = {"vector": [], "halfvec": []}
        same, deltas = [], []
        for conv in conversations:
            c = conv["conversation"]
            turns = [turn for key in c if key.startswith("session_") and isinstance(c[key], list) for turn in c[key]]
            questions = [(qa["question"], evidence_of(qa)) for qa in conv["qa"] if qa.get("category") in (1, 2, 3, 4)]
            questions = [(q, evidence) for q, evidence in questions if evidence]
            top, top_half, delta = rank_both(provider.embed_documents([turn_text(t) for t in turns]),
                                             provider.embed_documents([q for q, _ in questions]), 10)
            deltas.append(delta)
            for (_, evidence), a, b in zip(questions, top, top_half, strict=True):
                same.append(list(a) == list(b))
                for name, ranked in (("vector", a), ("halfvec", b)):
                    recalls[name].append(recall_at([turns[i]["dia_id"] for i in ranked], evidence, 10))
        out["locomo"] = {"questions": len(same), "max_cosine_change": max(deltas),
                         "same_top10": round(mean([float(x) for x in same]), 4),
                         **{f"{name} recall@10": round(mean(values), 4) for name, values in recalls.items()}}
    return out


# --------------------------------------------------------------------------- evidence


def selected_modes(args: argparse.Namespace) -> list[tuple[str, tuple[str, ...]]]:
    return [(mode, channels) for mode, channels in MODES.items() if mode in args.modes]


def evidence_sample(answer: Any, *, found: bool) -> dict[str, Any]:
    """What the evidence grade of one hybrid answer rests on, and whether a relevant result is in its top 3."""
    scores = [h.lexical_score for h in answer.results[:3] if h.lexical_score is not None]
    return {"hits": len(answer.results), "top3_lexical": max(scores, default=None), "found": found,
            "evidence": getattr(answer, "evidence", None)}


#: Floors tried on the top-3 lexical score (BM25): the evidence grade before issue 63
#: (EVIDENCE_LEXICAL_FLOOR, 14), kept for comparison; "as answered" is today's grade, read off
#: relevance (bench/relevance.py calibrates it).
EVIDENCE_FLOORS = (0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0, 16.0, 18.0, 20.0, 25.0, 30.0)


def evidence_calibration(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Per floor: of answers graded strong, the share with a relevant result in the top 3
    (precision); of those graded none/weak, the share without one; and the share graded strong."""
    def grade(sample: dict[str, Any], floor: float) -> str:
        if not sample["hits"]:
            return "none"
        lexical = sample["top3_lexical"]
        return "strong" if lexical is not None and lexical >= floor else "weak"

    def figures(grades: list[tuple[str, bool]]) -> dict[str, float]:
        strong = [found for g, found in grades if g == "strong"]
        rest = [found for g, found in grades if g != "strong"]
        return {"strong_share": round(len(strong) / len(grades), 4) if grades else 0.0,
                "strong_found_top3": round(mean([float(f) for f in strong]), 4),
                "not_strong_without": round(mean([float(not f) for f in rest]), 4)}

    out: dict[str, Any] = {"n": len(samples), "found_top3": round(mean([float(s["found"]) for s in samples]), 4),
                           "floors": {str(f): figures([(grade(s, f), s["found"]) for s in samples])
                                      for f in EVIDENCE_FLOORS}}
    if any(s["evidence"] for s in samples):
        out["as_answered"] = figures([(s["evidence"], s["found"]) for s in samples])
    out["top3_lexical"] = sorted(round(s["top3_lexical"], 3) for s in samples if s["top3_lexical"] is not None)
    return out


# --------------------------------------------------------------------------- main


def print_tables(label: str, report: dict[str, Any]) -> None:
    sci = report.get("scifact")
    if sci:
        chunking = f", {sci['chunks']} chunks, {sci['chunking']}" if "chunking" in sci else ""
        print(f"\nSciFact [{label}] ({sci['queries']} queries, {sci['documents']} docs{chunking}, "
              f"{Path(sci['qrels']).name})")
        cols = ["ndcg@10", "recall@10", "recall@100", "mrr@10"]
        print(f"  {'mode':8} " + " ".join(f"{c:>10}" for c in cols))
        for mode in MODES:
            if mode in sci:
                print(f"  {mode:8} " + " ".join(f"{sci[mode][c]:>10.3f}" for c in cols))
        if "hybrid" in sci:
            h = sci["hybrid"]
            print(f"  hybrid at the default limit=10: nDCG@10 {h['ndcg@10 (limit=10)']:.3f} "
                  f"recall@10 {h['recall@10 (limit=10)']:.3f} MRR@10 {h['mrr@10 (limit=10)']:.3f}")
        print_evidence(sci.get("evidence"))
    loc = report.get("locomo")
    if loc:
        print(f"\nLoCoMo [{label}] ({loc['questions']} questions, categories 1-4)")
        names = {"1": "multi-hop", "2": "temporal", "3": "open-dom", "4": "single-hop", "all": "all",
                 "tuned": "tuned half", "held-out": "held-out"}
        print(f"  {'mode':8} {'category':11} {'n':>5} {'R@5':>7} {'R@10':>7} {'MRR':>7}")
        for mode in (m for m in MODES if m in loc):
            for cat, m in loc[mode].items():
                print(f"  {mode:8} {names.get(cat, cat):11} {m['n']:>5} {m['recall@5']:>7.3f} "
                      f"{m['recall@10']:>7.3f} {m['mrr@10']:>7.3f}")
        print_evidence(loc.get("evidence"))


def print_evidence(evidence: dict[str, Any] | None) -> None:
    """Evidence calibration of the hybrid answers (limit 10): per floor on the top-3 lexical score."""
    if not evidence:
        return
    print(f"  evidence ({evidence['n']} answers, relevant in top 3: {evidence['found_top3']:.3f}): "
          "floor -> strong share, strong with relevant@3, weak/none without")
    rows = dict(evidence["floors"])
    if "as_answered" in evidence:
        rows["as answered"] = evidence["as_answered"]
    for floor, f in rows.items():
        print(f"    {floor:>11} {f['strong_share']:>7.3f} {f['strong_found_top3']:>7.3f} "
              f"{f['not_strong_without']:>7.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--qrels", default="", help="a qrels file (default: DIR/scifact/qrels/train.tsv)")
    parser.add_argument("--limit-docs", type=int, default=0, help="SciFact: first N abstracts (+ the relevant ones)")
    parser.add_argument("--limit-queries", type=int, default=0)
    parser.add_argument("--skip-scifact", action="store_true")
    parser.add_argument("--skip-locomo", action="store_true")
    parser.add_argument("--locomo", default="", metavar="FILE",
                        help="a LoCoMo conversations file (default: DIR/locomo/locomo-dev.json)")
    parser.add_argument("--variant", action="append", default=[],
                        help="label:SETTING=value,SETTING=value (MEMORY_ENGINE overrides), repeatable; e.g. "
                             "fallback:KNOWLEDGE_LEXICAL_BACKEND=tsvector (its indexes replace the bm25 ones)")
    parser.add_argument("--chunk-strategy", default="",
                        help="comma list of chunk strategies (whole,size,page,recursive): SciFact through the chunker, "
                             "one run each")
    parser.add_argument("--chunk-size", type=int, default=None, help="with --chunk-strategy (default: per strategy)")
    parser.add_argument("--chunk-overlap", type=int, default=None, help="with --chunk-strategy")
    parser.add_argument("--modes", default=",".join(MODES),
                        help="comma list of modes to run (lexical,vector,hybrid); default: all three")
    parser.add_argument("--generation", default="",
                        help="SciFact: search this staged generation (a replay run id, `completed` or `demoted`) "
                             "instead of loading the corpus (--db: the database holding it); its documents' paths "
                             "must end in the SciFact ids, e.g. /scifact/<id>")
    parser.add_argument("--halfvec", action="store_true",
                        help="only compare the vector channel's exact ranking in single and half precision "
                             "(no database writes)")
    parser.add_argument("--db", default=DB_NAME)
    parser.add_argument("--out", default="")
    args = parse_args(parser)
    if args.generation and args.chunk_strategy:
        parser.error("--generation searches what the replay derived: no --chunk-strategy")
    args.qrels = args.qrels or str(args.data / "scifact" / "qrels" / "train.tsv")
    args.locomo = Path(args.locomo) if args.locomo else args.data / "locomo" / "locomo-dev.json"
    args.modes = [m for m in args.modes.split(",") if m]
    if not set(args.modes) <= set(MODES):
        parser.error(f"--modes: choose from {', '.join(MODES)}")

    CACHE.mkdir(parents=True, exist_ok=True)
    setup_django(args.db)
    from django.conf import settings
    from django.test.utils import override_settings

    from memory_engine.conf import engine_settings

    provider = install_cached_provider()
    if args.halfvec:
        report = halfvec_check(args, provider)
        provider.save()
        for corpus, figures in report.items():
            print(f"\n{corpus}: vector channel, exact ranking, single vs half precision")
            print_table(["measure", "value"], [[key, value] for key, value in figures.items()])
        write_results("eval_retrieval_halfvec", report)
        return
    variants: dict[str, dict[str, Any]] = {}
    for spec in args.variant:
        label, _, assignments = spec.partition(":")
        variants[label] = {k: json_or_str(v) for k, _, v in (a.partition("=") for a in assignments.split(",") if a)}
    variants = variants or {"default": {}}
    strategies = [s for s in args.chunk_strategy.split(",") if s] or [""]
    variants = {(f"{label} chunk={strategy}" if strategy else label): {**changes, "_chunk": strategy}
                for label, changes in variants.items() for strategy in strategies}
    reports = {}
    for label, changes in variants.items():
        args.current_chunk_strategy = changes.pop("_chunk")
        overrides = {**(getattr(settings, "MEMORY_ENGINE", None) or {}), **changes}
        with override_settings(MEMORY_ENGINE=overrides):
            install_cached_provider_again(provider)
            use_lexical_backend(str(engine_settings.KNOWLEDGE_LEXICAL_BACKEND))
            keys = ("KNOWLEDGE_TEXT_SEARCH_CONFIG", "KNOWLEDGE_LEXICAL_BACKEND", "SEARCH_VECTOR_DEPTH",
                    "SEARCH_LEXICAL_DEPTH", "SEARCH_VECTOR_WEIGHT", "SEARCH_LEXICAL_WEIGHT")
            effective = {k: getattr(engine_settings, k) for k in keys}
            report: dict[str, Any] = {"settings": {**effective, "model": provider.model_name}}
            if not args.skip_scifact:
                report["scifact"] = eval_scifact(args, provider)
            if not args.skip_locomo:
                report["locomo"] = eval_locomo(args, provider)
            provider.save()
            print_tables(label, report)
            reports[label] = report
    out = Path(args.out) if args.out else RESULTS / f"eval_retrieval-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(reports, indent=2))
    print(f"\nwrote {out}")


def models_sum(field: str) -> Any:
    from django.db.models import Sum

    return Sum(field)


def json_or_str(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError:
        return value


def install_cached_provider_again(provider: CachedEmbeddingProvider) -> None:
    """override_settings resets the provider cache; put the cached wrapper back."""
    import memory_engine.providers.embeddings as embeddings

    embeddings.get_embedding_provider()  # reads the registry's active model first, so it sticks
    embeddings._provider, embeddings._loaded = provider, True  # type: ignore[assignment]


if __name__ == "__main__":
    main()
