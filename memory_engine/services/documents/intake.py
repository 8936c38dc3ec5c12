"""Accepting documents: a file or a text, re-ingesting, deleting; every check before a row exists.
Many documents at once: :mod:`.batch`, which makes its rows with the helpers here."""

from __future__ import annotations

import hashlib
import json
import secrets
import unicodedata
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any
from urllib.parse import unquote

from django.core.files.base import ContentFile
from django.db import IntegrityError, transaction
from django.db.models import Max, Sum
from django.utils import timezone
from django.utils.text import slugify

from memory_engine.conf import engine_settings
from memory_engine.db import allow_ledger_erasure, delete_in_project, lock_project_documents
from memory_engine.exceptions import (
    EmptyFile,
    ExternalRefInvalid,
    FileTooLarge,
    PathInvalid,
    PathTaken,
    QuotaExceeded,
    TitleTooLong,
    UnsupportedContentType,
    ValidationFailed,
)
from memory_engine.extraction import (
    NATIVE_CONTENT_TYPES,
    TEXT_MARKDOWN,
    TEXT_PLAIN,
    looks_like_markdown,
    sniff_content_type,
)
from memory_engine.models import Chunk, Document, DocumentVersion, IngestionRule, Project, RawCapture
from memory_engine.models.documents import DocumentStatus
from memory_engine.models.retention import RetentionClass
from memory_engine.policy import check_legal_hold
from memory_engine.queue import enqueue_document_ingest_on_commit

from ..entities import entities_drop_unnamed, entities_named_by
from ..ingestion_rules import rule_for_content_type
from .chunk_settings import CHUNK_REQUEST_KEYS, chunk_request, resolve_chunking
from .runs import persistent_state
from .tokens import seal_password


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


@dataclass
class Lineage:
    """What a capture says about where its content comes from (recorded on the version)."""

    provenance: str = DocumentVersion.Provenance.UNKNOWN
    source_class: str = DocumentVersion.SourceClass.NATIVE
    occurred_at: datetime | None = None
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    captured_by: str = ""
    captured_by_kind: str = DocumentVersion.CapturedByKind.SYSTEM
    derived_from: DocumentVersion | None = None
    retention_class: str = RetentionClass.DURABLE


class CaptureStatus(StrEnum):
    CREATED = "created"
    NOOP = "noop"
    UPDATED = "updated"


@dataclass
class Capture:
    """The outcome of :func:`document_capture`."""

    document: Document
    version: DocumentVersion
    status: CaptureStatus
    raw_capture: RawCapture


#: Longest ``source`` and ``external_ref`` (the columns).
MAX_SOURCE_CHARS = 50
MAX_EXTERNAL_REF_CHARS = 500


def check_identity(source: str, external_ref: str | None) -> None:
    """EXTERNAL_REF_INVALID for an empty, overlong or unprintable source or external_ref."""
    values = {"source": (source, MAX_SOURCE_CHARS)}
    if external_ref is not None:
        values["external_ref"] = (external_ref, MAX_EXTERNAL_REF_CHARS)
    for name, (value, limit) in values.items():
        if not isinstance(value, str) or not value.strip():
            raise ExternalRefInvalid(f"`{name}` is empty.", details={"field": name})
        if len(value) > limit:
            raise ExternalRefInvalid(f"`{name}` is longer than {limit} characters.",
                                     details={"field": name, "length": len(value), "max_length": limit})
        if any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in value):
            raise ExternalRefInvalid(f"`{name}` contains control characters.", details={"field": name})


def check_title(title: str) -> None:
    limit = min(engine_settings.MAX_TITLE_CHARS, Document._meta.get_field("title").max_length or 500)
    if len(title or "") > limit:
        raise TitleTooLong(
            f"The title has {len(title)} characters; the limit is {limit} (MAX_TITLE_CHARS).",
            details={"length": len(title), "max_length": limit})


def document_create(*, project: Project, upload: Upload, **arguments: Any) -> Document:
    """Validate, store the file and create a pending document; enqueue its ingestion on commit.

    A capture without an identity: :func:`document_capture` with ``external_ref=None``
    (PATH_TAKEN when the path is taken). Returns the new document.
    """
    return document_capture(project=project, upload=upload, external_ref=None, **arguments).document


