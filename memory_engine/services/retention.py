"""Retention (docs/retention.md): changing a row's retention class, deprecating, forgetting
(tombstoning) and purging documents, the retention sweep of ephemeral document versions, and
:func:`ledger_redact`, the one change ever made to a ledger row.

A document's **forget** keeps the row, its versions' metadata and the reason, and removes
everything that holds its content: chunks (text and vectors), raw captures (the bytes) and
the stored file. **Purge** deletes the row; it waits until every durable version is
tombstoned (409 DOCUMENT_NOT_FORGOTTEN). Rows under ``legal_hold`` refuse both (409 LEGAL_HOLD).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from memory_engine.conf import engine_settings
from memory_engine.db import across_projects, allow_ledger_erasure, delete_in_project
from memory_engine.exceptions import DocumentNotForgotten, ValidationFailed
from memory_engine.models import Chunk, Document, DocumentVersion, Memory, RawCapture, RetentionChange
from memory_engine.models.retention import RetentionClass
from memory_engine.policy import Principal, check_legal_hold, require_hold_release

from .documents import document_delete, stored_files_delete_on_commit
from .entities import entities_drop_unnamed, entities_named_by
from .memories import lock_store

logger = logging.getLogger("memory_engine.retention")

__all__ = ["REDACTED_DETAILS", "REDACTED_TEXT", "RETENTION_SWEEP_PRINCIPAL", "DocumentForgetCounts",
           "document_deprecate", "document_forget", "document_purge", "document_retention_set",
           "document_retention_sweep", "ledger_redact", "memory_retention_set", "validate_retention_class"]

#: What :func:`ledger_redact` writes in place of a ledger row's text and details; the ledger
#: trigger (migration 0009) accepts an UPDATE only to exactly these values.
REDACTED_TEXT = "[erased]"
REDACTED_DETAILS = {"erased": True}
#: Who the retention sweep's tombstones name.
RETENTION_SWEEP_PRINCIPAL = "system:retention_sweep"


def validate_retention_class(value: object) -> str:
    if value not in RetentionClass.values:
        raise ValidationFailed(f"`retention_class` must be one of {', '.join(RetentionClass.values)}.",
                               details={"field": "retention_class", "accepted": list(RetentionClass.values)})
    return str(value)


def ledger_redact(*, project_id: str, assertion_ids: list[str], principal: str) -> int:
    """Replace the asserted text and details of these ledger rows of the project with the redaction markers
    (ids, outcomes, principals and times stay); the number of rows changed. Runs inside the
    caller's transaction under the erasure switch; the trigger refuses any other UPDATE."""
    if not assertion_ids:
        return 0
    allow_ledger_erasure()
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE memory_engine_memoryassertion SET content = %s, details = %s::jsonb "
            "WHERE project_id = %s AND id = ANY(%s) AND NOT (content = %s AND details = %s::jsonb)",
            [REDACTED_TEXT, '{"erased": true}', project_id, assertion_ids, REDACTED_TEXT, '{"erased": true}'],
        )
        changed = cursor.rowcount
    logger.info("ledger redaction rows=%s principal=%s", changed, principal,
                extra={"rows": changed, "principal": principal})
    return changed


@transaction.atomic
def memory_retention_set(*, memory: Memory, retention_class: str, caller: Principal) -> Memory:
    """Change a memory's retention class (an operator's decision), recorded in the retention
    ledger. Releasing a legal hold needs the ``hold`` action (403 GRANT_REQUIRED). Becoming
    ephemeral without an ``expires_at`` gives it one (MEMORY_EPHEMERAL_TTL_SECONDS from now)."""
    retention_class = validate_retention_class(retention_class)
    lock_store(memory.store_id)
    memory = Memory.objects.of_project(memory.project_id).select_related("content", "store").get(pk=memory.pk)
    require_hold_release(caller, memory, current=memory.retention_class, new=retention_class)
    previous = memory.retention_class
    fields: dict[str, object] = {"retention_class": retention_class}
    if retention_class == RetentionClass.EPHEMERAL and memory.expires_at is None:
        fields["expires_at"] = timezone.now() + timedelta(seconds=engine_settings.MEMORY_EPHEMERAL_TTL_SECONDS)
    Memory.objects.filter(pk=memory.pk, project_id=memory.project_id).update(**fields)
    for name, value in fields.items():
        setattr(memory, name, value)
    if previous != retention_class:
        RetentionChange.objects.create(
            project_id=memory.store.project_id, kind=RetentionChange.Kind.MEMORY, object_id=memory.pk,
            parent_id=memory.store_id, previous_class=previous, retention_class=retention_class,
            principal=caller.label[:200])
    logger.info("memory retention %s -> %s by %s", memory.pk, retention_class, caller.label)
    return memory


