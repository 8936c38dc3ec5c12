"""Relevance of what is injected: the relevance model of ``knowledge_search`` on the dev data.

    .venv/bin/python bench/relevance.py                      # evaluate the model in the code
    .venv/bin/python bench/relevance.py --fit                # fit it again on the train half
    .venv/bin/python bench/relevance.py --data /path/to/shared/data --limit-questions 200

Data (docs/benchmarks.md, "Relevance"): every LoCoMo dev turn is a memory (one store per
conversation, as bench/eval_retrieval.py writes them), every SciFact abstract a document.
On-topic questions: LoCoMo questions of categories 1-4 in their conversation's store (evidence:
the turns their ``evidence`` names) and SciFact train claims over the corpus (evidence: the train
qrels). Off-topic questions: LoCoMo questions asked of the SciFact corpus and SciFact claims asked
of a LoCoMo conversation; nothing there is relevant.

Split: train = the first 4 LoCoMo conversations and the even SciFact train claims (and the
off-topic questions made of them); test = the other 4 conversations and the odd claims. The
model, its threshold and its strong bar are fitted on train only (``--fit``); both halves are
reported.

Measured through the real path, in one run: each question searched as the API does (limit 5,
every hit: recall@5) and pushed through ``inject_knowledge`` (what a model gets): evidence
recall of what is injected against recall@5, items injected per question, the share injecting
nothing, and the evidence grades with their precision (the first injected hit is evidence).
Prints a table and writes bench/results/relevance.json. Runs in its own database
(``bench_relevance`` on the configured server).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from _setup import parse_args, print_table, use_lexical_backend, write_results  # noqa: E402

DB_NAME = "bench_relevance"
#: The first TRAIN_CONVERSATIONS LoCoMo conversations are the train half.
TRAIN_CONVERSATIONS = 4
#: Hits recorded per question for fitting (features are computed over the whole fused list).
DEPTH = 20
#: The injection limit the targets are measured at (knowledge_config's default).
LIMIT = 5


def questions(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every question of the run: set, split, text, where it is asked and what is relevant."""
    from eval_retrieval import evidence_of, read_jsonl, read_qrels

    conversations = json.loads((args.data / "locomo" / "locomo-dev.json").read_text())
    conv_ids = [c["sample_id"] for c in conversations]
    out: list[dict[str, Any]] = []
    for n, conv in enumerate(conversations):
        split = "train" if n < TRAIN_CONVERSATIONS else "test"
        for qa in conv["qa"]:
            evidence = evidence_of(qa)
            if qa.get("category") in (1, 2, 3, 4) and evidence:
                out.append({"set": "locomo", "split": split, "text": qa["question"], "store": conv["sample_id"],
                            "relevant": sorted(evidence)})
    root = args.data / "scifact"
    qrels = read_qrels(root / "qrels" / "train.tsv")
    claims = {q["_id"]: q["text"] for q in read_jsonl(root / "queries.jsonl") if q["_id"] in qrels}
    for n, qid in enumerate(sorted(claims, key=int)):
        split = "train" if n % 2 == 0 else "test"
        out.append({"set": "scifact", "split": split, "text": claims[qid], "store": None,
                    "relevant": sorted(qrels[qid])})
    # Off-topic: each half's LoCoMo questions over the corpus, its claims over its conversations.
    rng = random.Random(63)
    on_topic = list(out)
    for q in on_topic:
        if q["set"] == "locomo":
            out.append({**q, "set": "off:locomo→scifact", "store": None, "relevant": []})
        else:
            half = conv_ids[:TRAIN_CONVERSATIONS] if q["split"] == "train" else conv_ids[TRAIN_CONVERSATIONS:]
            out.append({**q, "set": "off:scifact→locomo", "store": rng.choice(half), "relevant": []})
    if args.limit_questions:
        by_set: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        for q in out:
            by_set[(q["set"], q["split"])].append(q)
        out = [q for group in by_set.values() for q in rng.sample(group, min(len(group), args.limit_questions))]
    return out


def load(args: argparse.Namespace, provider: Any) -> dict[str, Any]:
    """The SciFact corpus as documents and the LoCoMo turns as memories (bench/eval_retrieval.py's loaders)."""
    from eval_retrieval import corpus_vectors, load_locomo, load_scifact, read_jsonl

    corpus = read_jsonl(args.data / "scifact" / "corpus.jsonl")
    vectors = corpus_vectors([f"{d['title']}\n\n{d['text']}" for d in corpus], provider)
    scifact = load_scifact("eval-scifact", corpus, vectors, provider.model_name)
    locomo = load_locomo(json.loads((args.data / "locomo" / "locomo-dev.json").read_text()), provider)
    provider.save()
    return {"scifact": scifact, **locomo}


