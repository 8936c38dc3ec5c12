"""The ingestion pipeline, run by a django-q2 worker (see the package docstring): claim, pages,
chunks, embeddings; the swap that ends a run is :mod:`.swap`."""

from __future__ import annotations

import logging
import queue
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import numpy as np
from django.db import InterfaceError, OperationalError, transaction
from django.utils import timezone

from memory_engine.chunking import ChunkSpec, Page, TokenCounter, estimate_tokens, iter_chunks
from memory_engine.conf import engine_settings
from memory_engine.exceptions import (
    ConverterEmpty,
    ExtractionError,
    FileMissing,
    IngestionError,
    MemoryEngineError,
    NoText,
    NoTextLayer,
    PDFDamaged,
    TooManyChunks,
    UnsupportedContentType,
)
from memory_engine.extraction import extract_pages, iter_pages
from memory_engine.fork_safety import closes_connections
from memory_engine.models import Document, IngestionRule
from memory_engine.models.documents import ChunkStrategy, DocumentStatus
from memory_engine.providers.converters import ConverterRequest, run_converter
from memory_engine.providers.embeddings import EmbeddingError, get_embedding_provider

from .chunk_settings import DEFAULT_CHUNK_OVERLAP, DEFAULT_CHUNK_SIZE
from .runs import Superseded, beat, fail_ingestion, owned, owned_many
from .swap import Embedded, Vector, judge_chunks, swap, update_alike
from .swap import trusted_documents as trusted_documents  # where memory_engine.services.guard_sweep imports it
from .tokens import download_token, new_callback, open_password

logger = logging.getLogger("memory_engine.documents")

#: Native errors after which a rule with native_extraction=first tries its converter.
CONVERTER_FALLBACK_ERRORS = (NoTextLayer, UnsupportedContentType, PDFDamaged)


def document_ingest(*, document_id: str, project_id: str | None = None) -> Document | None:
    """Run (or resume) the ingestion of one document; safe to call twice (idempotent).

    Returns the document as it stands afterwards (None when it no longer exists).
    Database outages propagate: the heartbeat then stalls and the sweep retries.
    It is :func:`document_ingest_many` with one document.
    """
    return document_ingest_many(document_ids=[document_id], project_id=project_id)[0]


def document_ingest_group(*, document_id: str, project_id: str | None = None) -> Document | None:
    """:func:`document_ingest`, taking along other documents that wait for a worker: when the
    document is small (``size_bytes`` at most INGESTION_GROUP_MAX_BYTES), up to
    INGESTION_GROUP_DOCUMENTS − 1 other small pending documents of its project, oldest first,
    go through the same :func:`document_ingest_many` call (the worker's ingestion task).

    Their own queued tasks then find them claimed or ready and do nothing (two queries: the
    document and the others waiting); two workers never ingest a document twice (the claim is
    a locked status change). Returns the document itself as it stands afterwards (None when
    it no longer exists). ``project_id``: as for :func:`document_ingest_many`.
    """
    group = max(1, engine_settings.INGESTION_GROUP_DOCUMENTS)
    limit = engine_settings.INGESTION_GROUP_MAX_BYTES
    documents = Document.objects.filter(pk=document_id)
    document = (documents.filter(project_id=project_id) if project_id is not None else documents).first()
    if document is None:
        return None
    others: list[str] = []
    if group > 1 and document.size_bytes <= limit:
        others = list(
            Document.objects.filter(project_id=document.project_id, status=DocumentStatus.PENDING,
                                    size_bytes__lte=limit)
            .exclude(pk=document_id).order_by("created_at", "id").values_list("pk", flat=True)[: group - 1]
        )
    if document.status != DocumentStatus.PENDING and not others:
        return document  # an earlier task's group took it along, and no other waits: nothing to claim
    return document_ingest_many(document_ids=[document_id, *others], project_id=document.project_id)[0]


