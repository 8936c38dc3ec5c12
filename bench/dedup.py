"""What the write funnel's thresholds do to real sentence pairs (STS Benchmark).

For every pair (s1, s2, score 0-5) a fresh store receives s1 then s2 through the real
funnel with the default embedder and thresholds; the second write's action is tallied
by STS score band. The false-retire rate (pairs scored under 3 whose second sentence
was skipped or superseded) is what users care about most: a different fact silently
dropped or retired.

    python bench/dedup.py [--data DIR] [--split dev|train|test] [--limit N] [--no-gate-compare]

``--split test`` reads ``sts-test.csv``, the STS Benchmark's held-out split, where the data
directory has it (the shared data holds train and dev).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import parse_args, print_table, setup_django, write_results  # noqa: E402

BANDS = [(0.0, 1.0), (1.0, 2.0), (2.0, 3.0), (3.0, 4.0), (4.0, 4.5), (4.5, 5.01)]


def band_name(low: float, high: float) -> str:
    return f"[{low:.1f}, {min(high, 5.0):.1f}{']' if high > 5 else ')'}"


def load_pairs(data: Path, split: str, limit: int | None) -> list[tuple[float, str, str]]:
    path = data / "paraphrase" / f"sts-{split}.csv"
    pairs = []
    with open(path, encoding="utf-8") as handle:
        for row in csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE):
            if len(row) >= 7:
                pairs.append((float(row[4]), row[5], row[6]))
    return pairs[:limit] if limit else pairs


def halfvec_cosines(first: str, second: str) -> tuple[float, float]:
    """The pair's cosine in single precision (the embedder's vectors) and after a cast to halfvec
    (half precision), whatever the store's column holds: with halfvec storage, the default, the
    stored vectors are already cast."""
    from django.db import connection

    from memory_engine.conf import embedding_dimensions
    from memory_engine.db import vector_literal
    from memory_engine.providers.embeddings import require_embedding_provider

    dims = embedding_dimensions()
    a, b = (vector_literal(v) for v in require_embedding_provider().embed_documents([first, second]))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT 1 - (%(a)s::vector({dims}) <=> %(b)s::vector({dims})),"
            f" 1 - (%(a)s::vector({dims})::halfvec({dims}) <=> %(b)s::vector({dims})::halfvec({dims}))",
            {"a": a, "b": b},
        )
        single, half = cursor.fetchone()
    return float(single), float(half)


def band_of(cosine: float) -> str:
    """Which side of the default thresholds a cosine falls on (the cosine part of the decision)."""
    return "duplicate" if cosine >= 0.95 else "supersede" if cosine >= 0.90 else "below"


def run(pairs: list[tuple[float, str, str]], *, gate: bool, decisions: list[dict[str, Any]],
        halfvec: bool = False) -> dict[str, Any]:
    from django.test import override_settings

    from memory_engine.models import MemoryStore, Project
    from memory_engine.services.memories import memory_write
    from memory_engine.services.stores import project_delete

    project, _ = Project.objects.get_or_create(name=f"bench-dedup-{'gate' if gate else 'nogate'}")
    project_delete(project=project)
    project = Project.objects.create(name=f"bench-dedup-{'gate' if gate else 'nogate'}")
    tallies: dict[str, Counter] = defaultdict(Counter)
    halfvec_deltas: list[float] = []
    halfvec_changes: list[dict[str, Any]] = []
    started = time.perf_counter()
    from django.conf import settings

    with override_settings(MEMORY_ENGINE={**settings.MEMORY_ENGINE, "CHANGED_DETAIL_GATE": gate}):
        for index, (score, first, second) in enumerate(pairs):
            # user tier: the funnel's decisions alone (the instruction guard's write gate, which
            # refused 12 of these 3,000 sentences in an agent store before 2026-12-05, 3 since, has its own bench)
            store = MemoryStore.objects.create(project=project, name=f"pair-{index}", tier="user")
            memory_write(store=store, content=first, principal="bench")
            result = memory_write(store=store, content=second, principal="bench")
            band = next(band_name(lo, hi) for lo, hi in BANDS if lo <= score < hi)
            tallies[band][result.action] += 1
            decisions.append({"gate": gate, "pair": index, "action": result.action,
                              "reason": result.decision_reason,
                              "similarity": None if result.similarity is None else round(result.similarity, 4)})
            if halfvec:
                cosines = halfvec_cosines(first, second)
                halfvec_deltas.append(abs(cosines[0] - cosines[1]))
                if band_of(cosines[0]) != band_of(cosines[1]):
                    halfvec_changes.append({"pair": index, "vector": round(cosines[0], 6),
                                            "halfvec": round(cosines[1], 6)})
            if index and index % 250 == 0:
                print(f"  {'gate' if gate else 'no gate'}: {index}/{len(pairs)} pairs", file=sys.stderr)
    elapsed = time.perf_counter() - started
    project_delete(project=project)
    bands = {}
    for low, high in BANDS:
        name = band_name(low, high)
        counts = tallies[name]
        total = sum(counts.values())
        bands[name] = {"pairs": total, **{a: counts[a] for a in ("skipped", "superseded", "created")}}
    low_pairs = sum(bands[band_name(lo, hi)]["pairs"] for lo, hi in BANDS if hi <= 3.0)
    low_retired = sum(bands[band_name(lo, hi)]["skipped"] + bands[band_name(lo, hi)]["superseded"]
                      for lo, hi in BANDS if hi <= 3.0)
    high = bands[band_name(4.5, 5.01)]
    return {
        "bands": bands,
        "false_retire_rate": round(low_retired / low_pairs, 4) if low_pairs else None,
        "near_duplicate_skip_rate": round(high["skipped"] / high["pairs"], 4) if high["pairs"] else None,
        "seconds": round(elapsed, 1),
        **({"halfvec": {"pairs": len(halfvec_deltas), "max_cosine_delta": round(max(halfvec_deltas), 6),
                        "threshold_side_changes": halfvec_changes}} if halfvec_deltas else {}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--split", default="dev", choices=["dev", "train", "test"])
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--decisions", type=Path, metavar="FILE",
                        help="also write every pair's decision (action, reason, similarity) as JSON lines")
    parser.add_argument("--halfvec", action="store_true",
                        help="also compare each pair's cosine in halfvec (half precision) with the stored vectors'")
    parser.add_argument("--no-gate-compare", action="store_true", help="Only run with the current setting.")
    args = parse_args(parser)
    if not (args.data / "paraphrase" / f"sts-{args.split}.csv").is_file():
        parser.error(f"no sts-{args.split}.csv in {args.data / 'paraphrase'}")
    setup_django()
    pairs = load_pairs(args.data, args.split, args.limit)
    print(f"STS {args.split}: {len(pairs)} pairs, default thresholds 0.95 / 0.90, all-MiniLM-L6-v2 (int8 ONNX)")
    modes = [True] if args.no_gate_compare else [False, True]
    decisions: list[dict[str, Any]] = []
    results = {("gate" if gate else "no_gate"): run(pairs, gate=gate, decisions=decisions, halfvec=args.halfvec)
               for gate in modes}
    if args.decisions:
        args.decisions.write_text("".join(json.dumps(row) + "\n" for row in decisions))
    for mode, result in results.items():
        print(f"\n{mode.replace('_', ' ')} (changed-detail gate {'on' if mode == 'gate' else 'off'}):")
        rows = []
        for band, counts in result["bands"].items():
            total = counts["pairs"] or 1
            rows.append([band, counts["pairs"], f"{counts['skipped'] / total:.1%}",
                         f"{counts['superseded'] / total:.1%}", f"{counts['created'] / total:.1%}"])
        print_table(["STS band", "pairs", "skipped", "superseded", "created"], rows)
        print(f"false-retire rate (score < 3 skipped or superseded): {result['false_retire_rate']:.2%}")
        print(f"near-duplicates (>= 4.5) skipped: {result['near_duplicate_skip_rate']:.2%}   ({result['seconds']} s)")
        if "halfvec" in result:
            half = result["halfvec"]
            print(f"halfvec: {half['pairs']} pairs, max |cosine change| {half['max_cosine_delta']}, "
                  f"{len(half['threshold_side_changes'])} cross a threshold: {half['threshold_side_changes']}")
    write_results(f"dedup-{args.split}", {"split": args.split, "pairs": len(pairs), "results": results})


if __name__ == "__main__":
    main()