@transaction.atomic
def document_retention_set(*, document: Document, retention_class: str, caller: Principal,
                           version_ids: list[str] | None = None) -> int:
    """Change the retention class of a document's versions (all, or ``version_ids``), each change
    recorded in the retention ledger; the number of versions changed. Releasing a legal hold needs
    the ``hold`` action on the document (403 GRANT_REQUIRED, nothing changed)."""
    retention_class = validate_retention_class(retention_class)
    document = Document.objects.select_for_update().get(project_id=document.project_id, pk=document.pk)
    versions = DocumentVersion.objects.filter(project_id=document.project_id, document=document)
    if version_ids is not None:
        versions = versions.filter(pk__in=version_ids)
    before = dict(versions.exclude(retention_class=retention_class).values_list("pk", "retention_class"))
    for previous in set(before.values()):
        require_hold_release(caller, document, current=previous, new=retention_class)
    changed = versions.update(retention_class=retention_class)
    RetentionChange.objects.bulk_create([
        RetentionChange(project_id=document.project_id, kind=RetentionChange.Kind.DOCUMENT_VERSION,
                        object_id=version_id, parent_id=document.pk, previous_class=previous,
                        retention_class=retention_class, principal=caller.label[:200])
        for version_id, previous in sorted(before.items())])
    logger.info("document retention %s -> %s (%s versions) by %s", document.pk, retention_class, changed,
                caller.label)
    return changed


@transaction.atomic
def document_deprecate(*, document: Document, deprecated: bool = True) -> Document:
    """Mark a document deprecated (kept; search leaves it out unless ``include_deprecated``),
    or undo it with ``deprecated=False``."""
    Document.objects.filter(pk=document.pk).update(deprecated_at=timezone.now() if deprecated else None)
    document.refresh_from_db()
    return document


class DocumentForgetCounts(dict[str, int]):
    """Rows a forget removed: ``chunk``, ``rawcapture``, ``documentversion`` (tombstoned) and
    ``entity`` (entities no edge named any more once the chunks were gone)."""


def _erase_content(document: Document, version_filter: Q, now: datetime) -> DocumentForgetCounts:
    """Delete the chunks and raw captures of the document's selected versions and tombstone them."""
    project_id = document.project_id
    versions = DocumentVersion.objects.filter(version_filter, project_id=project_id, document_id=document.pk)
    raw_ids = list(versions.exclude(raw_capture=None).values_list("raw_capture_id", flat=True))
    counts = DocumentForgetCounts()
    chunks = Chunk.objects.filter(project_id=project_id, version__in=versions.values("pk"))
    named = entities_named_by(project_id=project_id, chunks=chunks)
    counts["chunk"], _ = delete_in_project(chunks, project_id)
    # a raw capture's versions cascade with it: detach them first, they stay as metadata
    counts["documentversion"] = versions.update(tombstoned_at=now, raw_capture=None)
    allow_ledger_erasure()
    counts["rawcapture"], _ = delete_in_project(RawCapture.objects.filter(pk__in=raw_ids), project_id)
    counts["entity"] = len(entities_drop_unnamed(project_id=project_id, entity_ids=named))
    return counts


