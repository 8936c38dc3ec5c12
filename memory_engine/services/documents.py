"""Documents: accept a file or a text, ingest it into chunks, re-ingest, delete, recover.

The pipeline (:func:`document_ingest`) runs in a django-q2 worker, enqueued on commit:

    claim (pending -> processing, attempts + 1, a fresh ``run`` token)
    -> read the stored file -> native extractor and/or the rule's converter -> pages
    -> chunking (request -> rule -> entry-point default) -> embed in batches
       (``indexed_chunks`` advances and the heartbeat beats after every batch)
    -> ONE transaction deletes the old chunks, inserts the new ones and marks the
       document ready, so search sees the old version or the new one, never a mix.

Every write after the claim is fenced by the run token: a worker that was presumed
dead (and replaced by the sweep) or a run superseded by a re-ingest can no longer
touch the document. Embedding is best-effort: a failed batch is stored without
vectors and counted in ``unembedded_chunks`` (lexical search still finds it).

A converter may answer ``{"status": "pending"}``; the document then waits in
``processing`` until its signed, single-use, expiring callback URL receives the pages
(:func:`converter_callback`), or the sweep fails it with ``CONVERTER_TIMEOUT``.
:func:`document_sweep` (a django-q2 Schedule, see ``memory_engine.tasks``) re-runs
documents whose heartbeat stalled, up to ``INGESTION_MAX_ATTEMPTS``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import queue
import secrets
import threading
import time
import unicodedata
from urllib.parse import unquote
import uuid
from dataclasses import dataclass, replace
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings
from django.core import signing
from django.core.files.base import ContentFile
from django.db import IntegrityError, InterfaceError, OperationalError, connection, transaction
from django.db.models import Sum
from django.urls import NoReverseMatch, reverse
from django.utils import timezone

from memory_engine.chunking import (
    TOKEN_STRATEGIES,
    ChunkingError,
    ChunkSpec,
    Page,
    TokenCounter,
    estimate_tokens,
    iter_chunks,
    validate_chunk_settings,
)
from memory_engine.conf import engine_settings
from memory_engine.exceptions import (
    CallbackRejected,
    DocumentError,
    FileTooLarge,
    NotFound,
    PathInvalid,
    PathTaken,
    QuotaExceeded,
    UnsupportedContentType,
    ValidationFailed,
)
from memory_engine.extraction import (
    NATIVE_CONTENT_TYPES,
    ExtractionError,
    extract_pages,
    iter_pages,
    sniff_content_type,
)
from memory_engine.models import Chunk, Document, IngestionRule, Project
from memory_engine.models.documents import ChunkStrategy, DocumentStatus
from memory_engine.providers.embeddings import EmbeddingError, get_embedding_provider

from .ingestion_rules import rule_for_content_type

logger = logging.getLogger("memory_engine.documents")

#: One stored vector while a run waits for its swap (a float32 row).
Vector = np.ndarray

#: Defaults of the `size` strategy (characters); `recursive` and `page` count tokens and take
#: theirs from CHUNK_SIZE_TOKENS / CHUNK_OVERLAP_TOKENS.
DEFAULT_CHUNK_SIZE = 1000
DEFAULT_CHUNK_OVERLAP = 200
#: Entry-point default: `recursive` for these, `page` (long pages cut recursively) for the rest.
RECURSIVE_CONTENT_TYPES = frozenset({"text/plain", "text/markdown"})
#: Native errors after which a rule with native_extraction=first tries its converter.
CONVERTER_FALLBACK_CODES = frozenset({"NO_TEXT_LAYER", "UNSUPPORTED_CONTENT_TYPE", "PDF_DAMAGED"})
#: converter_state keys that survive a new run (everything else belongs to one run).
PERSISTENT_STATE = ("base_url", "password", "chunk_request")
CALLBACK_SALT = "memory_engine.documents.converter-callback"
DOWNLOAD_SALT = "memory_engine.documents.download"


class IngestionFailure(Exception):
    """Ends a run in ``failed`` with ``error = {code, message, details}``."""

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        self.code, self.message, self.details = code, message, details or {}
        super().__init__(message)


class _Superseded(Exception):
    """The run lost its claim (re-ingested, deleted, or replaced by the sweep)."""


# --- input checks -------------------------------------------------------------------


def normalize_path(raw: str) -> str:
    """``"handbook//hr.pdf"`` -> ``"/handbook/hr.pdf"``; PATH_INVALID for anything that escapes."""
    if not isinstance(raw, str) or not raw.strip():
        raise PathInvalid("The path is empty; use an absolute-style path like /handbook/hr.pdf.")
    path = unicodedata.normalize("NFC", raw.strip())
    bad = [c for c in path if c == "\\" or unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")]
    if bad:
        raise PathInvalid("Paths may not contain backslashes, NUL or control characters.",
                          details={"path": path[:200], "character": f"U+{ord(bad[0]):04X}"})
    segments = [segment for segment in path.split("/") if segment not in ("", ".")]
    decoded = [part for segment in segments for part in unquote(segment).replace("\\", "/").split("/")]
    if ".." in segments or ".." in decoded:  # %2e%2e and %2f..%5c too
        raise PathInvalid("Paths may not contain `..` segments.", details={"path": path[:200]})
    if not segments:
        raise PathInvalid("The path names no file; use something like /handbook/hr.pdf.",
                          details={"path": path[:200]})
    normalized = "/" + "/".join(segments)
    if len(normalized) > 1000:
        raise PathInvalid("Paths are limited to 1000 characters.", details={"length": len(normalized)})
    return normalized


def _default_path(filename: str, fallback: str) -> str:
    name = filename.replace("\\", "/").rsplit("/", 1)[-1].strip()
    name = "".join(c for c in name if unicodedata.category(c) not in ("Cc", "Cf"))
    return normalize_path(name if name not in ("", ".", "..") else fallback)


def lock_project(project: Project) -> None:
    """Serialize quota and path checks of one project (transaction-scoped advisory lock)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                       [f"memory_engine.documents:{project.pk}"])


