"""Ingestion throughput against the embedder's own throughput on the same chunks.

For the two largest PDFs of the data's ``pdfs/`` folder (the two with the most text; ``--pdf NAME``
names others) and 1,000 SciFact abstracts (one text document each):

* raw:      the default embedder alone on exactly the chunk texts the pipeline produces,
            in batches of EMBEDDING_BATCH_SIZE (for SciFact: the chunks of a block of
            documents, as the bulk path calls it, and each document's own, as the
            one-document pipeline calls it; ``--strategy whole`` makes one chunk per abstract);
* pipeline: bytes -> document_create -> document_ingest (store the file, read it back,
            extract, chunk, embed in batches, swap the chunks in, mark ready), inline;
* bulk:     SciFact only: a block of abstracts created as one batch (``document_create_many``,
            as ``POST /documents/batch``), then ``document_ingest_many`` (the embedder sees
            batches of EMBEDDING_BATCH_SIZE across documents);
* worker tasks: the same block uploaded one by one (``document_create_text`` each) and run as
            one worker runs their queued tasks (``document_ingest_task`` per document, in
            order; a task takes the small documents waiting along).

With ``--baseline REF`` the bulk block also runs through ``document_ingest_many`` as it was
at git REF (the documents package's pipeline modules loaded from that commit beside today's),
interleaved with today's, and both bulk paths report their database time per document
(every SQL statement and commit, the chunk INSERT -- which also updates the chunks' HNSW
and bm25 indexes -- on its own line).

Raw and pipeline runs are interleaved (PDF rounds; SciFact: per abstract, and per block of
50) so that other load on the machine hits both alike.

Pages/s and chunks/s of both, and pipeline / raw. Runs on its own database
(``bench_ingest``) and a temporary MEDIA_ROOT. ``--pdf-extractor pypdf,pdfium`` runs the
PDFs once per PDF_EXTRACTOR value, interleaved in each round (a row per extractor).

    python bench/ingest.py [--data DIR] [--docs 1000] [--rounds 3] [--block 50] [--skip-scifact] [--skip-pdfs]
                           [--pdf NAME ...] [--pdf-extractor pypdf[,pdfium]] [--strategy STRATEGY]
                           [--baseline REF]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import module_at, parse_args, print_table, setup_django, write_results  # noqa: E402

LARGEST_PDFS = 2


def largest_pdfs(folder: Path, count: int = LARGEST_PDFS) -> list[Path]:
    """The ``count`` PDFs of ``folder`` with the most extracted text (pypdf, no password), largest
    first: the ingestion a deployment's big files cost. Files that do not extract (damaged,
    encrypted, scanned without a text layer, empty) are passed over."""
    from memory_engine.extraction import ExtractionError, extract_pages

    sizes = []
    for path in sorted(folder.glob("*.pdf")):
        try:
            pages = extract_pages(path.read_bytes(), "application/pdf", pdf_extractor="pypdf")
        except ExtractionError:
            continue
        sizes.append((sum(len(page.text) for page in pages), path))
    return [path for _, path in sorted(sizes, key=lambda item: (-item[0], item[1].name))[:count]]


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


def baseline_ingest_many(ref: str) -> Callable[..., Any]:
    """``document_ingest_many`` as it was at git ``ref``: the documents package's pipeline modules
    of that commit, loaded under another package name beside today's (bench only)."""
    import memory_engine.services.documents as current

    alias = f"{current.__name__}._baseline"
    package = types.ModuleType(alias)
    package.__path__ = []
    sys.modules[alias] = package
    for name in ("chunk_settings", "grants", "runs", "pipeline"):  # dependencies first
        module_at(ref, f"memory_engine/services/documents/{name}.py", f"{alias}.{name}", alias)
    return sys.modules[f"{alias}.pipeline"].document_ingest_many


