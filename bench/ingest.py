"""Ingestion throughput against the embedder's own throughput on the same chunks.

For the two largest shared PDFs and 1,000 SciFact abstracts (one text document each):

* raw:      the default embedder alone on exactly the chunk texts the pipeline produces,
            in batches of EMBEDDING_BATCH_SIZE (and, for SciFact, per document as the
            pipeline calls it);
* pipeline: bytes -> document_create -> document_ingest (store the file, read it back,
            extract, chunk, embed in batches, swap the chunks in, mark ready), inline;
* bulk:     SciFact only: a block of abstracts created, then ``document_ingest_many`` (the
            embedder sees batches of EMBEDDING_BATCH_SIZE across documents).

Raw and pipeline runs are interleaved (PDF rounds; SciFact: per abstract, and batched raw
per block of 50) so that other load on the machine hits both alike.

Pages/s and chunks/s of both, and pipeline / raw. Runs on its own database
(``bench_ingest``) and a temporary MEDIA_ROOT. ``--pdf-extractor pypdf,pdfium`` runs the
PDFs once per PDF_EXTRACTOR value, interleaved in each round (a row per extractor).

    python bench/ingest.py [--data DIR] [--docs 1000] [--rounds 3] [--block 50] [--skip-scifact] [--skip-pdfs]
                           [--pdf-extractor pypdf[,pdfium]]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import parse_args, print_table, setup_django, write_results  # noqa: E402

PDFS = ["plumber-WARN-Report-2015-2016.pdf", "pypdf-GeoBase_NHNC1_Data_Model_UML_EN.pdf"]


def scifact_texts(data: Path, limit: int) -> list[str]:
    texts = []
    with open(data / "scifact" / "corpus.jsonl") as handle:
        for line in handle:
            row = json.loads(line)
            texts.append(f"{row['title']}\n\n{row['text']}")
            if len(texts) == limit:
                break
    return texts


def embed_raw(provider: Any, texts: list[str], batch: int) -> float:
    started = time.perf_counter()
    for start in range(0, len(texts), batch):
        provider.embed_documents(texts[start:start + batch])
    return time.perf_counter() - started


def use_pdf_extractor(extractor: str) -> None:
    """Set PDF_EXTRACTOR without dropping the other caches (the loaded embedder stays)."""
    from django.conf import settings

    from memory_engine.conf import engine_settings

    settings.MEMORY_ENGINE = {**(getattr(settings, "MEMORY_ENGINE", None) or {}), "PDF_EXTRACTOR": extractor}
    engine_settings.reload()


def run_pdf(path: Path, project: Any, provider: Any, batch: int, rounds: int,
            extractors: list[str]) -> list[dict[str, Any]]:
    from memory_engine.extraction import extract_pages
    from memory_engine.services.documents import Upload, document_create, document_delete, document_ingest

    name = path.name
    data = path.read_bytes()
    runs = {extractor: {"extract": [], "raw": [], "pipeline": [], "pages": 0, "chunks": 0} for extractor in extractors}
    for round_ in range(rounds):  # interleaved, so both (and every extractor) see the same machine load
        order = list(runs) if round_ % 2 == 0 else list(reversed(runs))  # alternate which goes first
        for extractor in order:
            times = runs[extractor]
            use_pdf_extractor(extractor)
            started = time.perf_counter()
            pages = extract_pages(data, "application/pdf", pdf_extractor=extractor)
            times["extract"].append(time.perf_counter() - started)
            started = time.perf_counter()
            document = document_create(project=project, upload=Upload(data, filename=name), path=f"/bench/{name}",
                                       enqueue=False)
            document = document_ingest(document_id=document.pk)
            times["pipeline"].append(time.perf_counter() - started)
            assert document.status == "ready" and document.unembedded_chunks == 0, document.error
            # raw: exactly the chunk texts the pipeline made (its chunking: pages cut by token count)
            texts = list(document.chunks.order_by("chunk_index").values_list("text", flat=True))
            times["raw"].append(embed_raw(provider, texts, batch))
            times["pages"], times["chunks"] = len(pages), len(texts)
            document_delete(document=document)
    use_pdf_extractor(extractors[0])
    return [_row(f"{name} [{extractor}]" if len(extractors) > 1 else name, pages=times["pages"],
                 chunks=times["chunks"], raw_s=statistics.median(times["raw"]),
                 pipeline_s=statistics.median(times["pipeline"]), extract_s=statistics.median(times["extract"]))
            for extractor, times in runs.items()]


def run_scifact(data: Path, limit: int, project: Any, provider: Any, batch: int, block: int) -> list[dict[str, Any]]:
    """Blocks of ``block`` abstracts: raw batched over the block, per abstract the raw call and
    the one-document pipeline back to back, then the block again through the bulk pipeline
    (``document_ingest_many``), so slow phases of a shared machine hit all alike."""
    from memory_engine.services.documents import document_create_text, document_ingest, document_ingest_many

    texts = scifact_texts(data, limit)
    raw_batched = raw_single = pipeline = bulk = 0.0
    for first in range(0, len(texts), block):
        part = texts[first:first + block]
        raw_batched += embed_raw(provider, part, batch)
        for index, text in enumerate(part, start=first):
            raw_single += embed_raw(provider, [text], 1)  # the call the one-document pipeline makes
            started = time.perf_counter()
            document = document_create_text(project=project, content=text, path=f"/scifact/{index}.txt",
                                            enqueue=False)
            document = document_ingest(document_id=document.pk)
            pipeline += time.perf_counter() - started
            assert document.status == "ready" and document.unembedded_chunks == 0, document.error
        started = time.perf_counter()
        ids = [document_create_text(project=project, content=text, path=f"/scifact-bulk/{index}.txt",
                                    enqueue=False).pk for index, text in enumerate(part, start=first)]
        documents = document_ingest_many(document_ids=ids)
        bulk += time.perf_counter() - started
        assert all(d is not None and d.status == "ready" and d.unembedded_chunks == 0 for d in documents)
    label = f"SciFact x{limit} (1 chunk/doc)"
    return [
        _row(f"{label}, one by one, vs raw batch {batch}", pages=limit, chunks=limit, raw_s=raw_batched,
             pipeline_s=pipeline),
        _row(f"{label}, one by one, vs raw per document", pages=limit, chunks=limit, raw_s=raw_single,
             pipeline_s=pipeline),
        _row(f"{label}, bulk (blocks of {block}), vs raw batch {batch}", pages=limit, chunks=limit,
             raw_s=raw_batched, pipeline_s=bulk),
    ]


def _row(name: str, *, pages: int, chunks: int, raw_s: float, pipeline_s: float,
         extract_s: float | None = None) -> dict[str, Any]:
    return {
        "corpus": name, "pages": pages, "chunks": chunks,
        "raw_s": round(raw_s, 3), "pipeline_s": round(pipeline_s, 3),
        "extract_s": round(extract_s, 3) if extract_s is not None else None,
        "raw_chunks_per_s": round(chunks / raw_s, 2),
        "pipeline_chunks_per_s": round(chunks / pipeline_s, 2),
        "pipeline_pages_per_s": round(pages / pipeline_s, 2),
        "pipeline_over_raw": round(raw_s / pipeline_s, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=1000, help="SciFact abstracts to ingest.")
    parser.add_argument("--rounds", type=int, default=3, help="PDF rounds (raw and pipeline interleaved; median).")
    parser.add_argument("--block", type=int, default=50, help="SciFact abstracts per interleaved block.")
    parser.add_argument("--skip-scifact", action="store_true")
    parser.add_argument("--skip-pdfs", action="store_true")
    parser.add_argument("--pdf-extractor", default="pypdf", metavar="NAMES",
                        help="PDF_EXTRACTOR values to run the PDFs with, comma-separated (e.g. pypdf,pdfium)")
    args = parse_args(parser)
    extractors = [name.strip() for name in args.pdf_extractor.split(",") if name.strip()]

    media = tempfile.mkdtemp(prefix="bench-ingest-media-")
    os.environ["MEDIA_ROOT"] = media
    setup_django("bench_ingest")
    from memory_engine.conf import engine_settings
    from memory_engine.models import Project
    from memory_engine.providers.embeddings import require_embedding_provider
    from memory_engine.services.stores import project_delete

    provider = require_embedding_provider()
    batch = int(engine_settings.EMBEDDING_BATCH_SIZE)
    provider.embed_documents(["warm up the model"] * 4)
    Project.objects.filter(name="bench-ingest").delete()
    project = Project.objects.create(name="bench-ingest")
    rows: list[dict[str, Any]] = []
    try:
        if not args.skip_pdfs:
            for name in PDFS:
                rows.extend(run_pdf(args.data / "pdfs" / name, project, provider, batch, args.rounds, extractors))
        if not args.skip_scifact:
            rows.extend(run_scifact(args.data, args.docs, project, provider, batch, args.block))
    finally:
        project_delete(project=project)

    print(f"\nembedder: {provider.model_name} ({engine_settings.EMBEDDING['PROVIDER']}), batch {batch}, "
          f"PDFs: median of {args.rounds} interleaved rounds; SciFact: interleaved blocks of {args.block}\n")
    print_table(
        ["corpus", "pages", "chunks", "extract s", "raw s", "pipeline s", "pages/s", "chunks/s", "raw chunks/s",
         "pipeline/raw"],
        [[r["corpus"], r["pages"], r["chunks"], r["extract_s"] if r["extract_s"] is not None else "-", r["raw_s"],
          r["pipeline_s"], r["pipeline_pages_per_s"], r["pipeline_chunks_per_s"], r["raw_chunks_per_s"],
          f"{r['pipeline_over_raw']:.1%}"] for r in rows],
    )
    write_results("ingest", {"embedder": provider.model_name, "batch_size": batch, "rounds": args.rounds,
                             "pdf_extractors": extractors,
                             "block": args.block, "load_average": os.getloadavg(), "rows": rows})


if __name__ == "__main__":
    main()