def scope(q: dict[str, Any], loaded: dict[str, Any]) -> dict[str, Any]:
    """Where a question is asked, as knowledge_search / knowledge_config arguments."""
    if q["store"] is None:
        return {"project": loaded["scifact"], "config": {"document_paths": ["/scifact/"]}}
    return {"project": loaded["project"], "config": {"memory_store_ids": [loaded["stores"][q["store"]].pk]}}


def found_ids(hits: Any, loaded: dict[str, Any]) -> list[list[str]]:
    """Each hit's evidence ids: a memory's turn ids (one memory may stand for identical turns), a
    chunk's SciFact id."""
    out = []
    for hit in hits:
        if hit.source == "memory":
            out.append(sorted(loaded["memory_turns"].get(hit.id, ())) or [hit.id])
        else:
            out.append([hit.document_path.rsplit("/", 1)[-1]])
    return out


def collect(qs: list[dict[str, Any]], loaded: dict[str, Any]) -> list[dict[str, Any]]:
    """Each question's first DEPTH hits (every threshold off), with the relevance model's
    features of each (memory_engine.relevance.answer_features: the code the search runs)."""
    from memory_engine.knowledge_config import search_kwargs
    from memory_engine.relevance import answer_features
    from memory_engine.selectors.search import SearchRequest, knowledge_search

    records = []
    started = time.time()
    for n, q in enumerate(qs):
        where = scope(q, loaded)
        kwargs = {**search_kwargs(where["config"]), "limit": DEPTH}
        hits = knowledge_search(SearchRequest(project=where["project"], query=q["text"], **kwargs)).results
        features = answer_features(hits)
        relevant = set(q["relevant"])
        rows = []
        for i, ids in enumerate(found_ids(hits, loaded)):
            rows.append({"relevant": bool(relevant & set(ids)), "ids": ids,
                         "features": features[1][i] if features else None})
        records.append({**q, "answer": features[0] if features else None, "hits": rows})
        if (n + 1) % 1000 == 0:
            print(f"  collected {n + 1}/{len(qs)} ({time.time() - started:.0f}s)", flush=True)
    return records


# --------------------------------------------------------------------------- fitting


def logistic_fit(x: Any, y: Any, *, balanced: bool, l2: float = 1e-3, rounds: int = 60) -> Any:
    """Coefficients (intercept first) of an L2-regularised logistic regression, by Newton steps;
    ``balanced`` weighs both classes equally (the relevant hits are few: 1-2 of 20)."""
    import numpy as np

    x1 = np.hstack([np.ones((len(x), 1)), x])
    weight = np.where(y > 0.5, 0.5 / y.mean(), 0.5 / (1 - y.mean())) if balanced else np.ones(len(y))
    beta = np.zeros(x1.shape[1])
    for _ in range(rounds):
        p = 1 / (1 + np.exp(-x1 @ beta))
        hessian = x1.T @ (x1 * (weight * p * (1 - p))[:, None]) + l2 * np.eye(len(beta))
        beta -= np.linalg.solve(hessian, x1.T @ (weight * (p - y)) + l2 * beta)
    return beta


def fit(records: list[dict[str, Any]]) -> Any:
    """The gate (on-topic or not, from the answer's features) and the hit model (relevant or not,
    among the hits of on-topic questions), fitted on the train half."""
    import numpy as np

    from memory_engine.relevance import FEATURES, GATE_FEATURES, INTERCEPT, RelevanceModel

    train = [r for r in records if r["split"] == "train" and r["answer"]]
    used = [f for f in FEATURES
            if any(h["features"][f] for r in train for h in r["hits"])]  # rerank: only with a reranker
    gate_x = np.array([[r["answer"][f] for f in GATE_FEATURES] for r in train])
    gate_y = np.array([float(bool(r["relevant"])) for r in train])
    hits = [h for r in train if r["relevant"] for h in r["hits"]]
    hit_x = np.array([[h["features"][f] for f in used] for h in hits])
    hit_y = np.array([float(h["relevant"]) for h in hits])
    gate = logistic_fit(gate_x, gate_y, balanced=False)
    weights = logistic_fit(hit_x, hit_y, balanced=True)
    from memory_engine.providers.embeddings import get_embedding_provider

    provider = get_embedding_provider()
    return RelevanceModel(
        version=f"{getattr(provider, 'model_name', 'custom')}/fit-{time.strftime('%Y%m%d')}",
        gate={INTERCEPT: round(float(gate[0]), 3),
              **{f: round(float(v), 3) for f, v in zip(GATE_FEATURES, gate[1:], strict=True)}},
        weights={INTERCEPT: round(float(weights[0]), 3),
                 **{f: round(float(v), 3) for f, v in zip(used, weights[1:], strict=True)}},
        calibrated_for=getattr(provider, "model_name", ""))