class DatabaseClock:
    """Time spent in SQL statements, commits and embedder calls while watching (the chunk
    INSERT on its own: bulk_create's INSERT, or the whole ``insert_rows`` call, which Django's
    execute wrappers do not see), and in the pipeline
    module's ``_swap`` (the swap transaction, from the document locks to the commit)."""

    def __init__(self, provider: Any, pipeline: Any = None) -> None:
        self.provider = provider
        self.pipeline = pipeline
        self.statements = 0
        self.sql_s = self.chunk_insert_s = self.commit_s = self.embed_s = self.swap_s = 0.0

    def _record(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            elapsed = time.perf_counter() - started
            self.statements += 1
            self.sql_s += elapsed
            if sql.startswith('INSERT INTO "memory_engine_chunk"'):
                self.chunk_insert_s += elapsed

    def _timed(self, function: Callable[..., Any], total: str) -> Callable[..., Any]:
        """``function``, adding the seconds of each call to the attribute ``total``."""

        def timed(*args: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args)
            finally:
                setattr(self, total, getattr(self, total) + time.perf_counter() - started)

        return timed

    @contextmanager
    def watch(self) -> Iterator[None]:
        from django.db import connection

        connection.commit = self._timed(connection.commit, "commit_s")  # type: ignore[method-assign]
        self.provider.embed_documents = self._timed(self.provider.embed_documents, "embed_s")
        patched = {}
        if self.pipeline is not None:
            swap, insert_rows = self.pipeline._swap, getattr(self.pipeline, "insert_rows", None)
            timed_swap = self._timed(swap, "swap_s")

            def timed_insert_rows(objs: Any) -> Any:
                started, nested = time.perf_counter(), self.sql_s
                try:
                    return insert_rows(objs)
                finally:
                    elapsed = time.perf_counter() - started
                    self.statements += 1
                    self.sql_s += elapsed - (self.sql_s - nested)
                    self.chunk_insert_s += elapsed

            patched = {"_swap": (swap, timed_swap)}
            if insert_rows is not None:
                patched["insert_rows"] = (insert_rows, timed_insert_rows)
            for name, (_, timed) in patched.items():
                setattr(self.pipeline, name, timed)
        try:
            with connection.execute_wrapper(self._record):
                yield
        finally:
            del connection.commit
            del self.provider.embed_documents
            for name, (original, _) in patched.items():
                setattr(self.pipeline, name, original)

    def per_document(self, documents: int) -> dict[str, float]:
        return {"statements": round(self.statements / documents, 2),
                "sql_ms": round(self.sql_s / documents * 1000, 2),
                "chunk_insert_ms": round(self.chunk_insert_s / documents * 1000, 2),
                "commit_ms": round(self.commit_s / documents * 1000, 2),
                "swap_ms": round(self.swap_s / documents * 1000, 2) if self.pipeline is not None else "-",
                "embed_ms": round(self.embed_s / documents * 1000, 2)}


def worker_tasks(*, document_ids: list[str]) -> list[Any]:
    """The block as one worker runs its queued tasks: ``document_ingest_task`` per document, in
    order (each task takes the small documents still waiting along: document_ingest_group)."""
    from memory_engine.models import Document
    from memory_engine.tasks import document_ingest_task

    for document_id in document_ids:
        document_ingest_task(document_id)
    found = Document.objects.in_bulk(document_ids)
    return [found.get(document_id) for document_id in document_ids]


def run_scifact(data: Path, limit: int, project: Any, provider: Any, batch: int, block: int,
                baseline: str | None = None,
                strategy: str | None = None) -> tuple[list[dict[str, Any]], dict[str, dict[str, float]]]:
    """Blocks of ``block`` abstracts: per abstract the one-document pipeline, then the raw
    embedder on the chunk texts it stored (its calls); then the block through the bulk pipeline
    (``document_ingest_many``) -- and through the ``baseline`` one when given, in alternating
    order -- and the raw embedder on the block's chunk texts in batches (the bulk path's calls),
    so slow phases of a shared machine hit all alike. Also the bulk paths' time per document."""
    from memory_engine.models import Chunk
    from memory_engine.services.documents import (
        NewDocument,
        document_create_many,
        document_create_text,
        document_ingest,
        document_ingest_many,
    )

    def chunk_texts(document_ids: list[str]) -> list[str]:
        rows = Chunk.objects.filter(document_id__in=document_ids).values_list("document_id", "chunk_index", "text")
        order = {document_id: position for position, document_id in enumerate(document_ids)}
        return [text for _, _, text in sorted(rows, key=lambda row: (order[row[0]], row[1]))]

    texts = scifact_texts(data, limit)
    options = {"chunk_strategy": strategy} if strategy else {}

    def create_many(name: str, first: int, part: list[str]) -> list[str]:
        """The block as one batch (POST /documents/batch): document_create_many."""
        return [document.pk for document in document_create_many(project=project, enqueue=False, documents=[
            NewDocument(content=text, path=f"/{name}/{index}.txt", **options)
            for index, text in enumerate(part, start=first)])]

    def create_one_by_one(name: str, first: int, part: list[str]) -> list[str]:
        """The block as separate uploads (POST /documents each): document_create_text."""
        return [document_create_text(project=project, content=text, path=f"/{name}/{index}.txt",
                                     enqueue=False, **options).pk for index, text in enumerate(part, start=first)]

    variants: dict[str, Callable[..., Any]] = {"bulk": document_ingest_many, "worker tasks": worker_tasks}
    creators: dict[str, Callable[..., list[str]]] = {"bulk": create_many, "worker tasks": create_one_by_one}
    if baseline:
        variants[f"bulk at {baseline}"] = baseline_ingest_many(baseline)
        creators[f"bulk at {baseline}"] = create_many
    clocks = {name: DatabaseClock(provider, pipeline=sys.modules[
        (document_ingest_many if variant is worker_tasks else variant).__module__])
        for name, variant in variants.items()}
    creating = {creator: DatabaseClock(provider) for creator in (create_many, create_one_by_one)}
    created_documents = dict.fromkeys(creating, 0)
    bulk_s = dict.fromkeys(variants, 0.0)
    create_s = dict.fromkeys(variants, 0.0)
    raw_batched = raw_single = pipeline = 0.0
    chunks = 0
    for first in range(0, len(texts), block):
        part = texts[first:first + block]
        for index, text in enumerate(part, start=first):
            started = time.perf_counter()
            document = document_create_text(project=project, content=text, path=f"/scifact/{index}.txt",
                                            enqueue=False, **options)
            document = document_ingest(document_id=document.pk)
            pipeline += time.perf_counter() - started
            assert document.status == "ready" and document.unembedded_chunks == 0, document.error
            raw_single += embed_raw(provider, chunk_texts([document.pk]), batch)  # the one-document calls
        order = list(variants) if (first // block) % 2 == 0 else list(reversed(variants))
        block_ids: list[str] = []
        for name in order:
            creator = creators[name]
            started = time.perf_counter()
            with creating[creator].watch():
                ids = creator(name, first, part)
            created = time.perf_counter()
            created_documents[creator] += len(ids)
            with clocks[name].watch():
                documents = variants[name](document_ids=ids)
            bulk_s[name] += time.perf_counter() - started
            create_s[name] += created - started
            assert all(d is not None and d.status == "ready" and d.unembedded_chunks == 0 for d in documents)
            block_ids = ids
        block_texts = chunk_texts(block_ids)
        chunks += len(block_texts)
        raw_batched += embed_raw(provider, block_texts, batch)  # the bulk path's calls
    label = f"SciFact x{limit} ({strategy or 'default'} chunking)"
    rows = [
        _row(f"{label}, one by one, vs raw per document", pages=limit, chunks=chunks, raw_s=raw_single,
             pipeline_s=pipeline),
    ]
    created_by = {"bulk": "batch", "worker tasks": "one by one"}
    rows += [_row(f"{label}, {name} (blocks of {block}, created {created_by.get(name, 'batch')}), vs raw batch "
                  f"{batch}", pages=limit, chunks=chunks, raw_s=raw_batched, pipeline_s=bulk_s[name])
             for name in variants]
    database = {f"{name}: ingest": {**clock.per_document(limit), "wall_ms": round(
        (bulk_s[name] - create_s[name]) / limit * 1000, 2)} for name, clock in clocks.items()}
    database["raw batched (for comparison)"] = {"embed_ms": round(raw_batched / limit * 1000, 2)}
    for creator, clock in creating.items():
        count = created_documents[creator]
        seconds = sum(create_s[name] for name in variants if creators[name] is creator)
        service = "document_create_many" if creator is create_many else "document_create_text"
        database[f"create ({service})"] = {
            **clock.per_document(count), "wall_ms": round(seconds / count * 1000, 2)}
    return rows, database


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
        "cap_with_this_extraction": round(extraction_cap(raw_s, extract_s), 3) if extract_s is not None else None,
    }


#: Issue 20's ingestion target: the pipeline at this share of the raw embedder's throughput or more.
TARGET_SHARE = 0.90


def extraction_cap(raw_s: float, extract_s: float, cores: int | None = None) -> float:
    """The best pipeline / raw a file can reach when its extraction competes with the embedder for
    the cores: the embedder fills them all for ``raw_s``, and the extraction's CPU time has to fit
    beside it, at best spread over every core."""
    cores = cores or os.cpu_count() or 1
    return raw_s / (raw_s + extract_s / cores)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=1000, help="SciFact abstracts to ingest.")
    parser.add_argument("--rounds", type=int, default=3, help="PDF rounds (raw and pipeline interleaved; median).")
    parser.add_argument("--block", type=int, default=50, help="SciFact abstracts per interleaved block.")
    parser.add_argument("--skip-scifact", action="store_true")
    parser.add_argument("--skip-pdfs", action="store_true")
    parser.add_argument("--pdf", action="append", metavar="NAME",
                        help=f"a PDF of the data's pdfs/ folder to ingest (repeat for more; default: the "
                             f"{LARGEST_PDFS} with the most text)")
    parser.add_argument("--pdf-extractor", default="pypdf", metavar="NAMES",
                        help="PDF_EXTRACTOR values to run the PDFs with, comma-separated (e.g. pypdf,pdfium)")
    parser.add_argument("--strategy", help="SciFact chunk strategy (default: the text default; whole = one "
                                           "chunk per abstract)")
    parser.add_argument("--baseline", metavar="REF",
                        help="also run the SciFact bulk blocks through document_ingest_many as of git REF")
    args = parse_args(parser)
    extractors = [name.strip() for name in args.pdf_extractor.split(",") if name.strip()]
    missing = [name for name in args.pdf or [] if not (args.data / "pdfs" / name).is_file()]
    if missing:
        parser.error(f"not in {args.data / 'pdfs'}: {', '.join(missing)}")

    media = tempfile.mkdtemp(prefix="bench-ingest-media-")
    os.environ["MEDIA_ROOT"] = media
    setup_django("bench_ingest")
    from memory_engine.conf import engine_settings
    from memory_engine.models import Project
    from memory_engine.providers.embeddings import require_embedding_provider
    from memory_engine.services.stores import project_delete

    if args.skip_pdfs:
        pdfs = []
    elif args.pdf:
        pdfs = [args.data / "pdfs" / name for name in args.pdf]
    else:
        pdfs = largest_pdfs(args.data / "pdfs")
        print(f"the {len(pdfs)} PDFs with the most text: {', '.join(path.name for path in pdfs)}", file=sys.stderr)
    provider = require_embedding_provider()
    batch = int(engine_settings.EMBEDDING_BATCH_SIZE)
    provider.embed_documents(["warm up the model"] * 4)
    Project.objects.filter(name="bench-ingest").delete()
    project = Project.objects.create(name="bench-ingest")
    rows: list[dict[str, Any]] = []
    database: dict[str, dict[str, float]] = {}
    try:
        if not args.skip_pdfs:
            for path in pdfs:
                rows.extend(run_pdf(path, project, provider, batch, args.rounds, extractors))
        if not args.skip_scifact:
            scifact, database = run_scifact(args.data, args.docs, project, provider, batch, args.block,
                                            args.baseline, args.strategy)
            rows.extend(scifact)
    finally:
        project_delete(project=project)

    print(f"\nembedder: {provider.model_name} ({engine_settings.EMBEDDING['PROVIDER']}), batch {batch}, "
          f"PDFs: median of {args.rounds} interleaved rounds; SciFact: interleaved blocks of {args.block}\n")
    print_table(
        ["corpus", "pages", "chunks", "extract s", "raw s", "pipeline s", "pages/s", "chunks/s", "raw chunks/s",
         "pipeline/raw", "cap", f"≥ {TARGET_SHARE:.0%}"],
        [[r["corpus"], r["pages"], r["chunks"], r["extract_s"] if r["extract_s"] is not None else "-", r["raw_s"],
          r["pipeline_s"], r["pipeline_pages_per_s"], r["pipeline_chunks_per_s"], r["raw_chunks_per_s"],
          f"{r['pipeline_over_raw']:.1%}",
          f"{r['cap_with_this_extraction']:.1%}" if r["cap_with_this_extraction"] is not None else "-",
          "met" if r["pipeline_over_raw"] >= TARGET_SHARE else "not met"] for r in rows],
    )
    print("cap: the best pipeline/raw a PDF can reach when its extraction's CPU time fits beside the embedder "
          f"on {os.cpu_count()} cores")
    if database:
        print("\nper SciFact document: statements, SQL (of which the chunk INSERT), commits, the swap "
              "transaction, embedder calls, wall time (ingest: bulk minus the mean create time)\n")
        print_table(["path", "statements", "SQL ms", "chunk INSERT ms", "commit ms", "swap ms", "embed ms",
                     "wall ms"],
                    [[name, *(d.get(key, "-") for key in ("statements", "sql_ms", "chunk_insert_ms", "commit_ms",
                                                          "swap_ms", "embed_ms", "wall_ms"))]
                     for name, d in database.items()])
    write_results("ingest", {"embedder": provider.model_name, "batch_size": batch, "rounds": args.rounds,
                             "pdf_extractors": extractors,
                             "block": args.block, "baseline": args.baseline, "strategy": args.strategy,
                             "load_average": os.getloadavg(),
                             "rows": rows, "database_per_document": database})


if __name__ == "__main__":
    main()