def document_capture(
    *,
    project: Project,
    upload: Upload,
    source: str = "upload",
    external_ref: str | None = None,
    path: str | None = None,
    title: str = "",
    tags: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
    chunk_strategy: str | None = None,
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
    password: str | None = None,
    base_url: str = "",
    lineage: Lineage | None = None,
    enqueue: bool = True,
) -> Capture:
    """Capture a source: store its raw input once, then create, update or leave the document.

    Without ``external_ref`` this creates a document (PATH_TAKEN when ``path`` is taken).
    With it, (project, ``source``, ``external_ref``) names the document: none yet ->
    ``created``; the same content as its live (or pending) version -> ``noop`` (only
    ``last_seen_at`` moves); other content -> ``updated``: a new pending version whose
    ingestion replaces the live one when it is ready. A pending version not yet ingested
    is superseded by a newer capture (the newest content wins; its run is fenced off).
    The raw capture and the version derived from it are written in one transaction.

    Raises FILE_TOO_LARGE (413), EMPTY_FILE (400), TITLE_TOO_LONG (400),
    EXTERNAL_REF_INVALID (400), UNSUPPORTED_CONTENT_TYPE (415, when no native extractor
    and no rule), PATH_INVALID (400), PATH_TAKEN (409), QUOTA_EXCEEDED (429) or
    CHUNK_SETTINGS_INVALID (400).
    """
    data = upload.data
    checked = _check_upload(project=project, upload=upload, source=source, external_ref=external_ref, title=title,
                            chunking=(chunk_strategy, chunk_size, chunk_overlap))
    content_type, rule, requested = checked.content_type, checked.rule, checked.requested
    lineage = lineage or Lineage()
    parameters = _capture_parameters(upload, checked, source=source, external_ref=external_ref, path=path,
                                     title=title, tags=tags, metadata=metadata)
    with transaction.atomic():
        lock_project_documents(project.pk)
        existing = None
        if external_ref is not None:
            existing = (Document.objects.select_for_update()
                        .filter(project=project, source=source, external_ref=external_ref).first())
        if existing is None:
            document = _new_document(project, upload, checked, source=source, external_ref=external_ref, path=path,
                                     title=title, tags=tags, metadata=metadata, password=password,
                                     base_url=base_url)
            if Document.objects.filter(project=project, path=document.path).exists():
                raise PathTaken(details={"path": document.path})
            _check_quota(project, len(data))
            _store_file(document, upload, content_type)
            try:
                with transaction.atomic():
                    document.save(force_insert=True)
            except IntegrityError:
                document.file.storage.delete(document.file.name)
                raise PathTaken(details={"path": document.path}) from None
            raw = raw_capture_store(document=document, data=data, content_type=content_type,
                                    parameters=parameters, first=True)
            version = _new_version(document, number=1, raw=raw, lineage=lineage)
            outcome = CaptureStatus.CREATED
        else:
            document = existing
            raw = raw_capture_store(document=document, data=data, content_type=content_type,
                                    parameters=parameters)
            current = _current_version(document)
            if current is not None and current.sha256 == checked.sha256:
                Document.objects.filter(project_id=document.project_id, pk=document.pk).update(
                    last_seen_at=timezone.now())
                document.refresh_from_db()
                return Capture(document=document, version=current, status=CaptureStatus.NOOP, raw_capture=raw)
            version = _update(document, upload=upload, data=data, raw=raw, content_type=content_type,
                              rule=rule, requested=requested, chunking=checked.chunking, path=path,
                              title=title, tags=tags, metadata=metadata, password=password,
                              base_url=base_url, lineage=lineage)
            outcome = CaptureStatus.UPDATED
        if enqueue:
            enqueue_document_ingest_on_commit(document.pk, document.project_id)
    return Capture(document=document, version=version, status=outcome, raw_capture=raw)


@dataclass
class _Checked:
    """An upload that passed the checks: its sniffed type and what it is ingested with."""

    content_type: str
    rule: IngestionRule | None
    requested: dict[str, Any]
    chunking: tuple[str, int | None, int | None]
    sha256: str


