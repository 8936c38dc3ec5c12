"""Replay throughput against first ingestion, on the same documents.

SciFact abstracts (one text document each) are captured and ingested inline (``document_capture_text``
then ``document_ingest``: the first ingestion); then ``replay_run`` re-derives them from their raw
capture into a staged generation under a transform config with the same chunking (each document
keeps its own) and the same embedder. Documents/s and chunks/s of both; the replay is then
promoted and demoted once (timed) to show the switch costs no re-embedding.

Runs on its own database (``bench_replay``) and a temporary MEDIA_ROOT.

    python bench/replay.py [--data DIR] [--docs 500]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import parse_args, print_table, setup_django, write_results  # noqa: E402
from ingest import scifact_texts  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=500, help="SciFact abstracts to capture and replay.")
    args = parse_args(parser)

    os.environ["MEDIA_ROOT"] = tempfile.mkdtemp(prefix="bench-replay-media-")
    setup_django("bench_replay")
    from memory_engine.conf import engine_settings
    from memory_engine.models import Chunk, Project
    from memory_engine.providers.embeddings import require_embedding_provider
    from memory_engine.services.documents import document_capture_text, document_ingest
    from memory_engine.services.documents.replay import (
        generation_demote,
        generation_promote,
        replay_run,
        transform_config_create,
    )
    from memory_engine.services.stores import project_delete

    provider = require_embedding_provider()
    provider.embed_documents(["warm up the model"] * 4)
    texts = scifact_texts(args.data, args.docs)
    for leftover in Project.objects.filter(name="bench-replay"):
        project_delete(project=leftover)  # an interrupted run's (erasure lifts the raw-capture guard)
    project = Project.objects.create(name="bench-replay")
    rows: list[dict[str, Any]] = []
    try:
        started = time.perf_counter()
        for index, text in enumerate(texts):
            capture = document_capture_text(project=project, content=text, source="scifact",
                                            external_ref=str(index), enqueue=False)
            document_ingest(document_id=capture.document.pk)
        ingest_s = time.perf_counter() - started
        live_chunks = Chunk.objects.filter(document__project=project, generation__isnull=True).count()
        rows.append({"pass": "first ingestion", "documents": len(texts), "chunks": live_chunks,
                     "seconds": round(ingest_s, 2), "documents_per_s": round(len(texts) / ingest_s, 1),
                     "chunks_per_s": round(live_chunks / ingest_s, 1)})

        config = transform_config_create(project=project, name="bench")
        started = time.perf_counter()
        run = replay_run(config=config, started_by="bench")
        replay_s = time.perf_counter() - started
        assert run.status == "completed", run.error
        rows.append({"pass": "replay (staged)", "documents": run.documents_done, "chunks": run.chunks_total,
                     "seconds": round(replay_s, 2), "documents_per_s": round(run.documents_done / replay_s, 1),
                     "chunks_per_s": round(run.chunks_total / replay_s, 1)})
        started = time.perf_counter()
        generation_promote(run=run, by="bench")
        promote_s = time.perf_counter() - started
        started = time.perf_counter()
        generation_demote(run=run, by="bench")
        demote_s = time.perf_counter() - started
    finally:
        project_delete(project=project)

    print(f"\nembedder: {provider.model_name} ({engine_settings.EMBEDDING['PROVIDER']}), "
          f"batch {engine_settings.EMBEDDING_BATCH_SIZE}; {len(texts)} SciFact abstracts\n")
    print_table(["pass", "documents", "chunks", "seconds", "documents/s", "chunks/s"],
                [[r["pass"], r["documents"], r["chunks"], r["seconds"], r["documents_per_s"], r["chunks_per_s"]]
                 for r in rows])
    ratio = rows[1]["documents_per_s"] / rows[0]["documents_per_s"]
    print(f"\nreplay / first ingestion: {ratio:.2f}; "
          f"promote {promote_s * 1000:.0f} ms, demote {demote_s * 1000:.0f} ms")
    write_results("replay", {"embedder": provider.model_name, "docs": len(texts), "rows": rows,
                             "replay_over_ingestion": round(ratio, 3), "promote_s": round(promote_s, 3),
                             "demote_s": round(demote_s, 3), "load_average": os.getloadavg()})


if __name__ == "__main__":
    main()
