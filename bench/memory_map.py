"""The memory map's layout: how well it keeps each memory's neighbours, and what it costs.

Sentences of the STS Benchmark (``paraphrase/sts-*.csv`` of the data directory) stand in for a
store's memories, embedded with the default model. For a sample: trustworthiness@10 (1: every
point's 10 nearest in the plane are among its 10 nearest by cosine) of PCA alone, of the layout
the map uses (PCA refined over the 10-nearest-neighbour graph, memory_engine.projection.layout_2d)
and of a random projection (the floor); then the time of a map's computation (layout and
clusters, no database) at several sizes.

    python bench/memory_map.py [--data DIR] [--sample 2000] [--sizes 500,2000,5000]
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import ROOT, parse_args, print_table, write_results  # noqa: E402


def sentences(data: Path, limit: int) -> list[str]:
    found: dict[str, None] = {}
    for split in ("dev", "train"):
        path = data / "paraphrase" / f"sts-{split}.csv"
        if not path.exists():
            continue
        with open(path, encoding="utf-8") as handle:
            for row in csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE):
                for text in row[5:7]:
                    found.setdefault(text.strip(), None)
                if len(found) >= limit:
                    return list(found)[:limit]
    return list(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sample", type=int, default=2000, help="sentences for trustworthiness (O(n²))")
    parser.add_argument("--sizes", default="500,2000,5000", help="map sizes to time")
    args = parse_args(parser)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    import numpy as np

    from memory_engine.projection import choose_k, kmeans, layout_2d, pca_2d, trustworthiness
    from memory_engine.providers.embeddings.onnx import OnnxEmbeddingProvider

    provider = OnnxEmbeddingProvider(model="all-MiniLM-L6-v2", dimensions=384)
    sizes = [int(size) for size in args.sizes.split(",")]
    texts = sentences(args.data, max([args.sample, *sizes]))
    vectors = np.asarray(provider.embed_documents(texts), dtype=np.float32)
    sample = vectors[:args.sample]
    rng = np.random.default_rng(0)
    layouts = {"random projection": sample @ rng.normal(size=(sample.shape[1], 2)), "PCA": pca_2d(sample)[0],
               "PCA + neighbour layout (the map)": layout_2d(sample)[0]}
    quality = [[name, f"{trustworthiness(sample, coords, 10):.3f}"] for name, coords in layouts.items()]
    print(f"trustworthiness@10 on {len(sample)} STS sentences:")
    print_table(["layout", "trustworthiness@10"], quality)

    timings: list[list[Any]] = []
    for size in sizes:
        part = vectors[:size]
        if len(part) < size:  # not enough sentences: the rest jittered copies (timing only)
            extra = part[rng.integers(len(part), size=size - len(part))]
            part = np.vstack([part, extra + 0.05 * rng.normal(size=extra.shape).astype(np.float32)])
        began = time.perf_counter()
        coords, method = layout_2d(part)
        laid = time.perf_counter() - began
        kmeans(part, choose_k(size))
        timings.append([size, method["projection"], f"{laid:.2f}", f"{time.perf_counter() - began:.2f}"])
    print("\ncomputing a map (layout, then k-means), seconds:")
    print_table(["memories", "projection", "layout s", "layout + clusters s"], timings)
    write_results("memory_map", {"trustworthiness": dict(quality), "timings": timings})


if __name__ == "__main__":
    main()
