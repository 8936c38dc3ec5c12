"""This engine against a peer (mem0 OSS) on the same machine, the same PostgreSQL and the same model.

Needs the ``bench`` extra (``pip install -e '.[bench]'``: mem0ai). Both systems get the same
workload, one after the other, in one run:

* **write**: every LoCoMo dev turn (``speaker: text``, one store / mem0 ``user_id`` per
  conversation), then filler texts (SciFact sentences, one more store) up to ``--memories``;
  each write timed alone. p50 / p95 over writes 1-1,000 ("at 1k") and over the last 1,000
  ("at 10k" with the default ``--memories 10000``).
* **search**: every LoCoMo dev question of categories 1-4 in its conversation's store,
  ``limit=10``; p50 / p95 and evidence recall@10 (scored as bench/eval_retrieval.py does).

The engine is measured through its HTTP API (``POST /api/v1/memories``, ``POST
/api/v1/knowledge/search``, default write settings: dedup and supersede on) on ``manage.py
runserver``; mem0 (``Memory`` with ``infer=False``: no LLM call) as a library, its pgvector
store in the same database and its OpenAI-compatible embedder pointed at the same server's
``POST /api/v1/embeddings``. So each write and each search costs both systems one HTTP
round trip and one call of the same embedding model. No network access is needed.

    python bench/peers.py [--data DIR] [--memories 10000] [--questions 0] [--conversations 0]
                          [--skip-mem0] [--skip-engine]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import defaultdict
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _setup  # noqa: E402
from _setup import parse_args, percentile, print_table, setup_django, write_results  # noqa: E402
from eval_retrieval import evidence_of, recall_at, turn_text  # noqa: E402

DB_NAME = "bench_peers"
PORT = 8771
COLLECTION = "mem0_peers"
WINDOW = 1000


def locomo(path: Path, limit: int) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, set[str]]]]:
    """``(conversation, turn id, text)`` of every turn and ``(conversation, question, evidence)``."""
    conversations = json.loads(path.read_text())[: limit or None]
    turns, questions = [], []
    for conv in conversations:
        c = conv["conversation"]
        for key in sorted((k for k in c if k.startswith("session_") and not k.endswith("date_time")),
                          key=lambda k: int(k.split("_")[1])):
            turns.extend((conv["sample_id"], turn["dia_id"], turn_text(turn)) for turn in c[key] or [])
        for qa in conv["qa"]:
            evidence = evidence_of(qa)
            if qa.get("category") in (1, 2, 3, 4) and evidence:
                questions.append((conv["sample_id"], qa["question"], evidence))
    return turns, questions


def filler(data: Path, count: int) -> list[str]:
    """Distinct sentences from SciFact abstracts (memory-sized texts)."""
    texts: list[str] = []
    if count <= 0:
        return texts
    seen: set[str] = set()
    with open(data / "scifact" / "corpus.jsonl") as handle:
        for line in handle:
            for sentence in re.split(r"(?<=[.!?])\s+", json.loads(line)["text"]):
                if 40 <= len(sentence) <= 400 and sentence not in seen:
                    seen.add(sentence)
                    texts.append(sentence)
                    if len(texts) == count:
                        return texts
    return texts


class Engine:
    """This engine over its HTTP API."""

    name = "memory_engine"

    def __init__(self, key: str, stores: dict[str, str]) -> None:
        self.key = key
        self.stores = stores
        self.turns: dict[str, set[str]] = defaultdict(set)  # memory id -> the turns it stands for
        self.refused: list[str] = []  # texts the instruction guard's write gate refused (a store is institutional)

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(f"http://127.0.0.1:{PORT}/api/v1/{path}", data=json.dumps(body).encode(),
                                         headers={"Authorization": f"Bearer {self.key}",
                                                  "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                result: dict[str, Any] = json.loads(response.read())
                return result
        except urllib.error.HTTPError as exc:
            answer = exc.read()
            if exc.code == 400 and b'"INSTRUCTION_REJECTED"' in answer:
                return {"code": "INSTRUCTION_REJECTED"}
            raise SystemExit(f"POST {path}: {exc.code} {answer[:500]!r}") from None

    def write(self, group: str, text: str, turn: str | None) -> None:
        # A conversation's turns are written as turns of it (`conversation_id`), as a chat app does.
        body = self._post("memories", {"memory_store_id": self.stores[group], "content": text,
                                       **({"conversation_id": group} if turn is not None else {})})
        if body.get("code") == "INSTRUCTION_REJECTED":  # counted and reported; its turn is lost to recall
            self.refused.append(text)
            return
        if turn is not None:  # a skip stands for its duplicate's turns too; a supersede inherits them
            self.turns[body["id"]].add(turn)
            if body.get("superseded_memory_id"):
                self.turns[body["id"]] |= self.turns.pop(body["superseded_memory_id"], set())

    def search(self, group: str, query: str) -> list[str]:
        body = self._post("knowledge/search", {"query": query, "memory_store_ids": [self.stores[group]],
                                               "limit": 10})
        ranked: list[str] = []
        for hit in body["results"]:
            ranked.extend(sorted(self.turns.get(hit["id"], ())) or [hit["id"]])
        return ranked


class Mem0:
    """mem0's ``Memory`` (infer=False), pgvector in the same database, embeddings from this engine."""

    name = "mem0"

    def __init__(self, key: str, dims: int, model: str, history: Path) -> None:
        os.environ["MEM0_TELEMETRY"] = "False"
        from django.conf import settings
        from mem0 import Memory

        db = settings.DATABASES["default"]
        conninfo = " ".join(f"{k}={v}" for k, v in (("dbname", DB_NAME), ("user", db["USER"]), ("host", db["HOST"]),
                                                     ("port", db["PORT"]), ("password", db["PASSWORD"])) if v)
        self.memory = Memory.from_config({
            "vector_store": {"provider": "pgvector", "config": {
                "connection_string": conninfo, "collection_name": COLLECTION, "embedding_model_dims": dims,
                "hnsw": True}},
            "embedder": {"provider": "openai", "config": {
                "model": model, "api_key": key, "openai_base_url": f"http://127.0.0.1:{PORT}/api/v1",
                "embedding_dims": dims}},
            # Never called with infer=False; mem0 builds a client all the same and wants a key.
            "llm": {"provider": "openai", "config": {"api_key": "unused", "model": "unused"}},
            "history_db_path": str(history),
        })

    def write(self, group: str, text: str, turn: str | None) -> None:
        self.memory.add(text, user_id=group, metadata={"turn": turn or ""}, infer=False)

    def search(self, group: str, query: str) -> list[str]:
        found = self.memory.search(query, top_k=10, filters={"user_id": group})
        return [hit["metadata"]["turn"] if hit.get("metadata", {}).get("turn") else hit["id"]
                for hit in found["results"]]


