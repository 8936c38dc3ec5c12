"""Subject erasure (docs/retention.md): remove everything tied to an end user or to a set of
tags in one transaction and store a purge receipt.

What a selector reaches:

* ``subject_external_id``: the subject's user-tier store: every memory in it, its content rows
  (text and vector), revisions and ledger rows. The store stays as an anonymous shell
  (``erased:<id>``, no subject) so the redacted ledger rows keep pointing at it;
* ``tags``: memories (any store of the project) and documents whose tags contain them, with
  their versions, chunks (text and vector), raw captures and stored files;
* for both: the ledger rows of the erased memories are redacted (:func:`ledger_redact`), and
  the generations those rows came from lose their conversation text.

An erasure by a caller with grants (docs/security.md, *Access inside a project*) needs ``purge``
on every store and document it reaches; one it lacks stops the whole erasure (403 GRANT_REQUIRED)
before anything changes: an erasure is never silently partial.

Rows under legal hold stop the whole erasure (409 LEGAL_HOLD naming them) before anything
changes. The receipt (:class:`~memory_engine.models.ErasureReceipt`) holds the counts per table,
the removed ids and a sha256 over the removed rows; it names the selector only by its sha256.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.db import transaction
from django.db.models import Exists, OuterRef, Q

from memory_engine.access import PURGE, Grants
from memory_engine.exceptions import GrantRequired, ValidationFailed
from memory_engine.models import (
    Chunk,
    Document,
    DocumentVersion,
    ErasureReceipt,
    Generation,
    Memory,
    MemoryAssertion,
    MemoryContent,
    MemoryRevision,
    MemoryStore,
    Project,
    RawCapture,
)
from memory_engine.models.memories import Tier
from memory_engine.subjects import validate_subject

from .documents import document_delete
from .legal_hold import check_legal_hold
from .memory_write import lock_store
from .retention import ledger_redact

__all__ = ["subject_erase", "selector_sha256"]


def selector_sha256(selector: dict[str, Any]) -> str:
    """The sha256 of a selector's canonical JSON (what the receipt keeps of it)."""
    return hashlib.sha256(json.dumps(selector, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


class _Digest:
    """sha256 over the removed rows: one line per row, ``table \\t id \\t sha256(content)``,
    in table then id order, so the same removal always gives the same hash."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str]] = []

    def add(self, table: str, row_id: str, content: bytes | str | None) -> None:
        data = content.encode() if isinstance(content, str) else (content or b"")
        self.rows.append((table, row_id, hashlib.sha256(data).hexdigest()))

    def hexdigest(self) -> str:
        digest = hashlib.sha256()
        for row in sorted(self.rows):
            digest.update(("\t".join(row) + "\n").encode())
        return digest.hexdigest()


def _validate_selector(subject_external_id: str | None, tags: dict[str, Any] | None) -> dict[str, Any]:
    if subject_external_id is None and not tags:
        raise ValidationFailed("Send `subject_external_id` or a non-empty `tags` object.",
                               details={"fields": ["subject_external_id", "tags"]})
    if tags is not None and not isinstance(tags, dict):
        raise ValidationFailed("`tags` must be a JSON object.", details={"field": "tags"})
    selector: dict[str, Any] = {}
    if subject_external_id is not None:
        validate_subject(subject_external_id, field="subject_external_id")
        selector["subject_external_id"] = subject_external_id
    if tags:
        selector["tags"] = tags
    return selector


def _check_purge_grants(grants: Grants, subject_store: MemoryStore | None, memories: Any, documents: Any) -> None:
    stores = MemoryStore.objects.filter(Q(pk__in=memories.values("store_id"))
                                        | Q(pk=subject_store.pk if subject_store is not None else None))
    for object_tags in [*stores.values_list("access_tags", flat=True),
                        *documents.values_list("access_tags", flat=True)]:
        if not grants.allows(PURGE, object_tags):
            raise GrantRequired(details={"action": PURGE})


@transaction.atomic
def subject_erase(*, project: Project, principal: str, subject_external_id: str | None = None,
                  tags: dict[str, Any] | None = None, grants: Grants | None = None) -> ErasureReceipt:
    """Erase what the selector reaches (module docstring) and return the stored receipt.
    400 VALIDATION_ERROR / SUBJECT_INVALID for a bad selector, 403 GRANT_REQUIRED when ``grants``
    lack ``purge`` on a store or document reached, 409 LEGAL_HOLD for held rows."""
    selector = _validate_selector(subject_external_id, tags)
    subject_store = None
    if subject_external_id is not None:
        subject_store = MemoryStore.objects.filter(project=project, tier=Tier.USER,
                                                   subject_external_id=subject_external_id).first()
    memory_filter = Q(pk__in=[])
    if subject_store is not None:
        memory_filter |= Q(store=subject_store)
    if tags:
        memory_filter |= Q(tags__contains=tags)
    memories = Memory.objects.filter(memory_filter, store__project=project)
    documents = Document.objects.filter(project=project, tags__contains=tags) if tags else Document.objects.none()
    if grants is not None:
        _check_purge_grants(grants, subject_store, memories, documents)
    check_legal_hold(memories=memories, versions=DocumentVersion.objects.filter(document__in=documents))

    store_ids = sorted(set(memories.values_list("store_id", flat=True))
                       | ({subject_store.pk} if subject_store is not None else set()))
    for store_id in store_ids:  # sorted: two erasures never wait on each other's locks
        lock_store(store_id)
    memories = Memory.objects.filter(memory_filter, store__project=project)  # re-read under the locks

    digest = _Digest()
    ids: dict[str, list[str]] = {}
    counts: dict[str, int] = {}

    def record(table: str, rows: list[tuple[str, Any]]) -> None:
        ids[table] = sorted(row_id for row_id, _ in rows)
        counts[table] = len(rows)
        for row_id, content in rows:
            digest.add(table, row_id, content)

    memory_rows = list(memories.values_list("pk", "content__text"))
    memory_ids = [pk for pk, _ in memory_rows]
    revision_rows = list(MemoryRevision.objects.filter(memory_id__in=memory_ids)
                         .values_list("pk", "content__text"))
    content_ids = set(memories.values_list("content_id", flat=True)) | set(
        MemoryRevision.objects.filter(memory_id__in=memory_ids).values_list("content_id", flat=True))
    if subject_store is not None:
        content_ids |= set(MemoryContent.objects.filter(store=subject_store).values_list("pk", flat=True))
    assertion_filter = Q(memory_id__in=memory_ids) | Q(replaced_memory_id__in=memory_ids)
    if subject_store is not None:
        assertion_filter |= Q(store=subject_store)
    assertions = MemoryAssertion.objects.filter(assertion_filter, store__project=project)
    assertion_rows = list(assertions.values_list("pk", "content"))
    generation_ids = sorted(set(assertions.exclude(generation_id=None).values_list("generation_id", flat=True)))

    version_rows = list(DocumentVersion.objects.filter(document__in=documents).values_list("pk", "sha256"))
    chunk_rows = list(Chunk.objects.filter(document__in=documents).values_list("pk", "text"))
    raw_rows = [(pk, bytes(data)) for pk, data in
                RawCapture.objects.filter(document__in=documents).values_list("pk", "data")]
    document_rows = list(documents.values_list("pk", "sha256"))
    vectors = (MemoryContent.objects.filter(pk__in=content_ids, embedding__isnull=False).count()
               + Chunk.objects.filter(document__in=documents, embedding__isnull=False).count())

    # memories (revisions cascade), then the content rows nothing else uses any more
    Memory.objects.filter(pk__in=memory_ids).delete()
    used = Q(Exists(Memory.objects.filter(content_id=OuterRef("pk")))) | Q(
        Exists(MemoryRevision.objects.filter(content_id=OuterRef("pk"))))
    orphan_contents = MemoryContent.objects.filter(pk__in=content_ids).exclude(used)
    content_rows = list(orphan_contents.values_list("pk", "text"))
    orphan_contents.delete()
    ledger_redact(assertion_ids=[pk for pk, _ in assertion_rows], principal=principal)
    generations = Generation.objects.filter(pk__in=generation_ids, project=project)
    generation_rows = list(generations.values_list("pk", "output"))
    generations.update(input_messages=[], output="", extraction={})
    for document in documents:
        document_delete(document=document)
    if subject_store is not None:
        MemoryStore.objects.filter(pk=subject_store.pk).update(
            name=f"erased:{subject_store.pk}", subject_external_id=None, description="", tags={})

    record("memory", memory_rows)
    record("memoryrevision", revision_rows)
    record("memorycontent", content_rows)
    record("memoryassertion", assertion_rows)
    record("generation", generation_rows)
    record("document", document_rows)
    record("documentversion", version_rows)
    record("chunk", chunk_rows)
    record("rawcapture", raw_rows)
    counts["vector"] = vectors
    if subject_store is not None:
        ids["memorystore"] = [subject_store.pk]
        counts["memorystore"] = 1
    return ErasureReceipt.objects.create(
        project=project, selector_kind="+".join(sorted(selector)), selector_sha256=selector_sha256(selector),
        counts=counts, ids=ids, sha256=digest.hexdigest(), principal=principal[:200],
    )
