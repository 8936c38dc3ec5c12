"""Does the funnel keep every update? Fact / restatement / changed-detail update triples.

For each triple in bench/data/dedup_updates.jsonl (or --data FILE) a fresh store gets
the fact then the restatement, and another fresh store gets the fact then the update,
through the real funnel with the default embedder and thresholds. Three modes in one
run: cosine only (gate off), the changed-detail gate, and the gate with `about` keys.

Targets: no update skipped; at least 95% of restatements skipped (without about keys);
see bench/dedup.py for the false-retire rate on STS pairs.

    python bench/dedup_updates.py [--data FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import ROOT, print_table, setup_django, write_results  # noqa: E402

MODES = {
    "cosine only": {"gate": False, "about": False},
    "changed-detail gate": {"gate": True, "about": False},
    "gate + about keys": {"gate": True, "about": True},
}


def run_mode(triples: list[dict[str, Any]], *, gate: bool, about: bool,
             decisions: list[dict[str, Any]]) -> dict[str, Any]:
    from django.conf import settings
    from django.test import override_settings

    from memory_engine.models import MemoryStore, Project
    from memory_engine.services.memories import memory_write
    from memory_engine.services.stores import project_delete

    name = f"bench-updates-{int(gate)}{int(about)}"
    for old in Project.objects.filter(name=name):
        project_delete(project=old)
    project = Project.objects.create(name=name)
    restatements, updates = Counter(), Counter()
    missed: list[dict[str, Any]] = []
    with override_settings(MEMORY_ENGINE={**settings.MEMORY_ENGINE, "CHANGED_DETAIL_GATE": gate}):
        for index, triple in enumerate(triples):
            key = triple.get("about") if about else None
            for kind, tally in (("restatement", restatements), ("update", updates)):
                store = MemoryStore.objects.create(project=project, name=f"{index}-{kind}")
                memory_write(store=store, content=triple["fact"], principal="bench", about=key)
                result = memory_write(store=store, content=triple[kind], principal="bench", about=key)
                tally[result.action] += 1
                decisions.append({"mode": name, "triple": index, "kind": kind, "action": result.action,
                                  "reason": result.decision_reason,
                                  "similarity": None if result.similarity is None else round(result.similarity, 4)})
                wrong = (kind == "update" and result.action != "superseded") or (
                    kind == "restatement" and result.action != "skipped")
                if wrong:
                    missed.append({"kind": kind, "fact": triple["fact"], "second": triple[kind],
                                   "action": result.action, "similarity": result.similarity,
                                   "reason": result.decision_reason})
    project_delete(project=project)
    return {"restatements": dict(restatements), "updates": dict(updates), "misses": missed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default=str(ROOT / "bench" / "data" / "dedup_updates.jsonl"),
                        help="the hand-written cases (JSON lines)")
    parser.add_argument("--show-misses", action="store_true")
    parser.add_argument("--decisions", type=Path, metavar="FILE",
                        help="also write every write's decision (action, reason, similarity) as JSON lines")
    args = parser.parse_args()
    triples = [json.loads(line) for line in Path(args.cases).read_text().splitlines() if line.strip()]
    setup_django()
    print(f"{len(triples)} fact / restatement / update triples, thresholds 0.95 / 0.90, all-MiniLM-L6-v2")
    results, rows = {}, []
    decisions: list[dict[str, Any]] = []
    for mode, options in MODES.items():
        started = time.perf_counter()
        result = run_mode(triples, **options, decisions=decisions)
        result["seconds"] = round(time.perf_counter() - started, 1)
        results[mode] = result
        n = len(triples)
        r, u = result["restatements"], result["updates"]
        rows.append([mode, f"{r.get('skipped', 0) / n:.1%}", f"{r.get('superseded', 0) / n:.1%}",
                     f"{r.get('created', 0) / n:.1%}", f"{u.get('superseded', 0) / n:.1%}",
                     f"{u.get('skipped', 0) / n:.1%}", f"{u.get('created', 0) / n:.1%}"])
    print_table(["mode", "restate: skipped", "superseded", "created", "update: superseded", "skipped", "created"],
                rows)
    if args.show_misses:
        for mode, result in results.items():
            print(f"\n{mode}: {len(result['misses'])} misses")
            for miss in result["misses"]:
                print(f"  {miss['kind']:<11} {miss['action']:<10} {miss['similarity'] and round(miss['similarity'], 3)}"
                      f"  {miss['fact']!r} -> {miss['second']!r}")
    if args.decisions:
        args.decisions.write_text("".join(json.dumps(row) + "\n" for row in decisions))
    write_results("dedup-updates", {"triples": len(triples), "data": Path(args.cases).name, "results": results})


if __name__ == "__main__":
    main()