def simulate(records: list[dict[str, Any]], model: Any, threshold: float) -> dict[str, dict[str, Any]]:
    """What injection would hand on with ``model`` at ``threshold``, from the recorded hits:
    per (set, split), the first LIMIT relevant hits."""
    out: dict[str, dict[str, Any]] = {}
    for key, group in grouped(records).items():
        rows = []
        for r in group:
            scores = ([] if not r["answer"] else
                      [model.gate_value(r["answer"]) * model.hit_value(h["features"]) for h in r["hits"]])
            kept = [h for h, s in zip(r["hits"], scores, strict=True) if s >= threshold][:LIMIT]
            rows.append({"relevant": r["relevant"], "top": r["hits"][:LIMIT], "kept": kept})
        out[key] = figures(rows)
    return out


def choose_threshold(records: list[dict[str, Any]], model: Any) -> float:
    """The highest threshold (0.01 steps) at which, on the train half, each on-topic set's injected
    recall stays within 0.03 of its recall@5 and at least 90% of the off-topic questions inject
    nothing."""
    train = [r for r in records if r["split"] == "train"]
    best = 0.0
    for step in range(1, 100):
        t = step / 100
        sim = simulate(train, model, t)
        on = [f for k, f in sim.items() if not k.startswith("off")]
        off = [f for k, f in sim.items() if k.startswith("off")]
        if all(f["recall_injected"] >= f["recall@5"] - 0.03 for f in on) and all(f["inject_nothing"] >= 0.9
                                                                                 for f in off):
            best = t
    return best


def choose_strong(records: list[dict[str, Any]], model: Any, threshold: float) -> float:
    """The strong bar (0.01 steps) that best tells, on the train half's on-topic questions, an
    answer whose first injected hit is relevant from one whose first is not (Youden's J: the
    share of the first kind graded strong minus the share of the second)."""
    rows = []
    for r in records:
        if r["split"] != "train" or not r["relevant"] or not r["answer"]:
            continue
        scores = [model.gate_value(r["answer"]) * model.hit_value(h["features"]) for h in r["hits"]]
        first = next(((s, h["relevant"]) for s, h in zip(scores, r["hits"], strict=True) if s >= threshold), None)
        if first is not None:
            rows.append(first)
    positives = [s for s, relevant in rows if relevant]
    negatives = [s for s, relevant in rows if not relevant]
    best, best_j = 1.0, -1.0
    for step in range(int(threshold * 100), 100):
        bar = step / 100
        j = sum(s >= bar for s in positives) / len(positives) - sum(s >= bar for s in negatives) / len(negatives)
        if j > best_j:
            best, best_j = bar, j
    return best


# --------------------------------------------------------------------------- measuring


