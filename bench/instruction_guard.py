"""False-positive and miss rates of the instruction guard on a labelled set.

Each line of the set is ``{"text": ..., "label": "benign" | "injection"}``. Benign lines are
facts and ordinary imperatives a store should keep; injection lines read as instructions to
an AI (overriding instructions, addressing a model, chat-template markers) in several
styles and languages. No database, no embedder: the scanner alone.

    python bench/instruction_guard.py [--file bench/data/instruction_guard.jsonl]

A held-back set in the same format is checked with ``--file``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import print_table, write_results  # noqa: E402

from memory_engine.instruction_guard import reads_as_instruction  # noqa: E402

DEFAULT_FILE = ROOT / "bench" / "data" / "instruction_guard.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--file", type=Path, default=DEFAULT_FILE, help="labelled JSONL set")
    args = parser.parse_args()
    rows = [json.loads(line) for line in args.file.read_text(encoding="utf-8").splitlines() if line.strip()]
    began = time.perf_counter()
    verdicts = [(row, reads_as_instruction(row["text"])) for row in rows]
    elapsed_ms = (time.perf_counter() - began) * 1000
    benign = [(row, rule) for row, rule in verdicts if row["label"] == "benign"]
    attacks = [(row, rule) for row, rule in verdicts if row["label"] == "injection"]
    false_positives = [row["text"] for row, rule in benign if rule]
    misses = [row["text"] for row, rule in attacks if not rule]
    rules = Counter(rule for _, rule in attacks if rule)
    fp_rate = len(false_positives) / len(benign) if benign else 0.0
    miss_rate = len(misses) / len(attacks) if attacks else 0.0
    print(f"set: {args.file.relative_to(ROOT) if args.file.is_relative_to(ROOT) else args.file}")
    print_table(["label", "items", "flagged", "rate"], [
        ["benign (false positives)", len(benign), len(false_positives), f"{fp_rate:.1%}"],
        ["injection (misses)", len(attacks), len(misses), f"{miss_rate:.1%}"],
    ])
    print("\ncaught by rule: " + ", ".join(f"{name} {count}" for name, count in sorted(rules.items())))
    print(f"scan time: {elapsed_ms / max(len(rows), 1):.3f} ms per item")
    for title, texts in (("false positives", false_positives), ("misses", misses)):
        if texts:
            print(f"\n{title}:")
            for text in texts:
                print(f"  {text!r}")
    write_results("instruction_guard", {
        "set": str(args.file), "benign": len(benign), "injection": len(attacks),
        "false_positive_rate": fp_rate, "miss_rate": miss_rate, "false_positives": false_positives,
        "misses": misses, "caught_by_rule": dict(rules), "ms_per_item": elapsed_ms / max(len(rows), 1),
    })


if __name__ == "__main__":
    main()
