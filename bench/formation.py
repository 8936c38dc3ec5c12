"""Formation speed: a declaration of many memories applied to a new store (``memory_engine_apply``).

Measures, in one run on one machine, with the default embedder:
  * the wall time of ``apply_declaration`` for N new texts in a new store, and the part of it
    spent in embedder calls (their number too);
  * the raw embedder on exactly the same texts, EMBEDDING_BATCH_SIZE per call and one per call,
    so the apply's throughput reads as a share of the embedder's own;
  * the same declaration applied again (every memory kept: no embedder call).

With ``--baseline REF`` each round also applies the declaration with ``memory_engine.services.
formation`` as it was at git REF (loaded beside today's), the order alternating per round.

    python bench/formation.py [--data DIR] [--texts 1000] [--rounds 3] [--baseline REF]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _setup  # noqa: E402
from _setup import module_at, parse_args, print_table, setup_django, write_results  # noqa: E402
from write import sentences  # noqa: E402


def apply_once(apply: Any, texts: list[str], label: str) -> dict[str, float]:
    """Apply a declaration of ``texts`` to a new project's new store, then once more; seconds."""
    from memory_engine.models import Project
    from memory_engine.services.stores import project_delete

    project = Project.objects.create(name=f"bench-formation-{label}")
    data = {"stores": [{"name": "declared", "memories": texts}]}
    _setup.EMBED_SECONDS.clear()
    started = time.perf_counter()
    report = apply(project=project, data=data)
    seconds = time.perf_counter() - started
    assert len(report.created) == len(texts), (len(report.created), len(texts))
    embed, calls = sum(_setup.EMBED_SECONDS), len(_setup.EMBED_SECONDS)
    started = time.perf_counter()
    again = apply(project=project, data=data)
    kept = time.perf_counter() - started
    assert len(again.kept) == len(texts)
    project_delete(project=project)
    return {"seconds": seconds, "embed_seconds": embed, "embed_calls": calls, "kept_seconds": kept}


def raw_embedder(texts: list[str], batch: int) -> float:
    from memory_engine.providers.embeddings import require_embedding_provider

    provider = require_embedding_provider()
    started = time.perf_counter()
    for start in range(0, len(texts), batch):
        provider.embed_documents(texts[start:start + batch])
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--texts", type=int, default=1000, help="memories in the declaration (STS sentences)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", metavar="REF",
                        help="also apply with the formation module as it was at git REF, alternating per round")
    args = parse_args(parser)
    setup_django("bench_formation")
    from django.conf import settings
    from django.test import override_settings

    from memory_engine.conf import engine_settings
    from memory_engine.models import Project
    from memory_engine.services.formation import apply_declaration
    from memory_engine.services.stores import project_delete

    texts = sentences(args.data, args.texts)
    config = {**settings.MEMORY_ENGINE,
              "EMBEDDING": {**settings.MEMORY_ENGINE["EMBEDDING"], "PROVIDER": _setup.timing_provider_path()}}
    with override_settings(MEMORY_ENGINE=config):
        for old in Project.objects.filter(name__startswith="bench-formation-"):
            project_delete(project=old)
        versions = {"today": apply_declaration}
        if args.baseline:
            old_module = module_at(args.baseline, "memory_engine/services/formation.py",
                                   "memory_engine.services._formation_baseline", "memory_engine.services")
            versions[args.baseline] = old_module.apply_declaration
        batch = engine_settings.EMBEDDING_BATCH_SIZE
        raw_embedder(texts[:64], batch)  # load the model
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in versions}
        raw: dict[str, list[float]] = {"batch": [], "one": []}
        for round_ in range(args.rounds):
            order = list(versions) if round_ % 2 == 0 else list(reversed(versions))
            for name in order:
                runs[name].append(apply_once(versions[name], texts, f"{name}-{round_}"))
                print(f"round {round_ + 1}: {name} {runs[name][-1]['seconds']:.2f} s", file=sys.stderr)
            raw["batch"].append(raw_embedder(texts, batch))
            raw["one"].append(raw_embedder(texts, 1))

    raw_batch, raw_one = statistics.median(raw["batch"]), statistics.median(raw["one"])
    rows, results = [], {}
    for name, measured in runs.items():
        seconds = statistics.median(r["seconds"] for r in measured)
        embed = statistics.median(r["embed_seconds"] for r in measured)
        result: dict[str, Any] = {
            "apply_seconds": round(seconds, 3),
            "embed_seconds": round(embed, 3),
            "embed_calls": measured[0]["embed_calls"],
            "kept_seconds": round(statistics.median(r["kept_seconds"] for r in measured), 3),
            "memories_per_second": round(len(texts) / seconds, 1),
            "share_of_raw_batched": round(raw_batch / seconds, 4),
            "share_of_raw_one_by_one": round(raw_one / seconds, 4),
            "rounds": measured,
        }
        results[name] = result
        rows.append([name, result["embed_calls"], result["apply_seconds"], result["embed_seconds"],
                     round(seconds - embed, 3), result["memories_per_second"],
                     f"{result['share_of_raw_batched']:.1%}", f"{result['share_of_raw_one_by_one']:.1%}",
                     result["kept_seconds"]])
    print(f"\nformation of {len(texts):,} new memories into a new store, median of {args.rounds} rounds; "
          f"raw embedder on the same texts: {raw_batch:.2f} s in calls of {batch}, {raw_one:.2f} s one per call")
    print_table(["formation", "embedder calls", "apply s", "in the embedder s", "the rest s", "memories/s",
                 f"raw (calls of {batch}) / apply", "raw (one per call) / apply", "applied again s"], rows)
    write_results("formation", {"texts": len(texts), "rounds": args.rounds, "embedding_batch_size": batch,
                                "raw_batched_seconds": round(raw_batch, 3), "raw_one_by_one_seconds": round(raw_one, 3),
                                "formation": results})


if __name__ == "__main__":
    main()
