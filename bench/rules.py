"""Memory rules speed: what the engine adds per firing, and what completing a turn costs.

Measures, in one run on one machine, against a local fake LLM that answers instantly
(two new facts per call) and the offline hashing test embedder (so the figures are the
engine's own overhead, not a model's):
  * the added latency of ``POST /api/v1/generations/{id}/complete`` when one rule matches
    (the firing is only enqueued) over a request that fires no rule — p50/p95;
  * firings per second processed by ONE django-q2 worker (``manage.py qcluster`` with
    Q_WORKERS=1) draining the queue those requests filled;
  * firings per second run in-process (``memory_rule_fire`` called directly: no queue).

    python bench/rules.py [--requests 300] [--inline 200] [--embedder hashing|onnx]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))
from _setup import print_table, setup_django, summary_ms, write_results  # noqa: E402

from tests.rules.servers import FakeServer, chat_reply  # noqa: E402

DB_NAME = "bench_rules"
EMBEDDERS = {"hashing": "tests.providers.HashingEmbeddingProvider", "onnx": "onnx"}


def instant_llm() -> FakeServer:
    """Answers every chat completion at once with two facts never seen before."""
    counter = itertools.count()

    def respond(request: dict[str, Any]) -> tuple[int, Any, float]:
        n = next(counter)
        # Four unique tokens per fact keep the hashing embedder's collisions out of the way.
        facts = [f"Customer{n} ordered widget{n} from shop{n} on day{n}.",
                 {"content": f"Account{n} of region{n} moved to tier{n} in week{n}.", "tags": {"kind": "plan"}}]
        return 200, chat_reply("Facts: " + json.dumps(facts)), 0.0

    return FakeServer(respond)


def complete_latencies(client: Any, agents: dict[str, Any], count: int) -> dict[str, list[float]]:
    """Interleaved complete requests: agent 'rule' has one matching rule, 'none' has none."""
    timings: dict[str, list[float]] = {name: [] for name in agents}
    for i in range(count):
        for name, agent in agents.items():
            gen_id = client.post("/api/v1/generations", {
                "agent_id": agent.pk, "input_messages": [{"role": "user", "content": f"I am customer {i}."}],
            }, format="json").data["id"]
            started = time.perf_counter()
            response = client.post(f"/api/v1/generations/{gen_id}/complete", {"output": f"Noted {i}."},
                                   format="json")
            timings[name].append(time.perf_counter() - started)
            assert response.status_code == 200, response.content
    return timings


def drain_with_one_worker(rule_id: str, expected: int, env: dict[str, str]) -> dict[str, Any]:
    """Start one qcluster worker and time it draining ``expected`` firings of ``rule_id``."""
    from memory_engine.models import Generation

    def done() -> int:
        return Generation.objects.filter(extraction__has_key=rule_id).count()

    proc = subprocess.Popen([sys.executable, str(ROOT / "manage.py"), "qcluster"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    started = time.perf_counter()
    first_at = None
    try:
        while True:
            count = done()
            now = time.perf_counter()
            if count and first_at is None:
                first_at, first_count = now, count
            if count >= expected or now - started > 600:
                break
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGTERM)  # the main process stops its children in order
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    finished = time.perf_counter()
    processed = done()
    span = finished - (first_at or started)
    return {
        "firings": processed,
        "expected": expected,
        "seconds_from_first_to_last": round(span, 3),
        "firings_per_second": round((processed - (first_count if first_at else 0)) / span, 1) if span else None,
        "worker_start_to_first_firing_s": round((first_at or finished) - started, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=300, help="complete requests per kind (and queued firings)")
    parser.add_argument("--inline", type=int, default=200, help="firings run in-process")
    parser.add_argument("--embedder", choices=sorted(EMBEDDERS), default="hashing")
    args = parser.parse_args()

    load_before = os.getloadavg()
    llm = instant_llm()
    env_extra = {
        "MEMORY_ENGINE_EMBEDDING_PROVIDER": EMBEDDERS[args.embedder],
        "MEMORY_ENGINE_LLM_BASE_URL": f"{llm.url}/v1",
        "MEMORY_ENGINE_LLM_MODEL": "bench-model",
        "MEMORY_ENGINE_LOG_LEVEL": "WARNING",
    }
    os.environ.update(env_extra)
    setup_django(DB_NAME)
    from django_q.models import OrmQ
    from rest_framework.test import APIClient

    from memory_engine.models import Agent, Generation, MemoryRule, MemoryStore, Project
    from memory_engine.services.generations import record_generation
    from memory_engine.services.keys import api_key_create
    from memory_engine.services.rules import enqueue_rule_firing, memory_rule_fire

    OrmQ.objects.all().delete()
    suffix = str(int(time.time()))
    project = Project.objects.create(name=f"bench-rules-{suffix}")
    store = MemoryStore.objects.create(project=project, name="facts")
    agents = {"rule": Agent.objects.create(project=project, name="with-rule"),
              "none": Agent.objects.create(project=project, name="no-rule")}
    rule = MemoryRule.objects.create(store=store, handler_type="builtin")
    rule.source_agents.set([agents["rule"]])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key_create(project=project)[1]}")

    complete_latencies(client, agents, 20)  # warm-up (connections, caches); their firings stay queued
    timings = complete_latencies(client, agents, args.requests)
    queued = OrmQ.objects.count()
    rule_ms, none_ms = summary_ms(timings["rule"]), summary_ms(timings["none"])
    added = {"p50_ms": round(rule_ms["p50_ms"] - none_ms["p50_ms"], 3),
             "p95_ms": round(rule_ms["p95_ms"] - none_ms["p95_ms"], 3)}

    # The added work alone: what the receiver does for one matching rule (one queue insert).
    queued_ids = list(OrmQ.objects.values_list("id", flat=True))
    enqueue_seconds = []
    for generation in Generation.objects.filter(agent=agents["rule"]).order_by("created_at")[:args.requests]:
        t0 = time.perf_counter()
        enqueue_rule_firing(project_id=generation.project_id, rule_id=rule.pk, generation_id=generation.pk)
        enqueue_seconds.append(time.perf_counter() - t0)
    OrmQ.objects.exclude(id__in=queued_ids).delete()  # leave the queue as the requests left it
    enqueue_ms = summary_ms(enqueue_seconds)

    env = dict(os.environ, MEMORY_ENGINE_DB_NAME=DB_NAME, Q_WORKERS="1", **env_extra)
    worker = drain_with_one_worker(rule.pk, args.requests + 20, env)

    inline_gens = [record_generation(agent=agents["rule"], input_messages=[{"role": "user", "content": f"x {i}"}],
                                     output="ok", status="completed") for i in range(args.inline)]
    started = time.perf_counter()
    durations = []
    for generation in inline_gens:
        t0 = time.perf_counter()
        counts = memory_rule_fire(rule_id=rule.pk, generation_id=generation.pk)
        durations.append(time.perf_counter() - t0)
        assert counts and counts["error"] is None and counts["created"] + counts["superseded"] == 2, counts
    inline_seconds = time.perf_counter() - started
    OrmQ.objects.all().delete()  # the inline generations' own enqueued firings
    llm.close()

    errors = Generation.objects.filter(project=project, extraction__icontains='"code"').count()
    print(f"embedder: {args.embedder}; fake LLM answers instantly with 2 new facts per firing\n")
    print_table(["complete request", "p50 ms", "p95 ms", "n"], [
        ["one matching rule (enqueue)", rule_ms["p50_ms"], rule_ms["p95_ms"], rule_ms["n"]],
        ["no rule fires", none_ms["p50_ms"], none_ms["p95_ms"], none_ms["n"]],
        ["added by the rule", added["p50_ms"], added["p95_ms"], ""],
        ["enqueue alone (no request)", enqueue_ms["p50_ms"], enqueue_ms["p95_ms"], enqueue_ms["n"]],
    ])
    print()
    print_table(["firings", "count", "seconds", "firings/s"], [
        ["one qcluster worker", worker["firings"], worker["seconds_from_first_to_last"],
         worker["firings_per_second"]],
        ["in-process (no queue)", args.inline, round(inline_seconds, 3), round(args.inline / inline_seconds, 1)],
    ])
    load_after = os.getloadavg()
    print(f"\nqueued before the worker: {queued}; generations with a rule error: {errors}")
    print(f"load average (1 min) before/after: {load_before[0]:.2f} / {load_after[0]:.2f} on {os.cpu_count()} CPUs")
    write_results(f"rules-{args.embedder}", {
        "embedder": args.embedder,
        "complete_request": {"one_rule": rule_ms, "no_rule": none_ms, "added": added, "enqueue_alone": enqueue_ms},
        "worker": worker,
        "inline": {"firings": args.inline, "seconds": round(inline_seconds, 3),
                   "firings_per_second": round(args.inline / inline_seconds, 1), "per_firing": summary_ms(durations)},
        "errors": errors,
        "load_average_1min": {"before": round(load_before[0], 2), "after": round(load_after[0], 2)},
    })


if __name__ == "__main__":
    main()