def _check_upload(*, project: Project, upload: Upload, source: str, external_ref: str | None, title: str,
                  chunking: tuple[str | None, int | None, int | None],
                  rules: dict[str, IngestionRule | None] | None = None) -> _Checked:
    """Every check of a capture that needs no lock: size, identity, title, content type (a rule
    or a native extractor), chunk settings. ``rules``: the rule found for each content type so
    far (a batch looks each type up once)."""
    data = upload.data
    if len(data) > engine_settings.MAX_UPLOAD_BYTES:
        raise FileTooLarge.sized(len(data), engine_settings.MAX_UPLOAD_BYTES)
    check_identity(source, external_ref)
    check_title(title)
    content_type = sniff_content_type(data, filename=upload.filename, declared=upload.declared_content_type)
    rules = {} if rules is None else rules
    if content_type not in rules:
        rules[content_type] = rule_for_content_type(project=project, content_type=content_type)
    rule = rules[content_type]
    if rule is None and content_type not in NATIVE_CONTENT_TYPES:
        raise UnsupportedContentType(
            f"{content_type} has no built-in extractor and no ingestion rule matches it; add an "
            f"ingestion rule for {content_type} with a converter.",
            details={"content_type": content_type},
        )
    requested = chunk_request(*chunking)
    return _Checked(content_type=content_type, rule=rule, requested=requested,
                    chunking=resolve_chunking(requested=requested, rule=rule, content_type=content_type),
                    sha256=hashlib.sha256(data).hexdigest())


def _capture_parameters(upload: Upload, checked: _Checked, *, source: str, external_ref: str | None,
                        path: str | None, title: str, tags: dict[str, Any] | None,
                        metadata: dict[str, Any] | None) -> dict[str, Any]:
    """The request's parameters as its raw capture records them."""
    return {
        "source": source, "external_ref": external_ref, "path": path, "title": title, "filename": upload.filename,
        "declared_content_type": upload.declared_content_type, "content_type": checked.content_type,
        "tags": tags, "metadata": metadata, "chunk_request": checked.requested,
    }


def _new_document(project: Project, upload: Upload, checked: _Checked, *, source: str, external_ref: str | None,
                  path: str | None, title: str, tags: dict[str, Any] | None, metadata: dict[str, Any] | None,
                  password: str | None, base_url: str, access_tags: list[str] | None = None) -> Document:
    """A new pending document (not saved, no file yet) at its normalized path (PATH_INVALID)."""
    strategy, size, overlap = checked.chunking
    document = Document(
        project=project, title=title or "", content_type=checked.content_type,
        original_filename=upload.filename[:500], size_bytes=len(upload.data), sha256=checked.sha256,
        tags=tags or {}, metadata=metadata or {}, chunk_strategy=strategy, chunk_size=size,
        chunk_overlap=overlap, ingestion_rule=checked.rule, status=DocumentStatus.PENDING,
        source=source, external_ref=external_ref, last_seen_at=timezone.now(),
        converter_state={"chunk_request": checked.requested, "base_url": base_url,
                         "password": seal_password(password)},
        access_tags=access_tags or [],
    )
    if path:
        document.path = normalize_path(path)
    elif external_ref is not None:
        document.path = normalize_path(f"/{source}/{external_ref}")
    else:
        document.path = _default_path(upload.filename, document.pk)
    return document


def raw_capture_store(*, document: Document, data: bytes, content_type: str,
                      parameters: dict[str, Any], first: bool = False) -> RawCapture:
    """The document's raw capture of ``data`` with ``parameters``: the stored row when the same
    payload was captured before (rows are append-only; nothing here updates one). ``first``: the
    document was created in this transaction, so there is nothing stored to look for."""
    row = _raw_capture_row(document=document, data=data, content_type=content_type, parameters=parameters)
    stored = None if first else RawCapture.objects.filter(project_id=document.project_id, document=document,
                                                           payload_sha256=row.payload_sha256).first()
    if stored is not None:
        return stored
    row.save(force_insert=True)
    return row


def _raw_capture_row(*, document: Document, data: bytes, content_type: str, parameters: dict[str, Any]) -> RawCapture:
    """The raw capture of ``data`` with ``parameters`` (not saved)."""
    digest = hashlib.sha256()
    digest.update(json.dumps(parameters, sort_keys=True, default=str).encode())
    digest.update(b"\0")
    digest.update(data)
    return RawCapture(
        project_id=document.project_id, document=document, payload_sha256=digest.hexdigest(),
        content_sha256=hashlib.sha256(data).hexdigest(), data=data, content_type=content_type,
        parameters=parameters)


def _store_file(document: Document, upload: Upload, content_type: str) -> None:
    document.file.save(_storage_name(upload.filename, content_type), ContentFile(upload.data), save=False)