def project_document_bytes(project: Project) -> int:
    return Document.objects.filter(project=project).aggregate(total=Sum("size_bytes"))["total"] or 0


def _check_quota(project: Project, incoming: int) -> None:
    limit = project.max_document_bytes
    if limit is None:
        limit = engine_settings.MAX_DOCUMENT_BYTES_PER_PROJECT
    if limit is None:
        return
    used = project_document_bytes(project)
    if used + incoming > limit:
        raise QuotaExceeded(
            f"This document ({incoming} bytes) would take the project over its document quota "
            f"({used} of {limit} bytes used); delete documents or raise Project.max_document_bytes.",
            details={"used_bytes": used, "limit_bytes": limit, "incoming_bytes": incoming},
        )


def default_chunk_strategy(content_type: str) -> str:
    """The entry-point default for a content type: `recursive` for text and Markdown, else `page`."""
    return ChunkStrategy.RECURSIVE if content_type in RECURSIVE_CONTENT_TYPES else ChunkStrategy.PAGE


def resolve_chunking(*, requested: dict[str, Any], rule: IngestionRule | None,
                     content_type: str = "") -> tuple[str, int | None, int | None]:
    """Effective (strategy, size, overlap): request -> rule -> entry-point default.

    Size and overlap are tokens for `recursive` and `page`, characters for `size`, and
    None for `whole` (which uses neither), so the document reports what was used.
    """
    strategy = (requested.get("chunk_strategy") or (rule.chunk_strategy if rule else None)
                or default_chunk_strategy(content_type))
    if strategy == ChunkStrategy.WHOLE:
        return strategy, None, None
    in_tokens = strategy in TOKEN_STRATEGIES
    size = requested.get("chunk_size") or (rule.chunk_size if rule else None) or (
        engine_settings.CHUNK_SIZE_TOKENS if in_tokens else DEFAULT_CHUNK_SIZE)
    overlap = requested.get("chunk_overlap")
    if overlap is None and rule is not None:
        overlap = rule.chunk_overlap
    if overlap is None:
        # The default overlap; a smaller chunk keeps a fifth of itself as overlap.
        overlap = min(engine_settings.CHUNK_OVERLAP_TOKENS if in_tokens else DEFAULT_CHUNK_OVERLAP, size // 5)
    try:
        validate_chunk_settings(strategy=strategy, chunk_size=size, chunk_overlap=overlap,
                                max_chars=engine_settings.MAX_CHUNK_CHARS)
    except ChunkingError as exc:
        raise ValidationFailed(exc.message, code=exc.code, details=exc.details) from exc
    return strategy, size, overlap


def chunking_label(strategy: str, size: int | None, overlap: int | None) -> str:
    """``"recursive 200 / overlap 40 tokens"``, ``"size 1000 / overlap 200 characters"``, ``"whole"``."""
    if size is None:
        return strategy
    unit = "tokens" if strategy in TOKEN_STRATEGIES else "characters"
    return f"{strategy} {size} / overlap {overlap} {unit}"


CHUNK_REQUEST_KEYS = ("chunk_strategy", "chunk_size", "chunk_overlap")


def _chunk_request(chunk_strategy: str | None, chunk_size: int | None, chunk_overlap: int | None) -> dict[str, Any]:
    values = dict(zip(CHUNK_REQUEST_KEYS, (chunk_strategy, chunk_size, chunk_overlap), strict=True))
    return {key: value for key, value in values.items() if value not in (None, "")}


# --- secrets at rest and signed URLs ----------------------------------------------------


def _fernet() -> Fernet:
    key = hashlib.sha256(b"memory_engine.pdf-password:" + settings.SECRET_KEY.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(key))


def _seal_password(password: str | None) -> str | None:
    return _fernet().encrypt(password.encode()).decode() if password else None


def _open_password(document: Document) -> str | None:
    sealed = (document.converter_state or {}).get("password")
    if not sealed:
        return None
    try:
        return _fernet().decrypt(sealed.encode()).decode()
    except InvalidToken:
        # SECRET_KEY changed since upload: ask for the password again rather than crash.
        raise IngestionFailure("PDF_ENCRYPTED", "The stored PDF password can no longer be read (the server's "
                               "SECRET_KEY changed); re-ingest with the `password` field set.",
                               {"reason": "password_unreadable"}) from None


def _absolute(document: Document, view_name: str) -> str:
    # The token never goes into the URL (URLs end up in access logs); it travels in the
    # X-Memory-Engine-Token header.
    try:
        path = reverse(f"memory_engine:{view_name}", kwargs={"pk": document.pk})
    except NoReverseMatch:
        path = reverse(view_name, kwargs={"pk": document.pk})
    base = (engine_settings.PUBLIC_BASE_URL or (document.converter_state or {}).get("base_url") or "").rstrip("/")
    return f"{base}{path}"


def download_grant(document: Document) -> tuple[str, str]:
    """``(url, token)`` serving the stored file for DOWNLOAD_URL_TTL seconds to a GET that
    sends the token in the X-Memory-Engine-Token header."""
    expires = int(time.time() + engine_settings.DOWNLOAD_URL_TTL)
    token = signing.dumps({"d": document.pk, "e": expires, "s": document.sha256[:16]}, salt=DOWNLOAD_SALT)
    return _absolute(document, "document-file"), token


def document_for_download(*, document_id: str, token: str) -> Document:
    """The document a download token grants, or 403/410/404."""
    grant = _verified_grant(token, salt=DOWNLOAD_SALT, document_id=document_id, what="download",
                            when_expired="the converter must fetch the file sooner")
    document = Document.objects.filter(pk=document_id).first()
    if document is None or not document.file or document.sha256[:16] != grant.get("s"):
        raise NotFound("The file of this download URL no longer exists.")
    return document


def _verified_grant(token: str, *, salt: str, document_id: str, what: str, when_expired: str) -> dict[str, Any]:
    """The payload of a signed URL token: 403 <WHAT>_SIGNATURE_INVALID, 410 <WHAT>_EXPIRED."""
    prefix = what.upper()
    try:
        grant = signing.loads(token or "", salt=salt)
    except signing.BadSignature:
        raise CallbackRejected(f"The {what} token is missing or invalid; send it in the X-Memory-Engine-Token "
                               "header.", code=f"{prefix}_SIGNATURE_INVALID") from None
    if not isinstance(grant, dict) or grant.get("d") != document_id:
        raise CallbackRejected(f"The {what} URL belongs to another document.", code=f"{prefix}_SIGNATURE_INVALID")
    if grant.get("e", 0) < time.time():
        error = CallbackRejected(f"The {what} URL has expired; {when_expired}.", code=f"{prefix}_EXPIRED")
        error.status_code = 410
        raise error
    return grant


def _new_callback(document: Document) -> tuple[dict[str, Any], str, str]:
    """``(state to keep, callback URL, its single-use token)``."""
    nonce = secrets.token_urlsafe(16)
    expires = int(time.time() + engine_settings.CONVERTER_CALLBACK_TTL)
    token = signing.dumps({"d": document.pk, "n": nonce, "e": expires}, salt=CALLBACK_SALT)
    return {"nonce": nonce, "expires_at": expires}, _absolute(document, "document-converter-callback"), token


# --- creating, re-ingesting, deleting ----------------------------------------------------


@dataclass
class Upload:
    """The bytes and what the client said about them (the type is sniffed, not trusted)."""

    data: bytes
    filename: str = ""
    declared_content_type: str | None = None


def document_create(
    *,
    project: Project,
    upload: Upload,
    path: str | None = None,
    title: str = "",
    tags: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
    chunk_strategy: str | None = None,
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
    password: str | None = None,
    base_url: str = "",
    enqueue: bool = True,
) -> Document:
    """Validate, store the file and create a pending document; enqueue its ingestion on commit.

    Raises FILE_TOO_LARGE (413), EMPTY_FILE (400), UNSUPPORTED_CONTENT_TYPE (415, when
    no native extractor and no rule), PATH_INVALID (400), PATH_TAKEN (409),
    QUOTA_EXCEEDED (429) or CHUNK_SETTINGS_INVALID (400).
    """
    data = upload.data
    if len(data) > engine_settings.MAX_UPLOAD_BYTES:
        raise FileTooLarge(
            f"The file has {len(data)} bytes, more than MAX_UPLOAD_BYTES ({engine_settings.MAX_UPLOAD_BYTES}).",
            details={"bytes": len(data), "max_bytes": engine_settings.MAX_UPLOAD_BYTES},
        )
    try:
        content_type = sniff_content_type(data, filename=upload.filename, declared=upload.declared_content_type)
    except ExtractionError as exc:
        raise DocumentError(exc.message, code=exc.code, details=exc.details) from exc
    rule = rule_for_content_type(project=project, content_type=content_type)
    if rule is None and content_type not in NATIVE_CONTENT_TYPES:
        raise UnsupportedContentType(
            f"{content_type} has no built-in extractor and no ingestion rule matches it; add an "
            f"ingestion rule for {content_type} with a converter.",
            details={"content_type": content_type},
        )
    requested = _chunk_request(chunk_strategy, chunk_size, chunk_overlap)
    strategy, size, overlap = resolve_chunking(requested=requested, rule=rule, content_type=content_type)
    document = Document(
        project=project, title=title or "", content_type=content_type, original_filename=upload.filename[:500],
        size_bytes=len(data), sha256=hashlib.sha256(data).hexdigest(), tags=tags or {}, metadata=metadata or {},
        chunk_strategy=strategy, chunk_size=size, chunk_overlap=overlap, ingestion_rule=rule,
        status=DocumentStatus.PENDING,
        converter_state={"chunk_request": requested, "base_url": base_url,
                         "password": _seal_password(password)},
    )
    document.path = normalize_path(path) if path else _default_path(upload.filename, document.pk)
    with transaction.atomic():
        lock_project(project)
        if Document.objects.filter(project=project, path=document.path).exists():
            raise PathTaken(details={"path": document.path})
        _check_quota(project, len(data))
        document.file.save(_storage_name(upload.filename, content_type), ContentFile(data), save=False)
        try:
            with transaction.atomic():
                document.save(force_insert=True)
        except IntegrityError:
            document.file.storage.delete(document.file.name)
            raise PathTaken(details={"path": document.path}) from None
        if enqueue:
            _enqueue_on_commit(document.pk)
    return document


def _storage_name(filename: str, content_type: str) -> str:
    name = filename.replace("\\", "/").rsplit("/", 1)[-1].strip() or "content"
    if "." not in name:
        name += {"application/pdf": ".pdf", "text/markdown": ".md", "text/plain": ".txt"}.get(content_type, "")
    return name[-200:]


def _enqueue_on_commit(document_id: str) -> None:
    from memory_engine.tasks import enqueue_document_ingest

    transaction.on_commit(lambda: enqueue_document_ingest(document_id))


def document_create_text(
    *,
    project: Project,
    content: str,
    content_type: str | None = None,
    path: str | None = None,
    title: str = "",
    tags: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
    chunk_strategy: str | None = None,
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
    base_url: str = "",
    enqueue: bool = True,
) -> Document:
    """A text or Markdown document; ``recursive`` strategy unless the request or a rule says otherwise."""
    if not isinstance(content, str) or not content.strip():
        raise DocumentError("`content` is empty; send the text to index.", code="EMPTY_FILE")
    declared = content_type or ("text/markdown" if (path or "").lower().endswith((".md", ".markdown"))
                                else "text/plain")
    if declared not in ("text/plain", "text/markdown"):
        raise ValidationFailed("content_type must be text/plain or text/markdown for a text document.",
                               details={"content_type": declared})
    suffix = ".md" if declared == "text/markdown" else ".txt"
    filename = (path or "").rsplit("/", 1)[-1] or f"{_slug(title) or 'text'}{suffix}"
    if path is None:
        path = f"/{_slug(title) or 'text'}-{secrets.token_hex(4)}{suffix}"
    return document_create(
        project=project, upload=Upload(content.encode("utf-8"), filename=filename, declared_content_type=declared),
        path=path, title=title, tags=tags, metadata=metadata, chunk_strategy=chunk_strategy,
        chunk_size=chunk_size, chunk_overlap=chunk_overlap, base_url=base_url, enqueue=enqueue,
    )


def _slug(text: str) -> str:
    from django.utils.text import slugify

    return slugify(text)[:80]


@transaction.atomic
def document_reingest(
    *,
    document: Document,
    chunk_strategy: str | None = None,
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
    password: str | None = None,
    base_url: str = "",
    enqueue: bool = True,
) -> Document:
    """Ingest the stored file again (new chunk settings optional); the old chunks stay until the swap.

    The ingestion rule is resolved again (a converter may have been added or fixed); a run
    in flight is superseded (its writes are fenced off).
    """
    document = Document.objects.select_for_update().get(pk=document.pk)
    state = dict(document.converter_state or {})
    # Only what a client asked for is kept; an old entry-point default ("default_strategy",
    # stored before per-content-type defaults) gives way to today's default.
    stored = state.get("chunk_request") or {}
    previous = _chunk_request(*(stored.get(key) for key in CHUNK_REQUEST_KEYS))
    requested = {**previous, **_chunk_request(chunk_strategy, chunk_size, chunk_overlap)}
    rule = rule_for_content_type(project=document.project, content_type=document.content_type)
    document.chunk_strategy, document.chunk_size, document.chunk_overlap = resolve_chunking(
        requested=requested, rule=rule, content_type=document.content_type)
    state = {key: state[key] for key in PERSISTENT_STATE if key in state}
    state["chunk_request"] = requested
    if password:
        state["password"] = _seal_password(password)
    if base_url:
        state["base_url"] = base_url
    document.ingestion_rule = rule
    document.converter_state = state
    document.status = DocumentStatus.PENDING
    document.error = None
    document.attempts = 0
    document.heartbeat_at = None
    document.save()
    if enqueue:
        _enqueue_on_commit(document.pk)
    return document


@transaction.atomic
def document_delete(*, document: Document) -> None:
    """Delete the document, its chunks and (after commit) its stored file."""
    stored_files_delete_on_commit(names=[document.file.name])
    document.delete()


def stored_files_delete_on_commit(*, names: list[str]) -> None:
    """Remove documents' stored files once the transaction deleting their rows commits
    (a rollback keeps them, as it keeps the rows)."""
    storage = Document._meta.get_field("file").storage
    names = [name for name in names if name]
    if names:
        transaction.on_commit(lambda: [storage.delete(name) for name in names])


# --- the pipeline ------------------------------------------------------------------------


def document_ingest(*, document_id: str) -> Document | None:
    """Run (or resume) the ingestion of one document; safe to call twice (idempotent).

    Returns the document as it stands afterwards (None when it no longer exists).
    Database outages propagate: the heartbeat then stalls and the sweep retries.
    """
    claimed = _claim(document_id)
    if claimed is not None:
        document, run = claimed
        try:
            _run(document, run)
        except _Superseded:
            logger.info("ingestion run superseded", extra={"document_id": document_id, "run": run})
        except IngestionFailure as exc:
            _fail(document_id, run, exc.code, exc.message, exc.details)
        except (OperationalError, InterfaceError):
            raise
        except Exception as exc:
            logger.exception("ingestion crashed", extra={"document_id": document_id})
            _fail(document_id, run, "INGESTION_ERROR",
                  f"Ingestion stopped on an unexpected {type(exc).__name__}; re-ingest it, and report it "
                  "if it happens again.", {"error": f"{type(exc).__name__}: {exc}"[:500]})
    return Document.objects.filter(pk=document_id).first()


def _claim(document_id: str) -> tuple[Document, str] | None:
    with transaction.atomic():
        document = Document.objects.select_for_update().filter(pk=document_id).first()
        if document is None or document.status != DocumentStatus.PENDING:
            # ready/failed: nothing to do; processing: another run owns it (the sweep
            # hands stalled ones back as pending).
            return None
        state = dict(document.converter_state or {})
        run = uuid.uuid4().hex
        resumed = state.get("delivered_pages") is not None
        state["run"] = run
        document.converter_state = state
        document.status = DocumentStatus.PROCESSING
        if not resumed:  # pages arriving through the callback continue the same attempt
            document.attempts += 1
        document.heartbeat_at = timezone.now()
        document.error = None
        document.save(update_fields=["converter_state", "status", "attempts", "heartbeat_at", "error",
                                     "updated_at"])
        return document, run


def _owned(document_id: str, run: str) -> Any:
    return Document.objects.filter(pk=document_id, status=DocumentStatus.PROCESSING, converter_state__run=run)


def _beat(document_id: str, run: str, **fields: Any) -> None:
    if not _owned(document_id, run).update(heartbeat_at=timezone.now(), **fields):
        raise _Superseded()


def _run(document: Document, run: str) -> None:
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
                    pages = extract_pages(data, document.content_type, password=_open_password(document),
                                          max_pages=engine_settings.MAX_PDF_PAGES)
            except ExtractionError as exc:
                if rule is None or exc.code not in CONVERTER_FALLBACK_CODES:
                    raise IngestionFailure(exc.code, exc.message, exc.details) from exc
                native_error = exc
        if streamed is not None:
            _swap(document, run, *streamed)
            return
        skip_native = rule is not None and rule.native_extraction == IngestionRule.NativeExtraction.SKIP
        if rule is not None and (native_error is not None or skip_native):
            converted = _convert(document, run, rule, data, native_error)
            if converted is None:
                return  # a pending converter will deliver the pages to the callback URL
            pages = converted
    specs = _chunks_within_cap(document, pages)
    if not specs:
        raise IngestionFailure("NO_TEXT", "No text was found in the document (every page is empty); check the "
                               "file or the ingestion rule's converter, then re-ingest it.",
                               {"pages": len(pages)})
    vectors, model = _embed(document.pk, run, specs)
    _swap(document, run, specs, vectors, model)


def _token_counter() -> TokenCounter:
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
        "count_tokens": _token_counter(),
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
    try:
        for spec in iter_chunks(pages, **(options or _chunk_options(document))):
            if cap is not None and first_index + len(specs) >= cap:
                raise IngestionFailure(
                    "TOO_MANY_CHUNKS",
                    f"The document makes more than {cap} chunks (MAX_CHUNKS_PER_DOCUMENT) with the "
                    f"{document.chunk_strategy} strategy; raise MAX_CHUNKS_PER_DOCUMENT, re-ingest with a larger "
                    "chunk_size, or split the document.",
                    {"max_chunks": cap, "strategy": document.chunk_strategy, "chunk_size": document.chunk_size},
                )
            specs.append(replace(spec, chunk_index=first_index + len(specs)))
    except ChunkingError as exc:
        raise IngestionFailure(exc.code, exc.message, exc.details) from exc
    return specs


def _read_file(document: Document) -> bytes:
    if not document.file:
        raise IngestionFailure("FILE_MISSING", "The document has no stored file; upload it again.")
    try:
        with document.file.open("rb") as handle:
            return handle.read()
    except FileNotFoundError:
        raise IngestionFailure("FILE_MISSING", "The stored file is gone from storage; upload it again.",
                               {"file": document.file.name}) from None


def _streamable(document: Document) -> bool:
    """PDF pages chunked one per page can be embedded while later pages are still being read."""
    return (document.content_type == "application/pdf" and document.chunk_strategy == ChunkStrategy.PAGE
            and get_embedding_provider() is not None)


_END_OF_PAGES = object()


def _stream_pdf_pages(document: Document, run: str,
                      data: bytes) -> tuple[list[ChunkSpec], list[Vector | None], str]:
    """Read pages in a helper thread and embed them as they arrive (``page`` strategy only).

    pypdf is pure Python and holds the GIL; the embedder spends its time in native code
    without it, so reading page n+1 overlaps embedding page n. Each embedder call takes
    every page read so far (up to EMBEDDING_BATCH_SIZE). The chunks are exactly those of
    ``chunk_pages(pages, strategy="page", ...)`` (a page is chunked on its own, long ones
    cut recursively). Raises ExtractionError like extract_pages.
    """
    provider = get_embedding_provider()
    assert provider is not None
    pages = iter_pages(data, document.content_type, password=_open_password(document),
                       max_pages=engine_settings.MAX_PDF_PAGES)
    arrivals: queue.Queue[Any] = queue.Queue()

    def read() -> None:
        try:
            for page in pages:
                arrivals.put(page)
            arrivals.put(_END_OF_PAGES)
        except BaseException as exc:  # noqa: BLE001  (re-raised in the ingesting thread)
            arrivals.put(exc)

    threading.Thread(target=read, name=f"extract:{document.pk}", daemon=True).start()
    batch_size = max(1, int(engine_settings.EMBEDDING_BATCH_SIZE))
    options = _chunk_options(document)
    specs: list[ChunkSpec] = []
    vectors: list[Vector | None] = []
    missing = 0
    finished = False
    while not finished:
        arrived = [arrivals.get()]
        while len(arrived) < batch_size:
            try:
                arrived.append(arrivals.get_nowait())
            except queue.Empty:
                break
        batch_pages: list[Page] = []
        for item in arrived:
            if item is _END_OF_PAGES:
                finished = True
            elif isinstance(item, BaseException):
                raise item
            else:
                batch_pages.append(item)
        batch = _chunks_within_cap(document, batch_pages, first_index=len(specs), **options)
        if not batch:
            continue
        try:
            vectors.extend(_compact(provider.embed_documents([spec.text for spec in batch])))
        except EmbeddingError as exc:
            vectors.extend([None] * len(batch))
            missing += len(batch)
            logger.warning("embedding batch failed; chunks stored without vectors",
                           extra={"document_id": document.pk, "error": str(exc)[:200]})
        specs.extend(batch)
        if not finished:  # the total grows as pages are read; the swap records the end
            _beat(document.pk, run, total_chunks=len(specs), indexed_chunks=len(specs), unembedded_chunks=missing)
    if not specs:
        raise IngestionFailure("NO_TEXT", "No text was found in the document (every page is empty).")
    return specs, vectors, provider.model_name


def _convert(document: Document, run: str, rule: IngestionRule, data: bytes,
             native_error: ExtractionError | None) -> list[Page] | None:
    from memory_engine.providers.converters import ConverterError, ConverterRequest, run_converter

    callback, callback_url, callback_token = _new_callback(document)
    state = {**document.converter_state, "callback": callback}
    _beat(document.pk, run, converter_state=state)
    document.converter_state = state
    # For callables that answer pending: where to POST the pages, and the header's token.
    document.converter_callback_url = callback_url  # type: ignore[attr-defined]
    document.converter_callback_token = callback_token  # type: ignore[attr-defined]
    file_url, file_token = (download_grant(document) if rule.file_delivery == IngestionRule.FileDelivery.DOWNLOAD_URL
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
    except ConverterError as exc:
        raise IngestionFailure(exc.code, exc.message, {**exc.details, **context}) from exc
    if not result.pending:
        if not any(page.text.strip() for page in result.pages):
            raise IngestionFailure("CONVERTER_EMPTY", "The converter returned no text; check the converter and "
                                   "re-ingest the document.", {**context, "pages": len(result.pages)})
        return result.pages
    with transaction.atomic():
        current = _owned(document.pk, run).select_for_update().first()
        if current is None:
            raise _Superseded()
        state = dict(current.converter_state)
        if state.get("delivered_pages") is not None:  # the callback beat the converter's own answer
            return [Page(text=page["text"], number=page["page"]) for page in state["delivered_pages"]]
        state["awaiting_callback"] = True
        current.converter_state = state
        current.heartbeat_at = timezone.now()
        current.save(update_fields=["converter_state", "heartbeat_at", "updated_at"])
    logger.info("converter pending", extra={"document_id": document.pk, "rule_id": rule.pk})
    return None


def _compact(vectors: Sequence[Sequence[float]]) -> list[Vector]:
    """float32 rows: a tenth of the memory of lists of floats while a large document waits for its swap."""
    return list(np.asarray(vectors, dtype=np.float32))


def _embed(document_id: str, run: str, specs: list[ChunkSpec]) -> tuple[list[Vector | None], str]:
    """Embed batch by batch before the swap; a failed batch stays without vectors."""
    provider = get_embedding_provider()
    vectors: list[Vector | None] = [None] * len(specs)
    if provider is None:
        return vectors, ""
    batch_size = max(1, int(engine_settings.EMBEDDING_BATCH_SIZE))
    if len(specs) > batch_size:  # progress is worth reporting (one batch: the swap reports it)
        _beat(document_id, run, total_chunks=len(specs), indexed_chunks=0, unembedded_chunks=0)
    missing = 0
    for start in range(0, len(specs), batch_size):
        batch = specs[start:start + batch_size]
        try:
            vectors[start:start + len(batch)] = _compact(provider.embed_documents([spec.text for spec in batch]))
        except EmbeddingError as exc:
            missing += len(batch)
            logger.warning("embedding batch failed; chunks stored without vectors",
                           extra={"document_id": document_id, "error": str(exc)[:200]})
        if start + len(batch) < len(specs):  # the swap records the last batch
            _beat(document_id, run, indexed_chunks=start + len(batch), unembedded_chunks=missing)
    return vectors, provider.model_name


def _swap(document: Document, run: str, specs: list[ChunkSpec], vectors: list[Vector | None],
          model: str) -> None:
    """One transaction: document ready, old chunks out, new chunks in.

    The fenced UPDATE comes first: it checks the claim and holds the row lock until the
    commit, so a re-ingest or the sweep cannot interleave with the swap.
    """
    now = timezone.now()
    with transaction.atomic():
        claimed = _owned(document.pk, run).update(
            status=DocumentStatus.READY, error=None, total_chunks=len(specs), indexed_chunks=len(specs),
            unembedded_chunks=sum(vector is None for vector in vectors), ingested_at=now, heartbeat_at=now,
            converter_state=_persistent(document.converter_state), updated_at=now,
        )
        if not claimed:
            raise _Superseded()
        Chunk.objects.filter(document_id=document.pk).delete()
        Chunk.objects.bulk_create(
            [
                Chunk(document_id=document.pk, chunk_index=spec.chunk_index, page=spec.page, text=spec.text,
                      embedding=vector, embedding_model=model if vector is not None else "")
                for spec, vector in zip(specs, vectors, strict=True)
            ],
            batch_size=500,
        )


def _persistent(state: dict[str, Any] | None) -> dict[str, Any]:
    return {key: value for key, value in (state or {}).items() if key in PERSISTENT_STATE}


def _fail(document_id: str, run: str | None, code: str, message: str, details: dict[str, Any]) -> bool:
    """Mark failed (fenced by ``run`` when given); the previous chunks, if any, stay searchable."""
    with transaction.atomic():
        query = _owned(document_id, run) if run else Document.objects.filter(pk=document_id)
        document = query.select_for_update().first()
        if document is None:
            return False
        kept = Chunk.objects.filter(document=document)
        count = kept.count()
        document.status = DocumentStatus.FAILED
        document.error = {"code": code, "message": message, "details": details}
        document.total_chunks = document.indexed_chunks = count
        document.unembedded_chunks = kept.filter(embedding__isnull=True).count() if count else 0
        document.heartbeat_at = timezone.now()
        document.converter_state = _persistent(document.converter_state)
        document.save()
    logger.info("ingestion failed", extra={"document_id": document_id, "code": code})
    return True


# --- pending converters ----------------------------------------------------------------


def converter_callback(*, document_id: str, token: str, body: bytes, signature: str | None) -> Document:
    """Accept pages from a pending converter: signed, single use, before expiry.

    403 CALLBACK_SIGNATURE_INVALID (forged token or, when the rule has a secret, a missing
    or wrong ``X-Memory-Engine-Signature``), 410 CALLBACK_EXPIRED, 409 CALLBACK_USED.
    On success the document goes back to ``pending`` and a worker finishes it.
    """
    from memory_engine.providers.converters import ConverterError, parse_answer
    from memory_engine.providers.converters.http import signature_matches

    grant = _verified_grant(token, salt=CALLBACK_SALT, document_id=document_id, what="callback",
                            when_expired="re-ingest the document to ask the converter again")
    with transaction.atomic():
        document = Document.objects.select_for_update().filter(pk=document_id).first()
        if document is None:
            raise NotFound("The document of this callback no longer exists.")
        state = dict(document.converter_state or {})
        callback = dict(state.get("callback") or {})
        if callback.get("nonce") != grant.get("n") or callback.get("used"):
            error = CallbackRejected("This callback URL was already used (or superseded by a newer ingestion).",
                                     code="CALLBACK_USED")
            error.status_code = 409
            raise error
        rule = document.ingestion_rule
        if rule is not None and rule.converter_secret and not signature_matches(rule.converter_secret, body,
                                                                                  signature):
            raise CallbackRejected("The X-Memory-Engine-Signature header does not match the body.",
                                   code="CALLBACK_SIGNATURE_INVALID")
        try:
            result = parse_answer(json.loads(body or b"null"), source="callback")
        except ValueError as exc:
            raise ValidationFailed("The body is not JSON; send {\"pages\": [...]}.",
                                   code="CALLBACK_BODY_INVALID") from exc
        except ConverterError as exc:
            if exc.code != "CONVERTER_FAILED":
                raise ValidationFailed(exc.message, code="CALLBACK_BODY_INVALID", details=exc.details) from exc
            state["callback"] = {**callback, "used": True}
            document.converter_state = state
            document.save(update_fields=["converter_state", "updated_at"])
            _fail(document_id, state.get("run"), exc.code, exc.message, exc.details)
            document.refresh_from_db()
            return document
        if result.pending:
            raise ValidationFailed("Send the pages: {\"pages\": [...]}.", code="CALLBACK_BODY_INVALID")
        callback["used"] = True
        state["callback"] = callback
        state["delivered_pages"] = [{"text": page.text, "page": page.number} for page in result.pages]
        document.converter_state = state
        if state.get("awaiting_callback") and document.status == DocumentStatus.PROCESSING:
            document.status = DocumentStatus.PENDING
            _enqueue_on_commit(document.pk)
        # else the converter's own run is still in flight and picks the pages up itself.
        document.heartbeat_at = timezone.now()
        document.save()
    return document


# --- recovery ------------------------------------------------------------------------


def document_sweep() -> dict[str, int]:
    """Re-run stalled ingestions, fail the hopeless ones, time out pending converters.

    * processing, waiting for a converter callback past its expiry -> failed CONVERTER_TIMEOUT;
    * processing with a heartbeat older than INGESTION_HEARTBEAT_TIMEOUT (worker died) ->
      pending again and re-enqueued, or failed INGESTION_STALLED after INGESTION_MAX_ATTEMPTS;
    * pending for longer than the timeout (its task was lost) -> enqueued again.
    """
    now = timezone.now()
    stale_before = now - timezone.timedelta(seconds=engine_settings.INGESTION_HEARTBEAT_TIMEOUT)
    max_attempts = int(engine_settings.INGESTION_MAX_ATTEMPTS)
    counts = {"requeued": 0, "failed": 0, "timed_out": 0, "skipped": 0}
    for document in Document.objects.filter(status=DocumentStatus.PROCESSING).only("pk", "converter_state",
                                                                                  "heartbeat_at"):
        state = document.converter_state or {}
        if state.get("awaiting_callback"):
            expires = (state.get("callback") or {}).get("expires_at", 0)
            if expires < time.time() and _fail(
                document.pk, state.get("run"), "CONVERTER_TIMEOUT",
                "The converter said it would deliver the pages later but nothing arrived before the callback "
                "URL expired; check the converter, then re-ingest the document.",
                {"expired_at": expires},
            ):
                counts["timed_out"] += 1
        elif document.heartbeat_at is None or document.heartbeat_at < stale_before:
            counts[_recover(document.pk, stale_before, max_attempts)] += 1
    stuck = Document.objects.filter(status=DocumentStatus.PENDING, updated_at__lt=stale_before)
    for document_id in stuck.values_list("pk", flat=True):
        # Touch the row so a long queue gets one extra task per timeout, not one per sweep;
        # a duplicate is harmless (the claim turns it into a no-op).
        if Document.objects.filter(pk=document_id, status=DocumentStatus.PENDING,
                                   updated_at__lt=stale_before).update(updated_at=now):
            _enqueue_on_commit(document_id)
            counts["requeued"] += 1
    if any(counts.values()):
        logger.info("ingestion sweep: %s", counts)
    return counts


def _recover(document_id: str, stale_before: Any, max_attempts: int) -> str:
    with transaction.atomic():
        document = Document.objects.select_for_update(skip_locked=True).filter(
            pk=document_id, status=DocumentStatus.PROCESSING).first()
        if document is None or (document.heartbeat_at and document.heartbeat_at >= stale_before):
            return "skipped"  # finished, re-ingested or claimed by another sweep meanwhile
        if document.attempts >= max_attempts:
            run = (document.converter_state or {}).get("run")
            _fail(document.pk, run, "INGESTION_STALLED",
                  f"The worker stopped responding {document.attempts} times (no heartbeat for "
                  f"{engine_settings.INGESTION_HEARTBEAT_TIMEOUT}s); the file may be too slow to process. "
                  "Check the worker logs, then re-ingest it.", {"attempts": document.attempts})
            return "failed"
        document.status = DocumentStatus.PENDING
        document.converter_state = _persistent(document.converter_state)
        document.heartbeat_at = timezone.now()
        document.save()
        _enqueue_on_commit(document.pk)
        return "requeued"
