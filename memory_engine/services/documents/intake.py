"""Accepting documents: a file or a text, re-ingesting, deleting; every check before a row exists."""

from __future__ import annotations

import hashlib
import secrets
import unicodedata
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from django.core.files.base import ContentFile
from django.db import IntegrityError, transaction
from django.db.models import Sum
from django.utils.text import slugify

from memory_engine.conf import engine_settings
from memory_engine.db import lock_project_documents
from memory_engine.exceptions import (
    EmptyFile,
    FileTooLarge,
    PathInvalid,
    PathTaken,
    QuotaExceeded,
    UnsupportedContentType,
    ValidationFailed,
)
from memory_engine.extraction import NATIVE_CONTENT_TYPES, sniff_content_type
from memory_engine.models import Document, Project
from memory_engine.models.documents import DocumentStatus
from memory_engine.queue import enqueue_document_ingest_on_commit

from ..ingestion_rules import rule_for_content_type
from .chunk_settings import CHUNK_REQUEST_KEYS, chunk_request, resolve_chunking
from .grants import seal_password
from .runs import PERSISTENT_STATE


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
    content_type = sniff_content_type(data, filename=upload.filename, declared=upload.declared_content_type)
    rule = rule_for_content_type(project=project, content_type=content_type)
    if rule is None and content_type not in NATIVE_CONTENT_TYPES:
        raise UnsupportedContentType(
            f"{content_type} has no built-in extractor and no ingestion rule matches it; add an "
            f"ingestion rule for {content_type} with a converter.",
            details={"content_type": content_type},
        )
    requested = chunk_request(chunk_strategy, chunk_size, chunk_overlap)
    strategy, size, overlap = resolve_chunking(requested=requested, rule=rule, content_type=content_type)
    document = Document(
        project=project, title=title or "", content_type=content_type, original_filename=upload.filename[:500],
        size_bytes=len(data), sha256=hashlib.sha256(data).hexdigest(), tags=tags or {}, metadata=metadata or {},
        chunk_strategy=strategy, chunk_size=size, chunk_overlap=overlap, ingestion_rule=rule,
        status=DocumentStatus.PENDING,
        converter_state={"chunk_request": requested, "base_url": base_url,
                         "password": seal_password(password)},
    )
    document.path = normalize_path(path) if path else _default_path(upload.filename, document.pk)
    with transaction.atomic():
        lock_project_documents(project.pk)
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
            enqueue_document_ingest_on_commit(document.pk)
    return document


def _storage_name(filename: str, content_type: str) -> str:
    name = filename.replace("\\", "/").rsplit("/", 1)[-1].strip() or "content"
    if "." not in name:
        name += {"application/pdf": ".pdf", "text/markdown": ".md", "text/plain": ".txt"}.get(content_type, "")
    return name[-200:]


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
        raise EmptyFile("`content` is empty; send the text to index.")
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
    previous = chunk_request(*(stored.get(key) for key in CHUNK_REQUEST_KEYS))
    requested = {**previous, **chunk_request(chunk_strategy, chunk_size, chunk_overlap)}
    rule = rule_for_content_type(project=document.project, content_type=document.content_type)
    document.chunk_strategy, document.chunk_size, document.chunk_overlap = resolve_chunking(
        requested=requested, rule=rule, content_type=document.content_type)
    state = {key: state[key] for key in PERSISTENT_STATE if key in state}
    state["chunk_request"] = requested
    if password:
        state["password"] = seal_password(password)
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
        enqueue_document_ingest_on_commit(document.pk)
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

    def delete_files() -> None:
        for name in names:
            storage.delete(name)

    if names:
        transaction.on_commit(delete_files)
