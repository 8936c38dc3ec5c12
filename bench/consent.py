"""Accuracy of the consent classifier per category, on labelled memories.

Two sets in the repository, one line each ``{"text": ..., "category": ...}`` (the category the
memory should get when its writer claims none):

* ``tests/data/consent/labelled.jsonl`` (150, 25 per category): the development set, read while
  the PII patterns were written;
* ``tests/data/consent/heldout.jsonl`` (60, 10 per category): written before the classifier was
  run on it and never tuned on.

Both are separate from the exemplars the embedding pass is built from
(memory_engine/consent_categories/exemplars.py). For each set: accuracy per category of the PII pass alone,
the embedding pass alone and both (what a write gets), and the over-upgrades (a memory placed in
a more sensitive category than its label). ``--sweep`` chooses the embedding pass's settings
from the exemplars alone (leave-one-out: each exemplar classified by centroids built without it),
never from the labelled sets. The default embedder, no database.

    python bench/consent.py [--sweep]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import print_table, write_results  # noqa: E402

SETS = {"labelled (dev)": ROOT / "tests/data/consent/labelled.jsonl",
        "held-out": ROOT / "tests/data/consent/heldout.jsonl"}


def load(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def evaluate(rows: list[dict[str, str]], vectors: list[Any], index: Any, min_similarity: float) -> dict[str, Any]:
    from memory_engine.consent_categories import SENSITIVITY, classify, rank, upgrade
    from memory_engine.consent_categories.classifier import embedding_finding
    from memory_engine.consent_categories.pii import pii_findings

    modes: dict[str, list[str]] = {"pii": [], "embedding": [], "both": []}
    for row, vector in zip(rows, vectors, strict=True):
        modes["pii"].append(upgrade(*(f.category for f in pii_findings(row["text"]))))
        found = embedding_finding(vector, index, min_similarity=min_similarity)
        modes["embedding"].append(upgrade(found.category if found else None))
        modes["both"].append(classify(row["text"], vector=vector, index=index, min_similarity=min_similarity).category)
    out: dict[str, Any] = {}
    for mode, predicted in modes.items():
        right, total = Counter(), Counter()
        over = []
        for row, got in zip(rows, predicted, strict=True):
            total[row["category"]] += 1
            right[row["category"]] += got == row["category"]
            if rank(got) > rank(row["category"]):
                over.append({"text": row["text"], "label": row["category"], "got": got})
        out[mode] = {
            "per_category": {c: [right[c], total[c]] for c in SENSITIVITY},
            "accuracy": sum(right.values()) / len(rows),
            "over_upgrades": over,
            "misses": [{"text": r["text"], "label": r["category"], "got": g}
                       for r, g in zip(rows, predicted, strict=True) if rank(g) < rank(r["category"])],
        }
    return out


def sweep(embed: Any, model: str) -> list[list[Any]]:
    """Leave-one-out over the exemplars: each classified by the centroids of the others."""
    import numpy as np

    from memory_engine.consent_categories import ExemplarIndex, classify, rank
    from memory_engine.consent_categories.exemplars import EXEMPLARS

    items = [(category, text) for category, texts in EXEMPLARS.items() for text in texts]
    vectors = np.asarray(embed([text for _, text in items]), dtype=np.float32)
    cache = {tuple(text for _, text in items)[i]: vectors[i] for i in range(len(items))}
    rows = []
    for threshold in (0.0, 0.1, 0.2, 0.3, 0.35, 0.4):
        right = over = 0
        for category, text in items:
            others = {c: [t for t in ts if t != text] for c, ts in EXEMPLARS.items()}
            index = ExemplarIndex.build(lambda texts: [cache[t] for t in texts], model=model, exemplars=others)
            got = classify(text, vector=cache[text], index=index, min_similarity=threshold).category
            right += got == category
            over += rank(got) > rank(category)
        rows.append([threshold, f"{right / len(items):.3f}", f"{over / len(items):.3f}"])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sweep", action="store_true", help="choose min_similarity by leave-one-out on the exemplars")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
    import django

    django.setup()
    from memory_engine.consent_categories import SENSITIVITY, ExemplarIndex, classify
    from memory_engine.providers.embeddings.onnx import OnnxEmbeddingProvider
    from memory_engine.services.memories.consent_category import consent_min_similarity

    provider = OnnxEmbeddingProvider(model="all-MiniLM-L6-v2", dimensions=384)
    embed = provider.embed_documents
    min_similarity = consent_min_similarity()
    if args.sweep:
        print("leave-one-out over the exemplars (min_similarity, accuracy, over-upgrades):")
        print_table(["min_similarity", "accuracy", "over-upgrades"], sweep(embed, provider.model_name))
        print()
    index = ExemplarIndex.build(embed, model=provider.model_name)
    results: dict[str, Any] = {"model": provider.model_name, "min_similarity": min_similarity, "sets": {}}
    for name, path in SETS.items():
        rows = load(path)
        began = time.perf_counter()
        vectors = embed([row["text"] for row in rows])
        found = evaluate(rows, vectors, index, min_similarity)
        per_item_ms = (time.perf_counter() - began) * 1000 / len(rows)
        began = time.perf_counter()  # what a write pays: its vector is made (or read) anyway
        for row, vector in zip(rows, vectors, strict=True):
            classify(row["text"], vector=vector, index=index, min_similarity=min_similarity)
        classify_ms = (time.perf_counter() - began) * 1000 / len(rows)
        print(f"{name}: {path.relative_to(ROOT)} ({len(rows)} memories, {per_item_ms:.1f} ms each with embedding, "
              f"{classify_ms:.2f} ms the classifier alone on the vector)")
        table = []
        for category in SENSITIVITY:
            table.append([category, *(f"{found[m]['per_category'][category][0]}/{found[m]['per_category'][category][1]}"
                                       for m in ("pii", "embedding", "both"))])
        table.append(["all", *(f"{found[m]['accuracy']:.1%}" for m in ("pii", "embedding", "both"))])
        table.append(["over-upgrades", *(str(len(found[m]["over_upgrades"])) for m in ("pii", "embedding", "both"))])
        print_table(["category", "PII pass", "embedding pass", "both"], table)
        for kind in ("over_upgrades", "misses"):
            if found["both"][kind]:
                print(f"  {kind.replace('_', '-')} (both):")
                for item in found["both"][kind]:
                    print(f"    {item['label']} -> {item['got']}: {item['text']}")
        print()
        results["sets"][name] = {**found, "ms_with_embedding": per_item_ms, "ms_classifier": classify_ms}
    write_results("consent", results)


if __name__ == "__main__":
    main()