def document_ingest_many(*, document_ids: Sequence[str], project_id: str | None = None) -> list[Document | None]:
    """Ingest several documents, the embedder and the database seeing them in batches.

    Documents are claimed EMBEDDING_BATCH_SIZE at a time (one transaction for the group,
    which shares one run token), then extracted and chunked in turn; the chunks of a
    document that fits in one batch wait in a shared queue, and every embedder call takes
    the next EMBEDDING_BATCH_SIZE waiting chunks whichever documents they come from, so many
    small documents cost ceil(chunks / batch) calls instead of one call each. The documents
    whose last chunk has a vector are swapped in together, in one transaction. A document
    with more chunks than a batch (or a streamed PDF) is embedded on its own, with its
    progress beats, as before. Failures stay per document: an extraction error fails that
    document only; a shared swap that fails is retried document by document, so only the
    document it fails on is recorded as failed; and a shared embedder call that fails is
    retried document by document, so only the document it fails on keeps chunks without
    vectors (counted in ``unembedded_chunks``, as for any failed batch). Returns the
    documents as they stand afterwards, in the order given (None for one that no longer
    exists).

    ``project_id``: the documents' project, named in every statement (on a distributed
    PostgreSQL they then run on its node, docs/scaling.md); a document of another project is
    left alone. Without it the documents' projects are looked up first (one statement across
    every node there) and each project's documents go through in turn.
    """
    if project_id is None:
        ingested: dict[str, Document | None] = {}
        for project, ids in _by_project(document_ids).items():
            ingested.update(zip(ids, document_ingest_many(document_ids=ids, project_id=project), strict=True))
        return [ingested.get(document_id) for document_id in document_ids]
    shared = _SharedBatches()
    claims = _Claims(project_id)
    for start in range(0, len(document_ids), shared.batch_size):
        for document, run in claims.claim(document_ids[start:start + shared.batch_size]):
            claims.keep_alive()
            alone: Embedded | None = None
            queued: Embedded | None = None
            with _failure_recorded(document, run):
                specs = _prepare(document, run)
                if specs is None:
                    continue  # streamed and swapped, or waiting for a pending converter
                if shared.provider is None or len(specs) > shared.batch_size:
                    vectors, model = _embed(document, run, specs)
                    alone = Embedded(document, run, specs, vectors, model)
                else:
                    queued = Embedded(document, run, specs, model=shared.model)
            if alone is not None:
                _swap_many([alone])
            if queued is not None:
                _swap_many(shared.add(queued))
    _swap_many(shared.flush())
    found = Document.objects.filter(project_id=project_id).in_bulk(list(document_ids))
    return [found.get(document_id) for document_id in document_ids]


def _by_project(document_ids: Sequence[str]) -> dict[str, list[str]]:
    """The existing ones of ``document_ids`` by project, in the order given."""
    projects = dict(Document.objects.filter(pk__in=list(document_ids)).values_list("pk", "project_id"))
    grouped: dict[str, list[str]] = {}
    for document_id in dict.fromkeys(document_ids):
        if document_id in projects:
            grouped.setdefault(projects[document_id], []).append(document_id)
    return grouped


class _Claims:
    """Claims a project's documents a group at a time and keeps the heartbeat of those still
    processing alive."""

    def __init__(self, project_id: str) -> None:
        self.project_id = project_id
        self.groups: list[tuple[str, list[str]]] = []  # (run, document ids) of the last groups claimed
        self.beaten = time.monotonic()  # the oldest heartbeat of those groups is no older than this

    def claim(self, document_ids: Sequence[str]) -> list[tuple[Document, str]]:
        """Claim the pending ones among ``document_ids`` (one transaction); ``(document, run)`` each.

        ready/failed ones are left alone; processing ones belong to another run (the sweep
        hands stalled ones back as pending).
        """
        run = uuid.uuid4().hex
        now = timezone.now()
        with transaction.atomic():
            found = Document.objects.select_for_update().filter(
                project_id=self.project_id, pk__in=list(document_ids), status=DocumentStatus.PENDING).in_bulk()
            documents = [found[document_id] for document_id in dict.fromkeys(document_ids) if document_id in found]
            for document in documents:
                state = dict(document.converter_state or {})
                if state.get("delivered_pages") is None:  # pages delivered by the callback continue an attempt
                    document.attempts += 1
                state["run"] = run
                document.converter_state = state
                document.status = DocumentStatus.PROCESSING
                document.heartbeat_at = document.updated_at = now
                document.error = None
            update_alike(documents, ["converter_state", "status", "attempts", "heartbeat_at", "error", "updated_at"])
        self.groups = [*self.groups[-2:], (run, [document.pk for document in documents])]
        return [(document, run) for document in documents]

    def keep_alive(self) -> None:
        """Beat the documents of the last groups still processing when their heartbeat grows old
        (a long document may keep the others of its group waiting; one statement)."""
        if time.monotonic() - self.beaten < engine_settings.INGESTION_HEARTBEAT_TIMEOUT / 4:
            return
        owned_many(self.project_id, {document_id: run for run, ids in self.groups for document_id in ids}).update(
            heartbeat_at=timezone.now())
        self.beaten = time.monotonic()


