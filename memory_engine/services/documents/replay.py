"""Replay: re-derive documents from their raw capture into a staged generation, then promote it.

A :class:`~memory_engine.models.TransformConfig` says how (chunking, the embedding model,
ranking knobs); :func:`replay_run` derives, for the newest raw capture of each matching
document, a ``staged`` DocumentVersion and its chunks with ``Chunk.generation`` = the run.
Live search reads ``generation IS NULL`` only, so nothing a replay writes is visible until
:func:`generation_promote`, which swaps, per document of the run, the live chunks and the
staged ones in one transaction (the live ones are kept under the run, so
:func:`generation_demote` is the same swap backwards). A failed replay deletes what it staged
and records its error; it never writes a live row.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Count, Max, Q
from django.utils import timezone

from memory_engine.chunking import TOKEN_STRATEGIES, ChunkSpec, Page, iter_chunks, validate_chunk_settings
from memory_engine.conf import engine_settings
from memory_engine.db import delete_in_project
from memory_engine.exceptions import (
    EmbeddingFailed,
    EmbeddingModelNotActive,
    IngestionError,
    MemoryEngineError,
    NoText,
    StagedGenerationState,
    TooManyChunks,
    TransformConfigInvalid,
)
from memory_engine.extraction import extract_pages
from memory_engine.models import Chunk, Document, DocumentVersion, Project, RawCapture, ReplayRun, TransformConfig
from memory_engine.models.documents import ChunkStrategy
from memory_engine.providers.embeddings import EmbeddingError, get_embedding_provider
from memory_engine.ranking_knobs import validate_ranking_knobs

from .chunk_settings import DEFAULT_CHUNK_OVERLAP, DEFAULT_CHUNK_SIZE, resolve_chunking
from .pipeline import token_counter
from .tokens import open_password

logger = logging.getLogger("memory_engine.documents")

#: A run's progress: (documents done, documents total).
Progress = Callable[[int, int], None]

#: Runs whose staged chunks generation search may read (a promoted run's chunks are live).
SEARCHABLE = (ReplayRun.Status.COMPLETED, ReplayRun.Status.DEMOTED)
PROMOTABLE = (ReplayRun.Status.COMPLETED, ReplayRun.Status.DEMOTED)
NAME_MAX = 100


def active_embedding() -> tuple[str, str]:
    """(provider, model) of the active embedding model (the registry's, docs/embeddings.md);
    ("", "") when none is configured."""
    provider = get_embedding_provider()
    if provider is None:
        return "", ""
    return provider.provider_name or str(engine_settings.EMBEDDING.get("PROVIDER") or ""), provider.model_name


@transaction.atomic
def transform_config_create(*, project: Project, name: str, chunk_strategy: str = "", chunk_size: int | None = None,
                            chunk_overlap: int | None = None, max_chunks_per_document: int | None = None,
                            embedding_provider: str = "", embedding_model: str = "",
                            search: Any = None, created_by: str = "") -> TransformConfig:
    """A new config, or the next version of ``name`` (configs are immutable: a change is a new version).

    ``search``: ranking knobs (memory_engine.ranking_knobs), checked here.
    Raises TransformConfigInvalid (400, ``details.field``), ChunkSettingsInvalid (400) and
    EmbeddingModelNotActive (400) for a provider or model other than the active one: a staged
    generation's chunks are stored in the active model's columns, so a model that is registered
    but not active (even ready) is refused too; switch to it first (docs/embeddings.md).
    """
    name = (name or "").strip()
    if not name or len(name) > NAME_MAX or any(ch.isspace() and ch != " " for ch in name):
        raise TransformConfigInvalid(f"`name` must be 1 to {NAME_MAX} characters on one line.",
                                     details={"field": "name"})
    search = validate_ranking_knobs(search)
    if max_chunks_per_document is not None and max_chunks_per_document < 1:
        raise TransformConfigInvalid("`max_chunks_per_document` must be at least 1.",
                                     details={"field": "max_chunks_per_document"})
    if chunk_strategy:
        if chunk_strategy not in ChunkStrategy.values:
            raise TransformConfigInvalid(f"`chunk_strategy` must be one of {', '.join(ChunkStrategy.values)}.",
                                         details={"field": "chunk_strategy"})
        requested = {"chunk_strategy": chunk_strategy, "chunk_size": chunk_size, "chunk_overlap": chunk_overlap}
        chunk_strategy, chunk_size, chunk_overlap = resolve_chunking(
            requested={k: v for k, v in requested.items() if v is not None}, rule=None)
    elif chunk_size is not None or chunk_overlap is not None:
        raise TransformConfigInvalid("`chunk_size` and `chunk_overlap` need a `chunk_strategy`.",
                                     details={"field": "chunk_strategy"})
    active_provider, active_model = active_embedding()
    provider, model = embedding_provider or active_provider, embedding_model or active_model
    if (provider, model) != (active_provider, active_model):
        raise EmbeddingModelNotActive(
            details={"embedding_provider": provider, "embedding_model": model,
                     "active_provider": active_provider, "active_model": active_model})
    Project.objects.select_for_update().filter(pk=project.pk).exists()  # serializes the version numbers
    top = TransformConfig.objects.filter(project=project, name=name).aggregate(top=Max("version"))["top"] or 0
    return TransformConfig.objects.create(
        project=project, name=name, version=top + 1, chunk_strategy=chunk_strategy or "", chunk_size=chunk_size,
        chunk_overlap=chunk_overlap, max_chunks_per_document=max_chunks_per_document,
        embedding_provider=provider, embedding_model=model, search=search, created_by=created_by,
    )


def newest_raw_captures(run: ReplayRun) -> list[RawCapture]:
    """The newest raw capture of each document the run covers (capture time, ``source``)."""
    raws = RawCapture.objects.filter(project_id=run.project_id)
    if run.since is not None:
        raws = raws.filter(created_at__gte=run.since)
    if run.until is not None:
        raws = raws.filter(created_at__lt=run.until)
    if run.source:
        raws = raws.filter(document__project_id=run.project_id, document__source=run.source)
    return list(raws.order_by("document_id", "-created_at", "-id").distinct("document_id"))


def replay_start(*, config: TransformConfig, since: datetime | None = None, until: datetime | None = None,
                 source: str = "", started_by: str = "") -> ReplayRun:
    """The run row (``running``), before any work; :func:`replay_execute` does the work."""
    return ReplayRun.objects.create(project_id=config.project_id, config=config, since=since, until=until,
                                    source=source or "", started_by=started_by)


def replay_run(*, config: TransformConfig, since: datetime | None = None, until: datetime | None = None,
               source: str = "", started_by: str = "", on_progress: Progress | None = None) -> ReplayRun:
    """Start and execute a replay in this process; returns the run (``completed`` or ``failed``)."""
    run = replay_start(config=config, since=since, until=until, source=source, started_by=started_by)
    return replay_execute(run=run, on_progress=on_progress)


def replay_execute(*, run: ReplayRun, on_progress: Progress | None = None) -> ReplayRun:
    """Derive every covered document into the run's staged generation; never raises a
    MemoryEngineError: a failure deletes what the run staged and marks it ``failed``."""
    config = TransformConfig.objects.get(project_id=run.project_id, pk=run.config_id)
    this_run = ReplayRun.objects.filter(project_id=run.project_id, pk=run.pk)
    try:
        active = active_embedding()
        if (config.embedding_provider, config.embedding_model) != active:
            raise EmbeddingModelNotActive(details={
                "embedding_provider": config.embedding_provider, "embedding_model": config.embedding_model,
                "active_provider": active[0], "active_model": active[1]})
        raws = newest_raw_captures(run)
        this_run.update(documents_total=len(raws))
        chunks = 0
        for done, raw in enumerate(raws, start=1):
            chunks += _stage_document(run, config, raw)
            this_run.update(documents_done=done, chunks_total=chunks)
            if on_progress is not None:
                on_progress(done, len(raws))
    except Exception as exc:  # noqa: BLE001  (any failure: nothing staged survives, the run says why)
        error = exc if isinstance(exc, MemoryEngineError) else IngestionError(
            f"Replay stopped on an unexpected {type(exc).__name__}.",
            details={"error": f"{type(exc).__name__}: {exc}"[:500]})
        if not isinstance(exc, MemoryEngineError):
            logger.exception("replay crashed", extra={"run": run.pk})
        with transaction.atomic():
            delete_in_project(Chunk.objects.filter(generation=run), run.project_id)
            delete_in_project(DocumentVersion.objects.filter(generation=run), run.project_id)
            this_run.update(status=ReplayRun.Status.FAILED, error=error.as_dict(), finished_at=timezone.now())
    else:
        this_run.update(status=ReplayRun.Status.COMPLETED, finished_at=timezone.now())
    run.refresh_from_db()
    return run


def _chunk_options(config: TransformConfig, document: Document, content_type: str) -> dict[str, Any]:
    if config.chunk_strategy:
        strategy, size, overlap = config.chunk_strategy, config.chunk_size, config.chunk_overlap
    elif document.chunk_strategy:
        strategy, size, overlap = document.chunk_strategy, document.chunk_size, document.chunk_overlap
    else:
        strategy, size, overlap = resolve_chunking(requested={}, rule=None, content_type=content_type)
    chunk_size = size or DEFAULT_CHUNK_SIZE
    chunk_overlap = overlap if size and overlap is not None else DEFAULT_CHUNK_OVERLAP
    validate_chunk_settings(strategy=strategy, chunk_size=chunk_size, chunk_overlap=chunk_overlap,
                            max_chars=engine_settings.MAX_CHUNK_CHARS)
    return {"strategy": strategy, "chunk_size": chunk_size, "chunk_overlap": chunk_overlap,
            "count_tokens": token_counter() if strategy in TOKEN_STRATEGIES else None,
            "max_chars": engine_settings.MAX_CHUNK_CHARS}


def _derive(config: TransformConfig, document: Document, raw: RawCapture) -> list[ChunkSpec]:
    pages: list[Page] = extract_pages(bytes(raw.data), raw.content_type, password=open_password(document),
                                      max_pages=engine_settings.MAX_PDF_PAGES,
                                      pdf_extractor=engine_settings.PDF_EXTRACTOR)
    cap = config.max_chunks_per_document or engine_settings.MAX_CHUNKS_PER_DOCUMENT
    specs: list[ChunkSpec] = []
    for spec in iter_chunks(pages, **_chunk_options(config, document, raw.content_type)):
        if cap is not None and len(specs) >= cap:
            raise TooManyChunks(f"{document.path} makes more than {cap} chunks under {config}.",
                                details={"document_id": document.pk, "max_chunks": cap})
        specs.append(spec)
    if not specs:
        raise NoText(f"No text in the raw capture of {document.path}.",
                     details={"document_id": document.pk, "raw_capture_id": raw.pk})
    return specs


def _embed(specs: list[ChunkSpec]) -> tuple[list[list[float] | None], str]:
    """Every chunk's vector; a failing embedder fails the run (a staged corpus is all or nothing)."""
    provider = get_embedding_provider()
    if provider is None:
        return [None] * len(specs), ""
    size = max(1, engine_settings.EMBEDDING_BATCH_SIZE)
    vectors: list[list[float] | None] = []
    for start in range(0, len(specs), size):
        try:
            vectors.extend(provider.embed_documents([spec.text for spec in specs[start:start + size]]))
        except EmbeddingError as exc:
            raise EmbeddingFailed(f"The embedder failed during the replay: {exc}"[:500]) from exc
    return vectors, provider.model_name


def _stage_document(run: ReplayRun, config: TransformConfig, raw: RawCapture) -> int:
    """One document's staged version and chunks (its own transaction); the chunk count."""
    document = Document.objects.get(project_id=run.project_id, pk=raw.document_id)
    specs = _derive(config, document, raw)
    vectors, model = _embed(specs)
    versions = DocumentVersion.objects.filter(project_id=run.project_id)
    with transaction.atomic():
        Document.objects.select_for_update().filter(project_id=run.project_id, pk=document.pk).exists()  # numbers
        number = (versions.filter(document=document).aggregate(top=Max("number"))["top"] or 0) + 1
        captured = versions.filter(raw_capture=raw, generation__isnull=True).order_by("-number").first()
        version = DocumentVersion.objects.create(
            document=document, project_id=document.project_id, number=number, sha256=raw.content_sha256,
            size_bytes=len(raw.data),
            content_type=raw.content_type, title=(captured.title if captured else document.title),
            status=DocumentVersion.Status.STAGED, generation=run, raw_capture=raw,
            source_class=DocumentVersion.SourceClass.DERIVED, derived_from=captured,
            occurred_at=captured.occurred_at if captured else None,
            captured_by=run.started_by, captured_by_kind=DocumentVersion.CapturedByKind.SYSTEM,
        )
        Chunk.objects.bulk_create(
            [Chunk(document=document, project_id=document.project_id, version=version, generation=run,
                   chunk_index=index, page=spec.page,
                   text=spec.text, embedding=vector, embedding_model=model if vector is not None else "")
             for index, (spec, vector) in enumerate(zip(specs, vectors, strict=True))],
            batch_size=500,
        )
    return len(specs)


def _counts(project_id: str, document_ids: list[str]) -> dict[str, tuple[int, int]]:
    """Per document: (live chunks, live chunks without a vector)."""
    rows = (Chunk.objects.filter(project_id=project_id, document_id__in=document_ids, generation__isnull=True)
            .values("document_id")
            .annotate(total=Count("id"), missing=Count("id", filter=Q(embedding__isnull=True))))
    return {row["document_id"]: (row["total"], row["missing"]) for row in rows}


def _set_live(project_id: str, versions: dict[str, str | None]) -> None:
    """Point each document at its live version and refresh its chunk counts."""
    counts = _counts(project_id, list(versions))
    for document_id, version_id in versions.items():
        total, missing = counts.get(document_id, (0, 0))
        Document.objects.filter(project_id=project_id, pk=document_id).update(
            active_version_id=version_id, total_chunks=total, indexed_chunks=total, unembedded_chunks=missing)


def _captured_at(project_id: str, version_ids: list[str]) -> dict[str, datetime]:
    """When the raw capture behind each version was made (a version without one is left out)."""
    return dict(DocumentVersion.objects.filter(project_id=project_id, pk__in=version_ids,
                                               raw_capture__project_id=project_id)
                .values_list("id", "raw_capture__created_at"))


def _not_newer(live: datetime | None, replayed: datetime | None) -> bool:
    """The live version's raw capture is not newer than the replayed one (unknown: not newer)."""
    return live is None or replayed is None or live <= replayed


@transaction.atomic
def generation_promote(*, run: ReplayRun, by: str) -> ReplayRun:
    """Make a completed (or demoted) generation live in one transaction.

    Per document of the run: its staged version becomes ``active`` and its chunks live; the
    version live until now becomes ``superseded`` and its chunks are kept under the run
    (invisible) so :func:`generation_demote` can flip back. A document whose live version
    comes from a newer raw capture than the one replayed keeps it (its staged version stays
    staged). The chunks an earlier promote
    kept are deleted now: only the newest promote can be undone. StagedGenerationState
    (409) for a run in another state."""
    project_id = run.project_id  # every statement names it (docs/scaling.md)
    run = ReplayRun.objects.select_for_update().get(project_id=project_id, pk=run.pk)
    if run.status not in PROMOTABLE:
        raise StagedGenerationState(f"Only a completed or demoted generation can be promoted; this one is "
                                    f"{run.status}.", details={"status": run.status})
    for earlier in ReplayRun.objects.select_for_update().filter(project_id=project_id, keeps_replaced=True):
        delete_in_project(Chunk.objects.filter(generation=earlier), project_id)
        ReplayRun.objects.filter(project_id=project_id, pk=earlier.pk).update(keeps_replaced=False)
    versions = DocumentVersion.objects.filter(project_id=project_id)
    chunks = Chunk.objects.filter(project_id=project_id)
    rows = list(versions.filter(generation=run, status=DocumentVersion.Status.STAGED).values_list("document_id", "id"))
    replayed = _captured_at(project_id, [version_id for _document_id, version_id in rows])
    documents = list(Document.objects.select_for_update().filter(project_id=project_id, pk__in=[row[0] for row in rows])
                     .order_by("pk"))
    live = _captured_at(project_id, [d.active_version_id for d in documents if d.active_version_id])
    captured = {d.pk: live.get(d.active_version_id) for d in documents if d.active_version_id}
    # A document captured again since the replay read it keeps its newer live version.
    staged = {document_id: version_id for document_id, version_id in rows
              if _not_newer(captured.get(document_id), replayed.get(version_id))}
    replaced = {document.pk: document.active_version_id for document in documents if document.pk in staged}
    now = timezone.now()
    versions.filter(document_id__in=list(staged), status=DocumentVersion.Status.ACTIVE).update(
        status=DocumentVersion.Status.SUPERSEDED)
    chunks.filter(document_id__in=list(staged), generation__isnull=True).update(generation=run)
    chunks.filter(generation=run, version_id__in=list(staged.values())).update(generation=None)
    versions.filter(pk__in=list(staged.values())).update(status=DocumentVersion.Status.ACTIVE, activated_at=now)
    _set_live(project_id, {document_id: version_id for document_id, version_id in staged.items()})
    ReplayRun.objects.filter(project_id=project_id, pk=run.pk).update(
        status=ReplayRun.Status.PROMOTED, promoted_at=now, promoted_by=by, replaced_versions=replaced,
        keeps_replaced=True)
    logger.info("generation promoted", extra={"run": run.pk, "documents": len(staged), "by": by})
    run.refresh_from_db()
    return run


@transaction.atomic
def generation_demote(*, run: ReplayRun, by: str) -> ReplayRun:
    """Undo the newest promote: the run's chunks go back to staged, the ones it replaced are
    live again and their versions ``active``. A document captured again since the promote
    keeps its newer live version. StagedGenerationState (409) when the run is not the
    project's newest promote (or another promote since discarded what it replaced)."""
    project_id = run.project_id  # every statement names it (docs/scaling.md)
    run = ReplayRun.objects.select_for_update().get(project_id=project_id, pk=run.pk)
    if run.status != ReplayRun.Status.PROMOTED or not run.keeps_replaced:
        raise StagedGenerationState("Only the newest promoted generation can be demoted.",
                                    details={"status": run.status, "keeps_replaced": run.keeps_replaced})
    versions = DocumentVersion.objects.filter(project_id=project_id)
    chunks = Chunk.objects.filter(project_id=project_id)
    run_versions = list(versions.filter(generation=run).values_list("document_id", "id"))
    ours = dict(run_versions)
    documents = list(Document.objects.select_for_update().filter(project_id=project_id, pk__in=list(ours))
                     .order_by("pk"))
    still = [document.pk for document in documents if document.active_version_id == ours[document.pk]]
    changed = [document.pk for document in documents if document.pk not in still]
    kept = list(chunks.filter(generation=run, document_id__in=still).values_list("pk", flat=True))
    of_run = [version_id for _document_id, version_id in run_versions]
    # Changed since the promote: the chunks kept for them go; their staged ones (a document the
    # promote skipped as captured again) stay with the run.
    delete_in_project(chunks.filter(generation=run, document_id__in=changed).exclude(version_id__in=of_run),
                      project_id)
    chunks.filter(document_id__in=still, generation__isnull=True, version_id__in=of_run).update(generation=run)
    chunks.filter(pk__in=kept).update(generation=None)
    versions.filter(generation=run, document_id__in=still).update(status=DocumentVersion.Status.STAGED,
                                                                  activated_at=None)
    restored = {document_id: run.replaced_versions.get(document_id) for document_id in still}
    versions.filter(pk__in=[v for v in restored.values() if v]).update(status=DocumentVersion.Status.ACTIVE)
    _set_live(project_id, restored)
    ReplayRun.objects.filter(project_id=project_id, pk=run.pk).update(
        status=ReplayRun.Status.DEMOTED, demoted_at=timezone.now(), demoted_by=by, keeps_replaced=False)
    logger.info("generation demoted", extra={"run": run.pk, "documents": len(still), "by": by})
    run.refresh_from_db()
    return run


__all__ = [
    "PROMOTABLE",
    "SEARCHABLE",
    "active_embedding",
    "generation_demote",
    "generation_promote",
    "newest_raw_captures",
    "replay_execute",
    "replay_run",
    "replay_start",
    "transform_config_create",
]
