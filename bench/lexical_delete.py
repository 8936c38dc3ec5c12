"""What a delete of content rows costs the lexical statistics' trigger, against the trigger
function of another commit, in one run.

The trigger (memory_engine.lexical_statistics) takes a deleted row's figures away from its
project's statistics and term counts in the deleting transaction. This loads n content rows of one
store (30 words each from a Zipf-distributed vocabulary of 5,000, so terms repeat as in prose),
deletes them in one statement, and times the delete, with the installed function and with the
function of ``--baseline`` (a git ref), alternating, several times each.

    python bench/lexical_delete.py [--baseline 382bc1d] [--sizes 1,100,2000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import ROOT, print_table, setup_django, write_results  # noqa: E402

WORDS = 30
VOCABULARY = 5000


def function_at(ref: str) -> ModuleType:
    """memory_engine/lexical_statistics.py as it was at ``ref``, loaded as a module of its own."""
    source = subprocess.run(["git", "show", f"{ref}:memory_engine/lexical_statistics.py"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout
    path = Path(tempfile.mkdtemp()) / "lexical_statistics_baseline.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("lexical_statistics_baseline", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", default="382bc1d", help="the git ref whose trigger function to compare with")
    parser.add_argument("--sizes", default="1,100,2000", help="rows per delete, comma-separated")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    setup_django("bench_lexical_delete", fresh=True)
    from django.db import connection, transaction

    from memory_engine import lexical_statistics
    from memory_engine.models import MemoryStore, Project

    baseline = function_at(args.baseline)
    rng = random.Random(73)
    vocabulary = [f"{chr(97 + i % 26)}{i:04d}x" for i in range(VOCABULARY)]
    weights = [1 / (rank + 1) for rank in range(VOCABULARY)]
    project = Project.objects.create(name="lexical delete")
    store = MemoryStore.objects.create(project=project, name="rows")
    loaded = 0

    def load(n: int) -> None:
        nonlocal loaded
        rows = []
        for _ in range(n):
            loaded += 1
            text = " ".join(rng.choices(vocabulary, weights, k=WORDS))
            rows.append((f"mc_bench_{loaded}", store.id, project.id, f"h{loaded}", text))
        with connection.cursor() as cursor:
            cursor.executemany("INSERT INTO memory_engine_memorycontent (id, store_id, project_id, content_hash, text, "
                               "embedding_model, created_at) VALUES (%s, %s, %s, %s, %s, '', now())", rows)

    def delete_ms(module: Any, n: int) -> float:
        with connection.cursor() as cursor:
            cursor.execute(module._apply_function("english"))
        load(n)
        started = time.perf_counter()
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("DELETE FROM memory_engine_memorycontent WHERE store_id = %s", [store.id])
        return (time.perf_counter() - started) * 1000

    results: dict[str, Any] = {"baseline": args.baseline, "words": WORDS, "vocabulary": VOCABULARY, "sizes": {}}
    rows = []
    try:
        for n in (int(size) for size in args.sizes.split(",")):
            times: dict[str, list[float]] = {"baseline": [], "current": []}
            for _ in range(args.repeats):
                times["baseline"].append(delete_ms(baseline, n))
                times["current"].append(delete_ms(lexical_statistics, n))
            medians = {name: round(statistics.median(values), 2) for name, values in times.items()}
            results["sizes"][n] = {name: {"median_ms": medians[name], "runs_ms": [round(v, 2) for v in values]}
                                   for name, values in times.items()}
            rows.append([n, medians["baseline"], medians["current"],
                         f"{medians['current'] / medians['baseline']:.2f}x"])
            print(f"  {n} rows done", flush=True)
    finally:
        with connection.cursor() as cursor:  # the installed function back
            cursor.execute(lexical_statistics._apply_function("english"))
    print()
    print_table(["rows deleted", f"{args.baseline} median ms", "checkout median ms", "ratio"], rows)
    write_results("lexical-delete", results)


if __name__ == "__main__":
    main()