@transaction.atomic
def document_forget(*, document: Document, reason: str, principal: str) -> DocumentForgetCounts:
    """Tombstone a document: its chunks (text and vectors), raw captures and stored file are
    erased; the row, its versions' metadata and ``reason`` stay. 409 LEGAL_HOLD if a version
    is under legal hold."""
    project_id = document.project_id
    document = Document.objects.select_for_update().get(project_id=project_id, pk=document.pk)
    check_legal_hold(versions=DocumentVersion.objects.filter(project_id=project_id, document=document))
    now = timezone.now()
    named = entities_named_by(project_id=project_id, chunks=Chunk.objects.filter(project_id=project_id,
                                                                                 document=document))
    counts = _erase_content(document, Q(), now)
    # chunks of rows older than versions have no version: they go too
    counts["chunk"] += delete_in_project(Chunk.objects.filter(document=document), project_id)[0]
    counts["entity"] += len(entities_drop_unnamed(project_id=project_id, entity_ids=named))
    stored_files_delete_on_commit(names=[document.file.name])
    Document.objects.filter(project_id=project_id, pk=document.pk).update(
        file="", forgotten_at=now, forget_reason=f"{reason} ({principal})"[:500], total_chunks=0,
        indexed_chunks=0, unembedded_chunks=0, converter_state={})
    logger.info("document forget %s by %s", document.pk, principal, extra=dict(counts))
    return counts


@transaction.atomic
def document_purge(*, document: Document) -> None:
    """Hard-delete a forgotten document: 409 LEGAL_HOLD for a held version, 409
    DOCUMENT_NOT_FORGOTTEN while a durable version is not tombstoned."""
    document = Document.objects.select_for_update().get(project_id=document.project_id, pk=document.pk)
    versions = DocumentVersion.objects.filter(project_id=document.project_id, document=document)
    check_legal_hold(versions=versions)
    live = list(versions.filter(retention_class=RetentionClass.DURABLE, tombstoned_at__isnull=True)
                .order_by("number").values_list("pk", flat=True))
    if live:
        raise DocumentNotForgotten(details={"document_id": document.pk, "document_version_ids": live})
    document_delete(document=document)


def document_retention_sweep(*, now: datetime | None = None) -> dict[str, int]:
    """Tombstone ephemeral document versions older than DOCUMENT_EPHEMERAL_TTL_SECONDS: their
    chunks and raw bytes go; a document whose active version goes is forgotten (reason
    ``expired``). Idempotent; one transaction per document."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=engine_settings.DOCUMENT_EPHEMERAL_TTL_SECONDS)
    due = Q(retention_class=RetentionClass.EPHEMERAL, tombstoned_at__isnull=True, created_at__lte=cutoff)
    # every project's due versions (one statement across a distributed database's nodes), then
    # each document's work on its project's rows
    with across_projects():
        documents = list(DocumentVersion.objects.filter(due).order_by().values_list("project_id", "document_id")
                         .distinct())
    totals = {"versions": 0, "documents_forgotten": 0}
    for project_id, document_id in documents:
        with transaction.atomic():
            document = (Document.objects.select_for_update(skip_locked=True)
                        .filter(project_id=project_id, pk=document_id).first())
            if document is None:
                continue
            versions = DocumentVersion.objects.filter(project_id=project_id, document=document)
            if document.active_version_id and versions.filter(due, pk=document.active_version_id).exists():
                # its searchable content is going: the document becomes a tombstone
                holds = versions.filter(retention_class=RetentionClass.LEGAL_HOLD).exists()
                if not holds:
                    counts = document_forget(document=document, reason="expired",
                                             principal=RETENTION_SWEEP_PRINCIPAL)
                    totals["versions"] += counts["documentversion"]
                    totals["documents_forgotten"] += 1
                    continue
            counts = _erase_content(document, due & ~Q(pk=document.active_version_id or ""), now)
            totals["versions"] += counts["documentversion"]
    if totals["versions"]:
        logger.info("retention sweep versions=%s documents_forgotten=%s", totals["versions"],
                    totals["documents_forgotten"], extra=totals)
    return totals
