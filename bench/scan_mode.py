"""The dedup shortlist of a store: exact scan or HNSW, by the store's size and its share of the table.

    python bench/scan_mode.py --data ../shared/data                       # stores of 1k-20k, 60k rows beside
    python bench/scan_mode.py --data ../shared/data --others 0            # the same stores on their own
    python bench/scan_mode.py --data ../shared/data --sizes 7500,15000 --others 20000 --ef-search 100,200

Fills one store per size in ``--sizes`` with real texts and their vectors, beside ``--others``
rows of real texts in ten other stores, then builds the HNSW index once and analyzes. Each store
also holds restatements' originals: the first of STS pairs scored 3 or more, whose second is a
lookup with a near match in the store; the other lookups are real texts found in no store. Each
lookup's content row is in its store without a memory, as a new write's is when the funnel asks
for its candidates.

For every lookup, the funnel's own candidates statement (``dedup_candidates``) runs with the
exact shortlist and with the HNSW one (``DEDUP_EXACT_SCAN_MAX`` set above and below the store's
size, alternating in blocks of ``--block`` lookups; HNSW once per ``--ef-search``). Prints per
store: the time of each, whether HNSW found the exact nearest memory, and how often the nearest
memory's cosine falls on another side of a decision threshold (duplicate, supersede, the
surfacing and judge floors): a write that would be decided differently.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import parse_args, print_table, setup_django, summary_ms, write_results  # noqa: E402

#: stores of the other rows (a share of the table each, like other tenants)
OTHER_STORES = 10
#: restatement pairs and fill texts every run draws from (the default run's needs)
POOL_PAIRS, POOL_TEXTS = 500, 98_000
#: the length of the noise added to a copied text's vector when --others exceeds the data
COPY_NOISE = 0.33


def thresholds() -> list[float]:
    """The cosines at which the nearest memory changes what a write does or reports."""
    from memory_engine.conf import engine_settings

    return sorted({engine_settings.DUPLICATE_THRESHOLD, engine_settings.SUPERSEDE_THRESHOLD,
                   engine_settings.SURFACE_DUPLICATES_ABOVE, engine_settings.JUDGE_FLOOR})


def band(cosine: float | None, cuts: list[float]) -> int:
    """Which of the decision bands ``cosine`` falls in (0: below every threshold)."""
    return 0 if cosine is None else sum(1 for cut in cuts if cosine >= cut)


def other_rows(texts: list[str], vectors: Any, count: int) -> tuple[list[str], Any]:
    """``count`` rows for the other stores: ``texts`` with their vectors, and when the data has
    fewer texts than that, the same texts again, each copy's vectors moved a little (cosine ~0.95
    to the original, so the index holds neighbourhoods like real ones, not exact duplicates)."""
    import numpy as np

    if count <= len(texts):
        return texts[:count], vectors[:count]
    rng = np.random.default_rng(0)
    out_texts: list[str] = []
    parts = []
    while len(out_texts) < count:
        take = min(len(texts), count - len(out_texts))
        part = np.array(vectors[:take], dtype=np.float32)
        if out_texts:  # a copy
            part += rng.normal(0.0, COPY_NOISE / np.sqrt(part.shape[1]), part.shape).astype(np.float32)
            part /= np.linalg.norm(part, axis=1, keepdims=True)
        out_texts += texts[:take]
        parts.append(part)
    return out_texts, np.vstack(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,2000,5000,10000,20000",
                        help="memories in each measured store, comma-separated")
    parser.add_argument("--others", type=int, default=60_000,
                        help="memories in ten other stores beside them (beyond the data's texts: copies of them)")
    parser.add_argument("--queries", type=int, default=200,
                        help="lookups per store: half restatements of a stored text, half new texts")
    parser.add_argument("--block", type=int, default=20, help="lookups per block of one mode")
    parser.add_argument("--ef-search", default="100", type=lambda v: [int(x) for x in v.split(",")],
                        help="HNSW_EF_SEARCH values for the HNSW shortlist, comma-separated (default 100)")
    parser.add_argument("--keep", action="store_true",
                        help="leave the stores in the bench database (bench_scan_mode), to EXPLAIN their statements")
    args = parse_args(parser)
    sizes = [int(size) for size in args.sizes.split(",")]
    setup_django("bench_scan_mode")
    from django.conf import settings
    from django.db import connection, transaction
    from django.test.utils import override_settings
    from write import build_content_index, fill_store, fill_texts, fill_vectors, restatement_pairs

    from memory_engine.db import vector_literal
    from memory_engine.models import MemoryStore, Project
    from memory_engine.selectors.dedup import dedup_candidates, forget_scan_modes, use_exact_scan
    from memory_engine.services.memories.locks import lock_store_for_write
    from memory_engine.services.stores import project_delete

    for old in Project.objects.filter(name="bench-scan-mode"):
        project_delete(project=old)
    with connection.cursor() as cursor:  # dead HNSW entries of earlier runs would slow the scans
        cursor.execute("VACUUM memory_engine_memorycontent, memory_engine_memory")
    project = Project.objects.create(name="bench-scan-mode")

    restated = args.queries // 2
    # The same pool of pairs and texts for every run that fits in it, so its vectors are embedded
    # once (fill_vectors caches them); a run takes what it needs.
    needed_pairs = restated * len(sizes)
    pairs = restatement_pairs(args.data, max(POOL_PAIRS, needed_pairs), set())
    if len(pairs) < needed_pairs:
        raise SystemExit(f"the data has {len(pairs)} restatement pairs; ask for fewer --queries or --sizes")
    paired = {text for pair in pairs for text in pair}
    pairs = pairs[:needed_pairs]
    fresh_count = (args.queries - restated) * len(sizes)
    fill_count = sum(sizes) - needed_pairs + fresh_count  # and the other stores' rows, from what is left
    texts = fill_texts(args.data, max(POOL_TEXTS, fill_count + 1), paired, [])
    vectors = fill_vectors(texts)
    fresh, fresh_vectors = texts[-fresh_count:], vectors[-fresh_count:]
    lookups_all = [b for _, b in pairs] + fresh
    from memory_engine.providers.embeddings import get_embedding_provider

    lookup_vectors = get_embedding_provider().embed_documents([b for _, b in pairs]) + fresh_vectors.tolist()
    stored_pairs = [a for a, _ in pairs]
    stored_pair_vectors = get_embedding_provider().embed_documents(stored_pairs)

    import numpy as np

    print(f"filling {len(sizes)} stores ({args.sizes}) and {args.others:,} other rows ...", file=sys.stderr)
    stores: list[tuple[int, Any, list[tuple[str, str]]]] = []
    offset = 0
    for n, size in enumerate(sizes):
        store = MemoryStore.objects.create(project=project, name=f"size-{size}")
        mine = stored_pairs[n * restated:(n + 1) * restated]
        own = mine + texts[offset:offset + size - restated]
        own_vectors = np.vstack([np.asarray(stored_pair_vectors[n * restated:(n + 1) * restated], dtype=np.float32),
                                 vectors[offset:offset + size - restated]])
        offset += size - restated
        fill_store(store.pk, size, own, own_vectors, prefix=f"s{n}_", build_index=False)
        # the lookups' content rows, without memories: what a new write has when its candidates are read
        first = n * restated
        lookups = ([(lookups_all[first + i], vector_literal(lookup_vectors[first + i])) for i in range(restated)]
                   + [(fresh[n * (args.queries - restated) + i],
                       vector_literal(fresh_vectors[n * (args.queries - restated) + i].tolist()))
                      for i in range(args.queries - restated)])
        ids = []
        with connection.cursor() as cursor:
            for i, (text, vector) in enumerate(lookups):
                content_id = f"mc_q{n}_{i:06d}"
                cursor.execute(
                    "INSERT INTO memory_engine_memorycontent (id, store_id, content_hash, text, embedding,"
                    " embedding_model, created_at) VALUES (%s, %s, md5(%s), %s, %s::vector, 'all-MiniLM-L6-v2', now())",
                    [content_id, store.pk, content_id, text, vector],
                )
                ids.append((content_id, "restatement" if i < restated else "new"))
        stores.append((size, store, ids))
    others, other_vectors = other_rows(texts[offset:len(texts) - fresh_count],
                                       vectors[offset:len(texts) - fresh_count], args.others)
    per_other = -(-len(others) // OTHER_STORES) if others else 0
    assert per_other <= len(texts) - fresh_count - offset, "another store would hold a text twice"
    for n in range(OTHER_STORES if others else 0):
        store = MemoryStore.objects.create(project=project, name=f"other-{n}")
        part = slice(n * per_other, (n + 1) * per_other)
        fill_store(store.pk, len(others[part]), others[part], other_vectors[part], prefix=f"o{n}_",
                   build_index=False)
    print("building the HNSW index ...", file=sys.stderr)
    build_content_index()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM memory_engine_memorycontent")
        table_rows = cursor.fetchone()[0]

    cuts = thresholds()
    # (label, settings): the exact shortlist, then HNSW at each ef_search
    modes = [("exact", {"DEDUP_EXACT_SCAN_MAX": 10 ** 9})] + [
        (f"HNSW, ef_search {ef}", {"DEDUP_EXACT_SCAN_MAX": 0, "HNSW_EF_SEARCH": ef}) for ef in args.ef_search]
    results, rows = [], []
    for size, store, ids in stores:
        took: dict[str, list[float]] = {label: [] for label, _ in modes}
        nearest: dict[str, dict[str, tuple[str | None, float | None]]] = {label: {} for label, _ in modes}
        for start in range(0, len(ids), args.block):
            for label, overrides in modes:
                with override_settings(MEMORY_ENGINE={**settings.MEMORY_ENGINE, **overrides}):
                    for content_id, _ in ids[start:start + args.block]:
                        with transaction.atomic():
                            lock_store_for_write(store.pk)
                            started = time.perf_counter()
                            found = dedup_candidates(store, content_id, facet=None, about=None, neighbours=True)
                            took[label].append(time.perf_counter() - started)
                        nearest[label][content_id] = found.neighbours[0] if found.neighbours else (None, None)
        exact = nearest["exact"]
        forget_scan_modes()
        with connection.cursor() as cursor:
            picked = "exact" if use_exact_scan(cursor, store) else "HNSW"
        row: dict[str, Any] = {"memories": size, "share": round((size + len(ids)) / table_rows, 4),
                               "settings_pick": picked, "exact": summary_ms(took["exact"]), "hnsw": {}}
        for label, overrides in modes[1:]:
            got = nearest[label]
            entry: dict[str, Any] = {"ef_search": overrides["HNSW_EF_SEARCH"], **summary_ms(took[label])}
            for kind in ("restatement", "new"):
                mine = [content_id for content_id, k in ids if k == kind]
                entry[kind] = {
                    "lookups": len(mine),
                    "top1_same": sum(1 for c in mine if exact[c][0] == got[c][0]),
                    "band_changed": sum(1 for c in mine if band(exact[c][1], cuts) != band(got[c][1], cuts)),
                    "exact_top1_above_floor": sum(1 for c in mine if band(exact[c][1], cuts) > 0),
                }
            row["hnsw"][label] = entry
            rows.append([f"{size:,}", f"{row['share']:.1%}", picked, row["exact"]["p50_ms"], row["exact"]["p95_ms"],
                         label, entry["p50_ms"], entry["p95_ms"],
                         f"{entry['restatement']['top1_same']}/{entry['restatement']['lookups']}",
                         f"{entry['new']['top1_same']}/{entry['new']['lookups']}",
                         entry["restatement"]["band_changed"] + entry["new"]["band_changed"]])
        results.append(row)
    if not args.keep:
        project_delete(project=project)
    print(f"\ndedup candidates statement, exact shortlist against HNSW; table of {table_rows:,} content rows, "
          f"{args.queries} lookups per store; decision bands at {cuts}")
    print_table(["store memories", "share of table", "the settings pick", "exact p50 ms", "exact p95 ms", "HNSW",
                 "p50 ms", "p95 ms", "top-1 = exact, restatements", "top-1 = exact, new texts",
                 "decision band changed"], rows)
    write_results("scan_mode", {"sizes": sizes, "others": args.others, "table_rows": table_rows,
                                "ef_search": args.ef_search,
                                "queries": args.queries, "thresholds": cuts, "stores": results})


if __name__ == "__main__":
    main()