@contextmanager
def _failure_recorded(document: Document, run: str) -> Iterator[None]:
    """Record what stops one document's run on that document (and only there); database
    outages propagate."""
    project_id, document_id = document.project_id, document.pk
    try:
        yield
    except Superseded:
        logger.info("ingestion run superseded", extra={"document_id": document_id, "run": run})
    except MemoryEngineError as exc:  # extraction, chunking, converter, guard: recorded by its code
        fail_ingestion(project_id, document_id, run, exc)
    except (OperationalError, InterfaceError):
        raise
    except Exception as exc:
        logger.exception("ingestion crashed", extra={"document_id": document_id})
        fail_ingestion(project_id, document_id, run, IngestionError(
            f"Ingestion stopped on an unexpected {type(exc).__name__}; re-ingest it, and report it "
            "if it happens again.", details={"error": f"{type(exc).__name__}: {exc}"[:500]}))


class _SharedBatches:
    """The queue of chunks waiting for an embedder call, across documents (FIFO)."""

    def __init__(self) -> None:
        self.provider = get_embedding_provider()
        self.model = self.provider.model_name if self.provider is not None else ""
        self.batch_size = _batch_size()
        self.waiting: list[Embedded] = []
        self.queued = 0  # chunks waiting without a vector

    def add(self, item: Embedded) -> list[Embedded]:
        """Queue a document's chunks; the documents whose chunks all have vectors now."""
        self.waiting.append(item)
        self.queued += len(item.specs)
        done: list[Embedded] = []
        while self.queued >= self.batch_size:
            done.extend(self._embed_next(self.batch_size))
        return done

    def flush(self) -> list[Embedded]:
        """Embed what is left (one call of fewer than a batch); every queued document."""
        done: list[Embedded] = []
        while self.queued:
            done.extend(self._embed_next(self.queued))
        return done

    def _embed_next(self, count: int) -> list[Embedded]:
        assert self.provider is not None
        slices: list[tuple[Embedded, list[ChunkSpec]]] = []
        wanted = count
        for item in self.waiting:
            if wanted == 0:
                break
            part = item.specs[len(item.vectors):len(item.vectors) + wanted]
            if part:
                slices.append((item, part))
                wanted -= len(part)
        try:
            vectors = _compact(self.provider.embed_documents([spec.text for _, part in slices for spec in part]))
        except (OperationalError, InterfaceError):
            raise
        except Exception:  # noqa: BLE001  (retried per document below, where a failure stays that document's)
            for item, part in slices:
                item.vectors.extend(self._embed_alone(item, part))
        else:
            offset = 0
            for item, part in slices:
                item.vectors.extend(vectors[offset:offset + len(part)])
                offset += len(part)
        self.queued -= count - wanted
        done = [item for item in self.waiting if len(item.vectors) == len(item.specs)]
        self.waiting = self.waiting[len(done):]  # FIFO: the finished ones are the first ones
        return done

    def _embed_alone(self, item: Embedded, part: list[ChunkSpec]) -> list[Vector | None]:
        assert self.provider is not None
        try:
            embedded: list[Vector | None] = [*_compact(self.provider.embed_documents([spec.text for spec in part]))]
            return embedded
        except EmbeddingError as exc:
            logger.warning("embedding batch failed; chunks stored without vectors",
                           extra={"document_id": item.document.pk, "error": str(exc)[:200]})
        except (OperationalError, InterfaceError):
            raise
        except Exception as exc:  # noqa: BLE001  (fails this document at its swap)
            item.crash = exc
        return [None] * len(part)


