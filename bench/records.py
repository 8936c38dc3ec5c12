"""Many records of one kind in one store: are other subjects' records kept, and are updates applied?

A store that holds many records of one kind (customer accounts, tickets, hosts, orders...) gets
near-identical sentences that differ only in the subject and the value ("Customer account ACME-5
renews its contract every March." / "... ACME-19 ... September.", cosine 0.91). Each must stay
live; only an update of the same subject and attribute may retire one.

For one data file (JSON lines: ``{"type": "record", "id", "kind", "subject", "text"}`` and
``{"type": "update", "id", "replaces", "text"}``) a fresh project gets ONE memory store. Phase 1
writes every record, phase 2 every update, one by one in file order, through the real funnel
(memory_write, default embedder and thresholds). Reported: the records live after phase 1 and
what retired the others; per update whether it retired exactly the record it replaces, was
created beside it (both live), was skipped, retired another record, or was created when its
record had already been retired; collateral retirements (records no update replaces that are
not live at the end); write p50 / p95; the decision reasons per phase.
The project is deleted at the end.

Targets: every record live after phase 1; every update retires its record; no collateral
retirement.

    python bench/records.py [--data FILE] [--show-misses] [--decisions FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import ROOT, print_table, setup_django, summary_ms, write_results  # noqa: E402

DEFAULT_DATA = ROOT / "bench" / "data" / "records_dev.jsonl"
PROJECT = "bench-records"

#: What an update did, in the order the table lists them.
RETIRED_ITS_RECORD = "retired its record"
CREATED_BESIDE = "created beside it"
SKIPPED = "skipped"
RETIRED_ANOTHER = "retired another record"
RECORD_GONE = "created, its record already gone"
UPDATE_OUTCOMES = (RETIRED_ITS_RECORD, CREATED_BESIDE, SKIPPED, RETIRED_ANOTHER, RECORD_GONE)


def load(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The records and the updates of ``path``, checked: unique ids, every update replacing one
    record of the file, no record replaced twice."""
    records: list[dict[str, Any]] = []
    updates: list[dict[str, Any]] = []
    ids: set[str] = set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        if row.get("id") in ids:
            raise SystemExit(f"{path}:{number}: id {row.get('id')!r} used twice")
        ids.add(row["id"])
        if row.get("type") == "record":
            records.append(row)
        elif row.get("type") == "update":
            updates.append(row)
        else:
            raise SystemExit(f"{path}:{number}: type must be record or update, not {row.get('type')!r}")
    known = {record["id"] for record in records}
    replaced = Counter(update["replaces"] for update in updates)
    if unknown := sorted(set(replaced) - known):
        raise SystemExit(f"{path}: updates replace records the file does not hold: {', '.join(unknown)}")
    if twice := sorted(rid for rid, n in replaced.items() if n > 1):
        raise SystemExit(f"{path}: records replaced by more than one update: {', '.join(twice)}")
    return records, updates


class Store:
    """One memory store and which row of the data file each live memory holds (by the funnel's
    results: a supersede moves the memory's row to the writer; a skip that kept the newer wording
    moves it too, and the older wording is gone from the live memories)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.holder: dict[str, str] = {}  # memory id -> the data row whose text it holds
        self.lost: dict[str, dict[str, Any]] = {}  # data row -> what took its text out of the live memories
        self.rows: dict[str, dict[str, Any]] = {}

    def memory_of(self, rid: str) -> str | None:
        """The live memory holding row ``rid``'s text (None: none does)."""
        return next((pk for pk, holder in self.holder.items() if holder == rid), None)

    def write(self, row: dict[str, Any], phase: str) -> dict[str, Any]:
        from memory_engine.models import Memory
        from memory_engine.services.memories import memory_write

        self.rows[row["id"]] = row
        started = time.perf_counter()
        result = memory_write(store=self.store, content=row["text"], principal="bench")
        seconds = time.perf_counter() - started
        memory = result.memory.pk
        replaced = result.replaced.pk if result.replaced is not None else None
        decision = {"phase": phase, "id": row["id"], "action": result.action, "reason": result.decision_reason,
                    "similarity": None if result.similarity is None else round(result.similarity, 4),
                    "memory": memory, "replaced": replaced, "replaced_row": None, "ms": round(seconds * 1000, 3)}
        how = {"by": row["id"], "phase": phase, "action": result.action, "reason": result.decision_reason,
               "similarity": decision["similarity"], "by_text": row["text"]}
        if replaced is not None:
            victim = self.holder.pop(replaced, None)
            decision["replaced_row"] = victim
            if victim is not None:
                self.lost[victim] = how
            self.holder[memory] = row["id"]
        elif result.action == "skipped":
            kept = self.holder.get(memory)
            decision["replaced_row"] = kept  # the row whose memory it matched
            text = Memory.objects.select_related("content").get(pk=memory).content.text
            if text == row["text"]:  # the newer wording kept: the older row's text is gone
                if kept is not None and kept != row["id"]:
                    self.lost[kept] = how
                self.holder[memory] = row["id"]
            else:  # the older wording kept: this row's text never went live
                self.lost[row["id"]] = {**how, "by": kept, "by_text": text}
        else:
            self.holder[memory] = row["id"]
        decision["seconds"] = seconds
        return decision

    def live_texts(self) -> set[str]:
        """The texts of the store's live memories (from the database, not the bookkeeping)."""
        from memory_engine.models import Memory

        return set(Memory.objects.live().filter(store=self.store).values_list("content__text", flat=True))