def _current_version(document: Document) -> DocumentVersion | None:
    """The version a new capture is compared with: the one being ingested, else the live one."""
    versions = DocumentVersion.objects.filter(project_id=document.project_id, document=document)
    pending = versions.filter(status=DocumentVersion.Status.PENDING).order_by("-number").first()
    if pending is not None or document.active_version_id is None:
        return pending
    return versions.filter(pk=document.active_version_id).first()


def _new_version(document: Document, *, number: int, raw: RawCapture, lineage: Lineage) -> DocumentVersion:
    version = _version_row(document, number=number, raw=raw, lineage=lineage)
    version.save(force_insert=True)
    return version


def _version_row(document: Document, *, number: int, raw: RawCapture, lineage: Lineage) -> DocumentVersion:
    """The document's version ``number`` made from ``raw`` (pending, not saved)."""
    return DocumentVersion(
        document=document, project_id=document.project_id, number=number, sha256=document.sha256,
        size_bytes=document.size_bytes,
        content_type=document.content_type, title=document.title, status=DocumentVersion.Status.PENDING,
        provenance=lineage.provenance, source_class=lineage.source_class, occurred_at=lineage.occurred_at,
        valid_from=lineage.valid_from, valid_until=lineage.valid_until, captured_by=lineage.captured_by[:200],
        captured_by_kind=lineage.captured_by_kind, derived_from=lineage.derived_from, raw_capture=raw,
        retention_class=lineage.retention_class,
    )


def _update(document: Document, *, upload: Upload, data: bytes, raw: RawCapture, content_type: str,
            rule: IngestionRule | None, requested: dict[str, Any], chunking: tuple[str, int | None, int | None],
            path: str | None, title: str, tags: dict[str, Any] | None, metadata: dict[str, Any] | None,
            password: str | None, base_url: str, lineage: Lineage) -> DocumentVersion:
    """New content for an identified document: a new pending version, the document reset for
    its ingestion (a run in flight is fenced off, an older pending version superseded)."""
    if path:
        moved = normalize_path(path)
        if moved != document.path:
            if Document.objects.filter(project_id=document.project_id, path=moved).exists():
                raise PathTaken(details={"path": moved})
            document.path = moved
    _check_quota(document.project, len(data) - document.size_bytes)
    old_file = document.file.name
    _store_file(document, upload, content_type)
    stored_files_delete_on_commit(names=[old_file] if old_file != document.file.name else [])
    versions = DocumentVersion.objects.filter(project_id=document.project_id, document=document)
    versions.filter(status=DocumentVersion.Status.PENDING).update(status=DocumentVersion.Status.SUPERSEDED)
    document.content_type = content_type
    document.original_filename = upload.filename[:500]
    document.size_bytes = len(data)
    document.sha256 = hashlib.sha256(data).hexdigest()
    if title:
        document.title = title
    if tags is not None:
        document.tags = tags
    if metadata is not None:
        document.metadata = metadata
    document.chunk_strategy, document.chunk_size, document.chunk_overlap = chunking
    _make_pending(document, rule=rule, requested=requested, password=password, base_url=base_url)
    document.last_seen_at = timezone.now()
    document.forgotten_at, document.forget_reason = None, ""  # new content ends a tombstone
    document.save()
    number = (versions.aggregate(top=Max("number"))["top"] or 0) + 1
    return _new_version(document, number=number, raw=raw, lineage=lineage)


def _make_pending(document: Document, *, rule: IngestionRule | None, requested: dict[str, Any],
                  password: str | None, base_url: str | None) -> None:
    """Ready ``document`` (not saved) for a fresh ingestion run: the rule and the chunk request it
    runs with, the converter state worth keeping (a new password or base URL replaces the old),
    status pending, no error, no attempts, no heartbeat."""
    state = persistent_state(document.converter_state)
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


def _storage_name(filename: str, content_type: str) -> str:
    name = filename.replace("\\", "/").rsplit("/", 1)[-1].strip() or "content"
    if "." not in name:
        name += {"application/pdf": ".pdf", "text/markdown": ".md", "text/plain": ".txt"}.get(content_type, "")
    return name[-200:]


def document_create_text(*, project: Project, content: str, content_type: str | None = None,
                         path: str | None = None, title: str = "", **arguments: Any) -> Document:
    """A text or Markdown document; ``recursive`` strategy unless the request or a rule says otherwise."""
    return document_capture_text(project=project, content=content, content_type=content_type, path=path,
                                 title=title, external_ref=None, **arguments).document


