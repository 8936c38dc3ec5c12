"""Raw throughput of the default ONNX embedder: one text per call against calls of a batch.

SciFact abstracts (title + text; ~50 to over 256 tokens, so padding matters) embedded
one per call and in calls of ``--batch`` texts, with the provider's sub-batches capped at
each ``--budgets`` padded-token budget (``TOKEN_BUDGET``) and once uncapped, which is the
provider before issue 20's length-aware batching (each call of up to BATCH_SIZE texts padded
to its longest). All variants run on the same block of texts before the next block, in an
order that rotates per block, so load on a shared machine hits them alike. No database.

    python bench/embed.py [--data DIR] [--docs 320] [--batch 32] [--budgets 256,512,1024,2048] [--titles]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's memory_engine
from _setup import parse_args, print_table, write_results  # noqa: E402
from ingest import scifact_texts  # noqa: E402

UNCAPPED = 10**9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=320, help="SciFact abstracts to embed.")
    parser.add_argument("--batch", type=int, default=32, help="Texts per embed_documents call.")
    parser.add_argument("--budgets", default="256,512,1024,2048", help="TOKEN_BUDGET values to compare.")
    parser.add_argument("--titles", action="store_true", help="Embed the titles only (short texts).")
    args = parse_args(parser)

    import memory_engine
    from memory_engine.providers.embeddings.onnx import OnnxEmbeddingProvider

    print(f"memory_engine from {Path(memory_engine.__file__).parent}")

    texts = scifact_texts(args.data, args.docs)
    if args.titles:
        texts = [text.split("\n\n", 1)[0] for text in texts]
    budgets = [int(b) for b in args.budgets.split(",") if b]
    providers: dict[str, Any] = {"one per call": OnnxEmbeddingProvider()}
    providers[f"calls of {args.batch}, padded to longest (before)"] = OnnxEmbeddingProvider(
        options={"TOKEN_BUDGET": UNCAPPED})
    for budget in budgets:
        providers[f"calls of {args.batch}, TOKEN_BUDGET {budget}"] = OnnxEmbeddingProvider(
            options={"TOKEN_BUDGET": budget})
    for provider in providers.values():
        provider.embed_documents(["warm up the model"] * 4)
    tokens = providers["one per call"].count_tokens(texts)

    seconds = dict.fromkeys(providers, 0.0)
    for first in range(0, len(texts), args.batch):
        block = texts[first:first + args.batch]
        names = list(providers)
        shift = (first // args.batch) % len(names)  # each variant takes each place in turn
        for name in names[shift:] + names[:shift]:
            provider = providers[name]
            started = time.perf_counter()
            if name == "one per call":
                for text in block:
                    provider.embed_documents([text])
            else:
                provider.embed_documents(block)
            seconds[name] += time.perf_counter() - started

    single = seconds["one per call"]
    rows = [{"variant": name, "seconds": round(s, 3), "texts_per_s": round(len(texts) / s, 2),
             "vs_one_per_call": round(single / s, 3)} for name, s in seconds.items()]
    tokens_sorted = sorted(tokens)
    kind = "titles" if args.titles else "abstracts"
    print(f"\n{len(texts)} SciFact {kind}, {sum(tokens)} tokens (median {tokens_sorted[len(tokens) // 2]}, "
          f"max {tokens_sorted[-1]}; the model reads at most 256), load average {os.getloadavg()[0]:.1f}\n")
    print_table(["variant", "s", "texts/s", "vs one per call"],
                [[r["variant"], r["seconds"], r["texts_per_s"], f"{r['vs_one_per_call']:.2f}x"] for r in rows])
    write_results(f"embed-{kind}", {"docs": len(texts), "batch": args.batch, "load_average": os.getloadavg(),
                                     "rows": rows})


if __name__ == "__main__":
    main()