def _prepare(document: Document, run: str) -> list[ChunkSpec] | None:
    """The document's chunks; None when there is nothing left to embed here (a streamed
    PDF was embedded and swapped as it was read, or a pending converter will deliver)."""
    delivered = document.converter_state.get("delivered_pages")
    if delivered is not None:
        pages = [Page(text=page["text"], number=page["page"]) for page in delivered]
    else:
        data = _read_file(document)
        rule = document.ingestion_rule
        native_error: ExtractionError | None = None
        streamed = None
        if rule is None or rule.native_extraction == IngestionRule.NativeExtraction.FIRST:
            try:
                if _streamable(document):
                    streamed = _stream_pdf_pages(document, run, data)
                else:
                    pages = extract_pages(data, document.content_type, password=open_password(document),
                                          max_pages=engine_settings.MAX_PDF_PAGES,
                                          pdf_extractor=engine_settings.PDF_EXTRACTOR)
            except CONVERTER_FALLBACK_ERRORS as exc:
                if rule is None:
                    raise
                native_error = exc
        if streamed is not None:
            _swap_many([Embedded(document, run, *streamed)])
            return None
        skip_native = rule is not None and rule.native_extraction == IngestionRule.NativeExtraction.SKIP
        if rule is not None and (native_error is not None or skip_native):
            converted = _convert(document, run, rule, data, native_error)
            if converted is None:
                return None  # a pending converter will deliver the pages to the callback URL
            pages = converted
    specs = _chunks_within_cap(document, pages)
    if not specs:
        raise NoText("No text was found in the document (every page is empty); check the file or the "
                     "ingestion rule's converter, then re-ingest it.", details={"pages": len(pages)})
    return specs


def token_counter() -> TokenCounter:
    """The embedder's token count; the length estimate when there is none or it fails."""
    provider = get_embedding_provider()
    if provider is None:
        return estimate_tokens
    failed = False

    def count(texts: Sequence[str]) -> list[int]:
        nonlocal failed
        if not failed:
            try:
                return provider.count_tokens(texts)
            except EmbeddingError as exc:
                # Chunks come out a little off in size, never lost: keep going on the estimate.
                failed = True
                logger.warning("token counting failed; chunk sizes are estimated", extra={"error": str(exc)[:200]})
        return estimate_tokens(texts)

    return count


def _chunk_options(document: Document) -> dict[str, Any]:
    """Keyword arguments of ``iter_chunks`` for the document's effective settings."""
    return {
        "strategy": document.chunk_strategy,
        # `whole` stores no size (it uses none); the chunker still wants valid numbers.
        "chunk_size": document.chunk_size or DEFAULT_CHUNK_SIZE,
        "chunk_overlap": document.chunk_overlap if document.chunk_size else DEFAULT_CHUNK_OVERLAP,
        "count_tokens": token_counter(),
        "max_chars": engine_settings.MAX_CHUNK_CHARS,
    }


def _chunks_within_cap(document: Document, pages: Iterable[Page], *, first_index: int = 0,
                       **options: Any) -> list[ChunkSpec]:
    """The document's chunks, numbered from ``first_index``; stops at the first one over the cap.

    Chunking is lazy, so a text that would make millions of chunks costs no more than
    MAX_CHUNKS_PER_DOCUMENT of them before it fails with TOO_MANY_CHUNKS.
    """
    cap = engine_settings.MAX_CHUNKS_PER_DOCUMENT
    specs: list[ChunkSpec] = []
    for spec in iter_chunks(pages, **(options or _chunk_options(document))):
        if cap is not None and first_index + len(specs) >= cap:
            raise TooManyChunks(
                f"The document makes more than {cap} chunks (MAX_CHUNKS_PER_DOCUMENT) with the "
                f"{document.chunk_strategy} strategy; raise MAX_CHUNKS_PER_DOCUMENT, re-ingest with a larger "
                "chunk_size, or split the document.",
                details={"max_chunks": cap, "strategy": document.chunk_strategy, "chunk_size": document.chunk_size},
            )
        specs.append(replace(spec, chunk_index=first_index + len(specs)))
    return specs


def _read_file(document: Document) -> bytes:
    if not document.file:
        raise FileMissing("The document has no stored file; upload it again.")
    try:
        with document.file.open("rb") as handle:
            return handle.read()
    except FileNotFoundError:
        raise FileMissing("The stored file is gone from storage; upload it again.",
                          details={"file": document.file.name}) from None