def run(records: list[dict[str, Any]], updates: list[dict[str, Any]]) -> dict[str, Any]:
    from memory_engine.models import MemoryStore, Project
    from memory_engine.services.memories import memory_write
    from memory_engine.services.stores import project_delete

    for old in Project.objects.filter(name=PROJECT):
        project_delete(project=old)
    project = Project.objects.create(name=PROJECT)
    try:
        # The embedder loads its model on first use: not in the measured store, not timed.
        warm = MemoryStore.objects.create(project=project, name="warm-up")
        memory_write(store=warm, content="A warm-up sentence for the embedding model.", principal="bench")
        store = Store(MemoryStore.objects.create(project=project, name="records"))

        phase1 = [store.write(record, "records") for record in records]
        live = store.live_texts()
        live_after_records = [r["id"] for r in records if r["text"] in live]
        by_kind: dict[str, Counter[str]] = {}
        for record in records:
            tally = by_kind.setdefault(record.get("kind", "?"), Counter())
            tally["records"] += 1
            tally["live"] += record["text"] in live
        retired_in_records = {rid: dict(store.lost.get(rid, {}), text=store.rows[rid]["text"])
                              for rid in (r["id"] for r in records) if store.rows[rid]["text"] not in live}

        phase2, outcomes = [], []
        for update in updates:
            target = update["replaces"]
            target_memory = store.memory_of(target)
            decision = store.write(update, "updates")
            if decision["action"] == "superseded":
                outcome = RETIRED_ITS_RECORD if decision["replaced"] == target_memory else RETIRED_ANOTHER
            elif decision["action"] == "skipped":
                outcome = SKIPPED
            else:
                outcome = CREATED_BESIDE if target_memory is not None else RECORD_GONE
            decision["outcome"] = outcome
            phase2.append(decision)
            outcomes.append({"id": update["id"], "replaces": target, "outcome": outcome,
                             "action": decision["action"], "reason": decision["reason"],
                             "similarity": decision["similarity"], "text": update["text"],
                             "record_text": store.rows[target]["text"],
                             "matched": decision["replaced_row"],
                             "matched_text": store.rows[decision["replaced_row"]]["text"]
                             if decision["replaced_row"] else None})

        live = store.live_texts()
        updated = {u["replaces"] for u in updates}
        collateral = [dict(store.lost.get(r["id"], {}), id=r["id"], text=r["text"]) for r in records
                      if r["id"] not in updated and r["text"] not in live]
        updates_live = sum(u["text"] in live for u in updates)
    finally:
        project_delete(project=project)

    def phase_summary(decisions: list[dict[str, Any]]) -> dict[str, Any]:
        return {"writes": len(decisions), "actions": dict(Counter(d["action"] for d in decisions)),
                "reasons": dict(Counter(d["reason"] for d in decisions)),
                "latency": summary_ms([d.pop("seconds") for d in decisions])}

    return {
        "records": len(records), "kinds": len({r.get("kind") for r in records}), "updates": len(updates),
        "records_live_after_phase1": len(live_after_records),
        "records_live_after_phase1_by_kind": {kind: dict(tally) for kind, tally in by_kind.items()},
        "retired_in_phase1": retired_in_records,
        "update_outcomes": dict(Counter(o["outcome"] for o in outcomes)),
        "update_details": outcomes,
        "records_not_updated": len(records) - len(updated),
        "collateral": collateral,
        "collateral_by_phase": dict(Counter(c.get("phase", "unknown") for c in collateral)),
        "update_texts_live_at_end": updates_live,
        "phases": {"records": phase_summary(phase1), "updates": phase_summary(phase2)},
        "decisions": phase1 + phase2,
    }