def run(system: Any, writes: list[tuple[str, str, str | None]],
        questions: list[tuple[str, str, set[str]]]) -> dict[str, Any]:
    latencies = timed(lambda item: system.write(*item), writes, f"{system.name} writes")
    recalls: list[float] = []

    def ask(item: tuple[str, str, set[str]]) -> None:
        recalls.append(recall_at(system.search(item[0], item[1]), item[2], 10))

    searches = timed(ask, questions, f"{system.name} searches")
    first, last = latencies[:WINDOW], latencies[-WINDOW:]
    return {
        "system": system.name, "memories": len(writes),
        "write_first_1k_ms": ms(first), "write_last_1k_ms": ms(last),
        "search_ms": ms(searches), "questions": len(questions),
        "recall@10": round(sum(recalls) / len(recalls), 4),
        "write_s": round(sum(latencies) / 1000, 1), "search_s": round(sum(searches) / 1000, 1),
        "refused": list(getattr(system, "refused", [])),
    }


def timed(call: Callable[[Any], None], items: list[Any], label: str) -> list[float]:
    out = []
    started = time.time()
    for done, item in enumerate(items, start=1):
        begin = time.perf_counter()
        call(item)
        out.append((time.perf_counter() - begin) * 1000)
        if done % 1000 == 0:
            print(f"  {label}: {done}/{len(items)} in {time.time() - started:.0f}s", flush=True)
    return out