def _streamable(document: Document) -> bool:
    """PDF pages chunked one per page can be embedded while later pages are still being read."""
    return (document.content_type == "application/pdf" and document.chunk_strategy == ChunkStrategy.PAGE
            and get_embedding_provider() is not None)


_END_OF_PAGES = object()


def _stream_pdf_pages(document: Document, run: str,
                      data: bytes) -> tuple[list[ChunkSpec], list[Vector | None], str]:
    """Read and chunk pages in a helper thread and embed them as they arrive (``page`` strategy only).

    pypdf is pure Python and holds the GIL, and so does most of the chunker; the embedder
    spends its time in native code without it, so reading and chunking page n+1 overlaps
    embedding page n. (pdfium, PDF_EXTRACTOR, runs without the GIL and serializes its calls
    on a lock of its own: extraction.py; the tokenizer that counts a chunk's tokens releases
    it too.) Each embedder call takes the chunks of every page read so far (up to
    EMBEDDING_BATCH_SIZE pages). The chunks are exactly those of ``chunk_pages(pages,
    strategy="page", ...)``: that strategy chunks a page on its own (long ones cut
    recursively), so page by page gives the same chunks. Raises ExtractionError like
    extract_pages, and TOO_MANY_CHUNKS past MAX_CHUNKS_PER_DOCUMENT.
    """
    pages = iter_pages(data, document.content_type, password=open_password(document),
                       max_pages=engine_settings.MAX_PDF_PAGES,
                       pdf_extractor=engine_settings.PDF_EXTRACTOR)
    options = _chunk_options(document)
    arrivals: queue.Queue[Any] = queue.Queue()
    stop = threading.Event()  # the run ended early (a failure, superseded): read no further

    def read() -> None:
        made = 0
        try:
            for page in pages:
                if stop.is_set():
                    close = getattr(pages, "close", None)  # the extractor's document, closed now
                    if close is not None:
                        close()
                    return
                specs = _chunks_within_cap(document, [page], first_index=made, **options)
                made += len(specs)
                arrivals.put(specs)
            arrivals.put(_END_OF_PAGES)
        except BaseException as exc:  # noqa: BLE001  (re-raised in the ingesting thread)
            arrivals.put(exc)

    threading.Thread(target=closes_connections(read), name=f"extract:{document.pk}", daemon=True).start()
    try:
        specs, vectors, model = _embed_batches(document, run, _arrived_batches(arrivals))
    finally:
        stop.set()
    if not specs:
        raise NoText("No text was found in the document (every page is empty).")
    return specs, vectors, model


def _arrived_batches(arrivals: queue.Queue[Any]) -> Iterator[tuple[list[ChunkSpec], bool]]:
    """``(chunks, last)`` of the pages read and chunked so far, each time at least one page has arrived."""
    batch_size = _batch_size()
    finished = False
    while not finished:
        arrived = [arrivals.get()]
        while len(arrived) < batch_size:
            try:
                arrived.append(arrivals.get_nowait())
            except queue.Empty:
                break
        batch: list[ChunkSpec] = []
        for item in arrived:
            if item is _END_OF_PAGES:
                finished = True
            elif isinstance(item, BaseException):
                raise item
            else:
                batch.extend(item)
        if batch:
            yield batch, finished


