"""The instruction guard's screen: what share of ordinary text it clears without the classifier,
and that it clears no injection.

At a write the guard judges the text once and stores its finding (docs/security.md, *Judged
once*). The screen reads the vector the write already made with the engine's default embedder
(all-MiniLM-L6-v2) through a head fitted on the guard's exemplars; a plain English text with no
rule hit and no cue that scores below SCREEN_BAR there skips the multilingual classifier. This
bench judges, for each set, every text as a write does (``findings`` with the text's vector) and
reports how many texts each step decided, and the per-text cost with the screen and without it
(the classifier alone), caches emptied first.

Sets: the guard's labelled sets (the injections: the screen must clear none of them; their
benign texts), and with ``--data`` ordinary text of the shared data: STS sentences (dev: the
bar was chosen on a sample of it; train: not), LoCoMo turns (the first 1,500 looked at; the
rest not), SciFact abstract sentences (not).

    python bench/guard_screen.py [--data DIR] [--sample N]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import print_table, write_results  # noqa: E402
from instruction_guard import SETS, load, ordinary_texts  # noqa: E402

import memory_engine.instruction_guard as guard  # noqa: E402
from memory_engine.instruction_guard import classifier  # noqa: E402
from memory_engine.providers.embeddings.onnx import OnnxEmbeddingProvider  # noqa: E402


def scifact_sentences(data: Path, limit: int) -> list[str]:
    sentences: list[str] = []
    for line in (data / "scifact" / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        text = json.loads(line)["text"]
        sentences.extend(s.strip() for s in text.replace("? ", ". ").split(". ") if len(s.split()) >= 4)
        if len(sentences) >= limit:
            break
    return sentences[:limit]


def empty_caches() -> None:
    guard._assessed.clear()
    classifier.clear_cache()


def judge(texts: list[str], vectors: list[list[float]], *, screen: bool) -> tuple[list[guard.Finding], list[float]]:
    """Each text judged alone, as a write judges it; (findings, ms per text)."""
    empty_caches()
    found, timings = [], []
    for text, vector in zip(texts, vectors, strict=True):
        started = time.perf_counter()
        found.append(guard.findings([[text]], vectors={text: vector} if screen else None)[0])
        timings.append((time.perf_counter() - started) * 1000)
    return found, timings


def measure(name: str, texts: list[str], embedder: OnnxEmbeddingProvider, injections: bool) -> dict[str, Any]:
    print(f"  {name}: {len(texts)} texts", file=sys.stderr, flush=True)
    vectors = embedder.embed_documents(texts)
    screened, with_screen = judge(texts, vectors, screen=True)
    _, without = judge(texts, vectors, screen=False)
    by = {step: sum(f.by == step for f in screened) for step in ("rules", "screen", "classifier")}
    cleared = [t for t, f in zip(texts, screened, strict=True) if f.by == "screen"]
    return {"texts": len(texts), "injections": injections, "decided_by": by,
            "screen_share": by["screen"] / len(texts) if texts else 0.0,
            "ms_p50": statistics.median(with_screen), "ms_mean": statistics.fmean(with_screen),
            "classifier_only_ms_p50": statistics.median(without),
            "classifier_only_ms_mean": statistics.fmean(without),
            "cleared_injections": cleared if injections else []}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, metavar="DIR", help="the shared evaluation data (ordinary text)")
    parser.add_argument("--sample", type=int, default=600, help="texts drawn from each ordinary corpus")
    args = parser.parse_args()
    rng = random.Random(7)
    corpora: dict[str, tuple[list[str], bool]] = {}
    for name, path in SETS.items():
        if path.exists():
            rows = load(path)
            corpora[f"{name} injections"] = ([r["text"] for r in rows if r["label"] != "benign"], True)
            corpora[f"{name} benign"] = ([r["text"] for r in rows if r["label"] == "benign"], False)
    if args.data:
        ordinary = ordinary_texts(args.data)
        ordinary["scifact sentences"] = scifact_sentences(args.data, 5000)
        for name, texts in ordinary.items():
            corpora[name] = (rng.sample(texts, min(args.sample, len(texts))), False)
    embedder = OnnxEmbeddingProvider(model=classifier.SCREEN_MODEL, dimensions=384, options={})
    classifier.classify(["warm up the classifier"])
    results = {name: measure(name, texts, embedder, injections) for name, (texts, injections) in corpora.items()}
    print_table(["set", "texts", "rules", "screen", "classifier", "screen share", "ms p50", "ms mean",
                 "classifier-only ms mean", "injections cleared"],
                [[name, r["texts"], r["decided_by"]["rules"], r["decided_by"]["screen"],
                  r["decided_by"]["classifier"], f"{r['screen_share']:.1%}", f"{r['ms_p50']:.1f}",
                  f"{r['ms_mean']:.1f}", f"{r['classifier_only_ms_mean']:.1f}",
                  len(r["cleared_injections"]) if r["injections"] else "-"]
                 for name, r in results.items()])
    for name, r in results.items():
        for text in r["cleared_injections"]:
            print(f"  CLEARED ({name}): {text}")
    print(f"\nwrote {write_results('guard_screen', {'screen_bar': guard.SCREEN_BAR, 'sets': results})}")


if __name__ == "__main__":
    main()