def ms(values: list[float]) -> dict[str, float]:
    return {"p50": round(percentile(values, 50), 1), "p95": round(percentile(values, 95), 1)}


def reset(project_name: str) -> Any:
    from django.db import connection

    from memory_engine.models import Project
    from memory_engine.services.stores import project_delete

    for old in Project.objects.filter(name=project_name):
        project_delete(project=old)
    with connection.cursor() as cursor:
        cursor.execute(f'DROP TABLE IF EXISTS "{COLLECTION}"')
    return Project.objects.create(name=project_name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000, help="memories written per system (>= the turns)")
    parser.add_argument("--questions", type=int, default=0, help="LoCoMo questions (0: all of categories 1-4)")
    parser.add_argument("--conversations", type=int, default=0, help="LoCoMo conversations (0: all of the file)")
    parser.add_argument("--locomo", type=Path, metavar="FILE",
                        help="a LoCoMo conversations file (default: DIR/locomo/locomo-dev.json)")
    parser.add_argument("--skip-mem0", action="store_true")
    parser.add_argument("--skip-engine", action="store_true")
    args = parse_args(parser)

    setup_django(DB_NAME)
    from memory_engine.models import MemoryStore
    from memory_engine.providers.embeddings import require_embedding_provider
    from memory_engine.services.keys import api_key_create

    provider = require_embedding_provider()
    turns, questions = locomo(args.locomo or args.data / "locomo" / "locomo-dev.json", args.conversations)
    questions = questions[: args.questions or None]
    writes: list[tuple[str, str, str | None]] = [(group, text, turn) for group, turn, text in turns]
    writes += [("filler", text, None) for text in filler(args.data, max(0, args.memories - len(writes)))]
    project = reset("bench-peers")
    key = api_key_create(project=project)[1]
    stores = {group: MemoryStore.objects.create(project=project, name=f"peers-{group}").pk
              for group in dict.fromkeys(group for group, _, _ in writes)}
    history = Path(tempfile.mkdtemp(prefix="bench-peers-"))
    server = _setup.start_server(DB_NAME, PORT)
    rows: list[dict[str, Any]] = []
    try:
        systems: list[Any] = []
        if not args.skip_engine:
            systems.append(Engine(key, stores))
        if not args.skip_mem0:
            systems.append(Mem0(key, provider.dimensions, provider.model_name, history / "history.db"))
        for system in systems:
            system.search(writes[0][0], "warm up")  # the server's model and connections
            rows.append(run(system, writes, questions))
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(history, ignore_errors=True)

    versions = {"memory_engine": version("memory-engine") if _installed("memory-engine") else "checkout",
                "mem0ai": version("mem0ai") if _installed("mem0ai") else "-",
                "embedder": f"{provider.model_name} (dims {provider.dimensions})"}
    print(f"\n{len(writes)} writes per system ({len(turns)} LoCoMo dev turns + filler), {len(questions)} questions; "
          f"versions: {versions}\n")
    print_table(
        ["system", "write p50/p95 ms (first 1k)", f"write p50/p95 ms (last 1k, at {len(writes)})",
         "search p50/p95 ms", "LoCoMo recall@10"],
        [[r["system"], f"{r['write_first_1k_ms']['p50']} / {r['write_first_1k_ms']['p95']}",
          f"{r['write_last_1k_ms']['p50']} / {r['write_last_1k_ms']['p95']}",
          f"{r['search_ms']['p50']} / {r['search_ms']['p95']}", f"{r['recall@10']:.3f}"] for r in rows],
    )
    for r in rows:
        for text in r["refused"]:
            print(f"{r['system']} refused (INSTRUCTION_REJECTED): {text[:160]}")
    write_results("peers", {"versions": versions, "writes": len(writes), "questions": len(questions),
                            "load_average": os.getloadavg(), "rows": rows})


def _installed(name: str) -> bool:
    try:
        version(name)
    except Exception:  # noqa: BLE001  (PackageNotFoundError)
        return False
    return True


if __name__ == "__main__":
    main()