def _convert(document: Document, run: str, rule: IngestionRule, data: bytes,
             native_error: ExtractionError | None) -> list[Page] | None:
    callback, callback_url, callback_token = new_callback(document)
    state = {**document.converter_state, "callback": callback}
    beat(document.project_id, document.pk, run, converter_state=state)
    document.converter_state = state
    # For callables that answer pending: where to POST the pages, and the header's token.
    document.converter_callback_url = callback_url  # type: ignore[attr-defined]
    document.converter_callback_token = callback_token  # type: ignore[attr-defined]
    file_url, file_token = (download_token(document) if rule.file_delivery == IngestionRule.FileDelivery.DOWNLOAD_URL
                            else ("", ""))
    request = ConverterRequest(
        data=data, content_type=document.content_type, filename=document.original_filename or document.path,
        document=document, callback_url=callback_url, callback_token=callback_token,
        download_url=file_url, download_token=file_token,
    )
    context = {"rule_id": rule.pk}
    if native_error is not None:
        context["native_error"] = native_error.code
    try:
        result = run_converter(rule, request)
    except MemoryEngineError as exc:  # a converter's failure or the outbound guard's refusal
        exc.details = {**exc.details, **context}  # recorded on the document with the rule that ran
        raise
    if not result.pending:
        if not any(page.text.strip() for page in result.pages):
            raise ConverterEmpty("The converter returned no text; check the converter and re-ingest the document.",
                                 details={**context, "pages": len(result.pages)})
        return result.pages
    with transaction.atomic():
        current = owned(document.project_id, document.pk, run).select_for_update().first()
        if current is None:
            raise Superseded()
        state = dict(current.converter_state)
        if state.get("delivered_pages") is not None:  # the callback beat the converter's own answer
            return [Page(text=page["text"], number=page["page"]) for page in state["delivered_pages"]]
        state["awaiting_callback"] = True
        current.converter_state = state
        current.heartbeat_at = timezone.now()
        current.save(update_fields=["converter_state", "heartbeat_at", "updated_at"])
    logger.info("converter pending", extra={"document_id": document.pk, "rule_id": rule.pk})
    return None


def _batch_size() -> int:
    return max(1, engine_settings.EMBEDDING_BATCH_SIZE)


def _compact(vectors: Sequence[Sequence[float]]) -> list[Vector]:
    """float32 rows: a tenth of the memory of lists of floats while a large document waits for its swap."""
    return list(np.asarray(vectors, dtype=np.float32))


def _embed(document: Document, run: str, specs: list[ChunkSpec]) -> tuple[list[Vector | None], str]:
    """Embed the chunks of a whole document batch by batch before the swap."""
    if get_embedding_provider() is None:
        return [None] * len(specs), ""
    batch_size = _batch_size()
    if len(specs) > batch_size:  # progress is worth reporting (one batch: the swap reports it)
        beat(document.project_id, document.pk, run, total_chunks=len(specs), indexed_chunks=0, unembedded_chunks=0)
    batches = ((specs[start:start + batch_size], start + batch_size >= len(specs))
               for start in range(0, len(specs), batch_size))
    _, vectors, model = _embed_batches(document, run, batches, total=len(specs))
    return vectors, model


def _embed_batches(document: Document, run: str, batches: Iterable[tuple[list[ChunkSpec], bool]], *,
                   total: int | None = None) -> tuple[list[ChunkSpec], list[Vector | None], str]:
    """The one embedding loop: ``(chunks, vectors, model)`` of every ``(batch, last)``.

    A failed batch stays without vectors (counted in ``unembedded_chunks``; lexical search
    still finds it). After every batch but the last the heartbeat beats with the progress
    (the swap records the end); ``total`` is the chunk count when known up front, else the
    count so far (streamed pages: the total grows as pages are read).
    """
    provider = get_embedding_provider()
    assert provider is not None
    specs: list[ChunkSpec] = []
    vectors: list[Vector | None] = []
    missing = 0
    for batch, last in batches:
        try:
            vectors.extend(_compact(provider.embed_documents([spec.text for spec in batch])))
        except EmbeddingError as exc:
            vectors.extend([None] * len(batch))
            missing += len(batch)
            logger.warning("embedding batch failed; chunks stored without vectors",
                           extra={"document_id": document.pk, "error": str(exc)[:200]})
        specs.extend(batch)
        if not last:
            beat(document.project_id, document.pk, run, total_chunks=total or len(specs),
                 indexed_chunks=len(specs), unembedded_chunks=missing)
    return specs, vectors, provider.model_name


def _swap_many(items: list[Embedded]) -> None:
    """Swap embedded documents in together; when that fails, one by one, so that a document
    that cannot be swapped fails alone (recorded on it) and the others land."""
    judge_chunks(items)
    if len(items) > 1:
        try:
            swap(items)
            return
        except (OperationalError, InterfaceError):
            raise
        except Exception:  # noqa: BLE001  (each document is swapped again alone; its own error is recorded)
            logger.warning("shared swap failed; swapping document by document", exc_info=True)
    for item in items:
        with _failure_recorded(item.document, item.run):
            swap([item])