def document_capture_text(*, project: Project, content: str, content_type: str | None = None,
                          path: str | None = None, title: str = "", external_ref: str | None = None,
                          **arguments: Any) -> Capture:
    """:func:`document_capture` of a text or Markdown ``content`` (EMPTY_FILE when blank)."""
    upload, path = _text_upload(content, content_type=content_type, path=path, title=title,
                                external_ref=external_ref)
    return document_capture(project=project, upload=upload, path=path, title=title, external_ref=external_ref,
                            **arguments)


def _text_content_type(content: str, path: str | None) -> str:
    """A text's type when the caller names none: the path's suffix (``.md`` / ``.markdown`` or
    ``.txt``) decides; without one, Markdown markup in the text (:func:`looks_like_markdown`)."""
    suffix = (path or "").lower().rsplit("/", 1)[-1]
    if suffix.endswith((".md", ".markdown")):
        return TEXT_MARKDOWN
    if suffix.endswith(".txt"):
        return TEXT_PLAIN
    return TEXT_MARKDOWN if looks_like_markdown(content) else TEXT_PLAIN


def _text_upload(content: str, *, content_type: str | None, path: str | None, title: str,
                 external_ref: str | None) -> tuple[Upload, str | None]:
    """A text or Markdown ``content`` as an upload, and its path (a fresh one when there is no
    path and no ``external_ref``); EMPTY_FILE when blank, VALIDATION_ERROR for another type."""
    if not isinstance(content, str) or not content.strip():
        raise EmptyFile("`content` is empty; send the text to index.")
    declared = content_type or _text_content_type(content, path)
    if declared not in ("text/plain", "text/markdown"):
        raise ValidationFailed("content_type must be text/plain or text/markdown for a text document.",
                               details={"content_type": declared})
    suffix = ".md" if declared == "text/markdown" else ".txt"
    filename = (path or "").rsplit("/", 1)[-1] or f"{_slug(title) or 'text'}{suffix}"
    if path is None and external_ref is None:
        path = f"/{_slug(title) or 'text'}-{secrets.token_hex(4)}{suffix}"
    return Upload(content.encode("utf-8"), filename=filename, declared_content_type=declared), path


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
    document = Document.objects.select_for_update().get(project_id=document.project_id, pk=document.pk)
    state = dict(document.converter_state or {})
    # Only what a client asked for is kept; an old entry-point default ("default_strategy",
    # stored before per-content-type defaults) gives way to today's default.
    stored = state.get("chunk_request") or {}
    previous = chunk_request(*(stored.get(key) for key in CHUNK_REQUEST_KEYS))
    requested = {**previous, **chunk_request(chunk_strategy, chunk_size, chunk_overlap)}
    rule = rule_for_content_type(project=document.project, content_type=document.content_type)
    document.chunk_strategy, document.chunk_size, document.chunk_overlap = resolve_chunking(
        requested=requested, rule=rule, content_type=document.content_type)
    _make_pending(document, rule=rule, requested=requested, password=password, base_url=base_url)
    document.save()
    # The stored file is the newest capture's: when that version failed, ingest it again.
    versions = DocumentVersion.objects.filter(project_id=document.project_id, document=document)
    latest = versions.filter(generation__isnull=True).order_by("-number").first()
    if latest is not None and latest.status == DocumentVersion.Status.FAILED:
        versions.filter(pk=latest.pk).update(status=DocumentVersion.Status.PENDING, error=None)
    if enqueue:
        enqueue_document_ingest_on_commit(document.pk, document.project_id)
    return document


@transaction.atomic
def document_delete(*, document: Document) -> list[tuple[str, str]]:
    """Erase the document: its versions, chunks, raw captures, (after commit) its stored file and
    the entities only its chunks named; ``(id, name)`` of those entities.
    409 LEGAL_HOLD when a version is under legal hold."""
    project_id = document.project_id
    check_legal_hold(versions=DocumentVersion.objects.filter(project_id=project_id, document=document))
    allow_ledger_erasure()
    stored_files_delete_on_commit(names=[document.file.name])
    named = entities_named_by(project_id=project_id,
                              chunks=Chunk.objects.filter(project_id=project_id, document_id=document.pk))
    delete_in_project(Document.objects.filter(pk=document.pk), project_id)
    return entities_drop_unnamed(project_id=project_id, entity_ids=named)


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