def share(n: int, of: int) -> str:
    return f"{n / of:.1%}" if of else "-"


def show_misses(result: dict[str, Any]) -> None:
    def cosine(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    print()
    print_table(["kind", "records", "live after phase 1"],
                [[kind, tally["records"], f"{tally['live']} ({share(tally['live'], tally['records'])})"]
                 for kind, tally in result["records_live_after_phase1_by_kind"].items()])
    retired = result["retired_in_phase1"]
    print(f"\nrecords not live after phase 1: {len(retired)}")
    for rid, how in retired.items():
        print(f"  {rid:<10} {how.get('action', '?'):<10} {how.get('reason', '?'):<15} {cosine(how.get('similarity'))}"
              f"  {how['text']!r}\n{'':>13}by {how.get('by')}: {how.get('by_text')!r}")
    misses = [o for o in result["update_details"] if o["outcome"] != RETIRED_ITS_RECORD]
    print(f"\nupdates that did not retire exactly their record: {len(misses)}")
    for miss in misses:
        print(f"  {miss['id']:<14} {miss['outcome']:<32} {miss['action']:<10} {miss['reason']:<15}"
              f" {cosine(miss['similarity'])}\n{'':>4}update: {miss['text']!r}\n{'':>4}record: {miss['record_text']!r}")
        if miss["matched"] and miss["matched"] != miss["replaces"]:
            print(f"{'':>4}matched {miss['matched']}: {miss['matched_text']!r}")
    later = [c for c in result["collateral"] if c.get("phase") == "updates"]
    print(f"\ncollateral retirements in phase 2: {len(later)}")
    for how in later:
        print(f"  {how['id']:<10} {how.get('action', '?'):<10} {how.get('reason', '?'):<15}"
              f" {cosine(how.get('similarity'))}  {how['text']!r}\n{'':>13}by {how.get('by')}: {how.get('by_text')!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA,
                        help="the records and updates (JSON lines; default bench/data/records_dev.jsonl)")
    parser.add_argument("--show-misses", action="store_true",
                        help="list the records retired, the updates that missed and the collateral retirements")
    parser.add_argument("--decisions", type=Path, metavar="FILE",
                        help="also write every write's decision (action, reason, similarity, replaced) as JSON lines")
    args = parser.parse_args()
    records, updates = load(args.data)
    setup_django()
    result = run(records, updates)
    n, u = result["records"], result["updates"]
    print(f"{args.data.name}: {n} records of {result['kinds']} kinds, then {u} updates, in one store; "
          f"thresholds 0.95 / 0.90, all-MiniLM-L6-v2")
    outcomes = result["update_outcomes"]
    collateral = result["collateral_by_phase"]
    not_updated = result["records_not_updated"]
    rows = [["records live after phase 1", result["records_live_after_phase1"], n,
             share(result["records_live_after_phase1"], n)]]
    rows += [[f"updates: {outcome}", outcomes.get(outcome, 0), u, share(outcomes.get(outcome, 0), u)]
             for outcome in UPDATE_OUTCOMES]
    rows += [["collateral retirements (phase 1)", collateral.get("records", 0), not_updated,
              share(collateral.get("records", 0), not_updated)],
             ["collateral retirements (phase 2)", collateral.get("updates", 0), not_updated,
              share(collateral.get("updates", 0), not_updated)],
             ["update texts live at the end", result["update_texts_live_at_end"], u,
              share(result["update_texts_live_at_end"], u)]]
    print_table(["", "count", "of", "share"], rows)
    print()
    phases = result["phases"]
    print_table(["phase", "writes", "created", "superseded", "skipped", "p50 ms", "p95 ms", "reasons"],
                [[name, p["writes"], p["actions"].get("created", 0), p["actions"].get("superseded", 0),
                  p["actions"].get("skipped", 0), p["latency"]["p50_ms"], p["latency"]["p95_ms"],
                  ", ".join(f"{reason} {count}" for reason, count in Counter(p["reasons"]).most_common())]
                 for name, p in phases.items()])
    if args.show_misses:
        show_misses(result)
    decisions = result.pop("decisions")
    if args.decisions:
        args.decisions.write_text("".join(json.dumps(row) + "\n" for row in decisions))
    stem = args.data.stem.removeprefix("records_")
    write_results(f"records-{stem}", {"data": args.data.name, **result})


if __name__ == "__main__":
    main()