def grouped(records: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        out[f"{r['set']} {r['split']}"].append(r)
    return dict(sorted(out.items(), key=lambda item: (item[0].startswith("off"), item[0])))


def recall(relevant: list[str], hits: list[dict[str, Any]]) -> float:
    found = {i for h in hits for i in h["ids"]}
    return len(set(relevant) & found) / len(relevant) if relevant else 0.0


def figures(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One group's figures: recall@5 and injected recall (on-topic), items injected, the share
    injecting nothing, and the evidence grades with their precision (first injected hit relevant)."""
    n = len(rows)
    out: dict[str, Any] = {"questions": n,
                           "items": round(sum(len(r["kept"]) for r in rows) / n, 3) if n else 0.0,
                           "inject_nothing": round(sum(not r["kept"] for r in rows) / n, 4) if n else 0.0}
    on_topic = [r for r in rows if r["relevant"]]
    if on_topic:
        out["recall@5"] = round(sum(recall(r["relevant"], r["top"]) for r in on_topic) / len(on_topic), 4)
        out["recall_injected"] = round(sum(recall(r["relevant"], r["kept"]) for r in on_topic) / len(on_topic), 4)
        out["recall_difference"] = round(out["recall_injected"] - out["recall@5"], 4)
    graded = bool(rows) and all("evidence" in r for r in rows)  # the measured path grades; a simulation not
    for grade in ("strong", "weak", "none") if graded else ():
        these = [r for r in rows if r["evidence"] == grade]
        out[f"{grade}_share"] = round(len(these) / n, 4)
        if grade != "none" and on_topic:
            first = [r["first_relevant"] for r in these if r["relevant"] and r["first_relevant"] is not None]
            out[f"{grade}_precision"] = round(sum(first) / len(first), 4) if first else None
    return out


def measure(qs: list[dict[str, Any]], loaded: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The real path, per (set, split): each question searched as the API would (limit 5, every
    hit: recall@5 and the previous lexical grade) and pushed through ``inject_knowledge`` (what a
    model gets, with the evidence grade of the block)."""
    from memory_engine.injection import inject_knowledge
    from memory_engine.knowledge_config import search_kwargs
    from memory_engine.policy import SYSTEM
    from memory_engine.selectors.search import SearchRequest, knowledge_search

    rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    started = time.time()
    for n, q in enumerate(qs):
        where = scope(q, loaded)
        searched = knowledge_search(SearchRequest(project=where["project"], query=q["text"],
                                                  **search_kwargs(where["config"])))
        _, injected = inject_knowledge([{"role": "user", "content": q["text"]}], project=where["project"],
                                       config=where["config"], caller=SYSTEM)
        relevant = set(q["relevant"])
        top = [{"ids": ids} for ids in found_ids(searched.results, loaded)][:LIMIT]
        kept = [{"ids": ids} for ids in found_ids(injected.results, loaded)]
        previous = any(h.lexical_score is not None and h.lexical_score >= PREVIOUS_LEXICAL_FLOOR
                       for h in searched.results[:3])
        rows[f"{q['set']} {q['split']}"].append({
            "relevant": q["relevant"], "top": top, "kept": kept, "evidence": injected.evidence,
            "first_relevant": bool(relevant & set(kept[0]["ids"])) if kept else None,
            "previous_strong": previous,
            "top_relevant": bool(relevant & set(top[0]["ids"])) if top else None,
        })
        if (n + 1) % 1000 == 0:
            print(f"  measured {n + 1}/{len(qs)} ({time.time() - started:.0f}s)", flush=True)
    out = {}
    for key, group in sorted(rows.items(), key=lambda item: (item[0].startswith("off"), item[0])):
        out[key] = figures(group)
        if group[0]["relevant"]:
            strong = [r["top_relevant"] for r in group if r["previous_strong"] and r["top_relevant"] is not None]
            out[key]["previous_strong_share"] = round(len(strong) / len(group), 4)
            out[key]["previous_strong_precision"] = round(sum(strong) / len(strong), 4) if strong else None
    return out


#: The evidence grade before issue 63: strong when a top-3 hit's BM25 score reached 14.
PREVIOUS_LEXICAL_FLOOR = 14.0


def pooled(report: dict[str, dict[str, Any]], split: str) -> dict[str, Any]:
    """One split's targets: each on-topic set's recall difference, items per on-topic question and
    the share of off-topic questions injecting nothing, pooled over the sets."""
    on = {k: f for k, f in report.items() if k.endswith(split) and not k.startswith("off")}
    off = {k: f for k, f in report.items() if k.endswith(split) and k.startswith("off")}
    n_on, n_off = sum(f["questions"] for f in on.values()), sum(f["questions"] for f in off.values())
    return {
        "worst_recall_difference": min(f["recall_difference"] for f in on.values()),
        "items_on_topic": round(sum(f["items"] * f["questions"] for f in on.values()) / n_on, 3),
        "off_topic_inject_nothing": round(sum(f["inject_nothing"] * f["questions"] for f in off.values()) / n_off, 4),
    }


def print_report(title: str, report: dict[str, dict[str, Any]]) -> None:
    print(f"\n{title}")
    rows = []
    for key, f in report.items():
        rows.append([key, f["questions"], f.get("recall@5", "-"), f.get("recall_injected", "-"),
                     f.get("recall_difference", "-"), f["items"], f["inject_nothing"],
                     _grade(f, "strong"), _grade(f, "weak"), f.get("none_share", "-"),
                     _previous(f)])
    print_table(["set split", "n", "R@5", "R inj", "diff", "items", "nothing", "strong (prec)", "weak (prec)",
                 "none", "lexical floor 14 (prec)"], rows)
    for split in ("train", "test"):
        if any(k.endswith(split) for k in report):
            p = pooled(report, split)
            met = (p["worst_recall_difference"] >= -0.03, p["items_on_topic"] <= 4,
                   p["off_topic_inject_nothing"] >= 0.9)
            print(f"  {split}: worst recall difference {p['worst_recall_difference']:+.3f} (target >= -0.03: "
                  f"{'met' if met[0] else 'not met'}), items per on-topic question {p['items_on_topic']:.2f} "
                  f"(<= 4: {'met' if met[1] else 'not met'}), off-topic injecting nothing "
                  f"{p['off_topic_inject_nothing']:.3f} (>= 0.9: {'met' if met[2] else 'not met'})")


def _grade(f: dict[str, Any], grade: str) -> str:
    if f"{grade}_share" not in f:
        return "-"
    precision = f.get(f"{grade}_precision")
    return f"{f[f'{grade}_share']:.3f}" + (f" ({precision:.3f})" if precision is not None else "")


def _previous(f: dict[str, Any]) -> str:
    if "previous_strong_share" not in f:
        return "-"
    precision = f["previous_strong_precision"]
    return f"{f['previous_strong_share']:.3f}" + (f" ({precision:.3f})" if precision is not None else "")


def model_setting(model: Any) -> dict[str, Any]:
    """``model`` as MEMORY_ENGINE["RELEVANCE_MODEL"]."""
    return {"VERSION": model.version, "EMBEDDING_MODEL": model.calibrated_for, "GATE": dict(model.gate),
            "WEIGHTS": dict(model.weights)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fit", action="store_true",
                        help="fit the model on the train half, choose its threshold and strong bar there, and "
                             "measure it on both halves (it is printed as a RELEVANCE_MODEL setting)")
    parser.add_argument("--limit-questions", type=int, default=0,
                        help="at most N questions of each set and half (a quicker, noisier run)")
    parser.add_argument("--db", default=DB_NAME)
    args = parse_args(parser)
    from eval_retrieval import CACHE, install_cached_provider, install_cached_provider_again, setup_django

    CACHE.mkdir(parents=True, exist_ok=True)
    setup_django(args.db)
    use_lexical_backend("auto")
    provider = install_cached_provider()
    loaded = load(args, provider)
    qs = questions(args)
    provider.prefill([q["text"] for q in qs])
    provider.save()

    from django.conf import settings
    from django.test.utils import override_settings

    from memory_engine.conf import engine_settings
    from memory_engine.relevance import relevance_model

    result: dict[str, Any] = {"data": str(args.data), "limit": LIMIT, "questions": len(qs),
                              "limit_questions": args.limit_questions or None}
    overrides: dict[str, Any] = {}
    if args.fit:
        started = time.time()
        records = collect(qs, loaded)
        model = fit(records)
        threshold = choose_threshold(records, model)
        strong = choose_strong(records, model, threshold)
        print(f"\nfitted in {time.time() - started:.0f}s on the train half; threshold {threshold}, strong {strong}")
        print("MEMORY_ENGINE settings for this model (another embedder), or the BUILTIN_MODEL literal:")
        print(json.dumps({"RELEVANCE_MODEL": model_setting(model), "SEARCH_MIN_RELEVANCE": threshold,
                          "EVIDENCE_STRONG_RELEVANCE": strong}, indent=2))
        result["fitted"] = {"model": model_setting(model), "threshold": threshold, "strong": strong,
                            "simulated": simulate(records, model, threshold)}
        print_report("simulated from the recorded hits (first 5 relevant of the top 20)", result["fitted"]["simulated"])
        overrides = {"RELEVANCE_MODEL": model_setting(model), "SEARCH_MIN_RELEVANCE": threshold,
                     "EVIDENCE_STRONG_RELEVANCE": strong}
    with override_settings(MEMORY_ENGINE={**(getattr(settings, "MEMORY_ENGINE", None) or {}), **overrides}):
        install_cached_provider_again(provider)
        judging = relevance_model(provider.model_name)
        if judging is None:
            print(f"no relevance model for {provider.model_name}: nothing is judged (set RELEVANCE_MODEL, or --fit)")
        result["model"] = {"version": judging.version if judging else None,
                           "gate": dict(judging.gate) if judging else None,
                           "weights": dict(judging.weights) if judging else None,
                           "threshold": engine_settings.SEARCH_MIN_RELEVANCE,
                           "strong": engine_settings.EVIDENCE_STRONG_RELEVANCE}
        started = time.time()
        report = measure(qs, loaded)
        result["seconds"] = round(time.time() - started, 1)
    result["report"] = report
    result["targets"] = {split: pooled(report, split) for split in ("train", "test")
                         if any(k.endswith(split) for k in report)}
    print_report(f"relevance model {result['model']['version']} at threshold {result['model']['threshold']}, "
                 f"strong at {result['model']['strong']}: knowledge_search and inject_knowledge, limit {LIMIT}",
                 report)
    write_results("relevance", result)


if __name__ == "__main__":
    main()
