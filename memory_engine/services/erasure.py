"""Subject erasure (docs/retention.md): remove everything tied to an end user or to a set of
tags in one transaction and store a purge receipt.

What a selector reaches:

* ``subject_external_id``: the subject's user-tier store: every memory in it, its content rows
  (text and vector), revisions and ledger rows. The store stays as an anonymous shell
  (``erased:<id>``, no subject) so the redacted ledger rows keep pointing at it;
* ``tags``: memories (any store of the project) and documents whose tags contain them, with
  their versions, chunks (text and vector), raw captures and stored files;
* for both: the ledger rows of the erased memories are redacted (:func:`ledger_redact`), the
  generations those rows came from lose their conversation text, and the entities (names) that
  no edge names any more once those memories and chunks are gone are deleted.

An erasure acts as its caller (memory_engine.policy): rows outside the caller's reach do not exist
for it (they are neither erased nor named), and it needs ``purge`` on every store and document it
does reach; one it lacks stops the whole erasure (403 GRANT_REQUIRED) before anything changes.
A caller without grants reaches the whole project.

Rows under legal hold stop the whole erasure (409 LEGAL_HOLD naming them) before anything
changes. The receipt (:class:`~memory_engine.models.ErasureReceipt`) holds the counts per table,
the removed ids and an HMAC over the removed rows; it names the selector only by an HMAC under
the deployment's ``ERASURE_RECEIPT_KEY`` (:func:`selector_hmac`), and neither can be checked
against guessed selectors or texts without that key.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet

from memory_engine.conf import engine_settings
from memory_engine.db import delete_in_project
from memory_engine.exceptions import ValidationFailed
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
from memory_engine.policy import PURGE, Principal, check_legal_hold, require, visible
from memory_engine.subjects import validate_subject

from .documents import document_delete
from .entities import entities_drop_unnamed, entities_named_by
from .memories import lock_store
from .memory_map import memory_maps_drop
from .retention import ledger_redact

__all__ = ["erase_rows", "selector_hmac", "subject_erase"]


def _receipt_key() -> bytes:
    """The key of a receipt's HMACs: ``ERASURE_RECEIPT_KEY``, by default derived from ``SECRET_KEY``."""
    key = engine_settings.ERASURE_RECEIPT_KEY or f"memory_engine.erasure-receipt:{settings.SECRET_KEY}"
    return hashlib.sha256(key.encode()).digest()


def selector_hmac(selector: dict[str, Any]) -> str:
    """HMAC-SHA256 of a selector's canonical JSON under ``ERASURE_RECEIPT_KEY`` (by default a key
    derived from ``SECRET_KEY``): what the receipt keeps of the selector. Whoever holds the key
    can check whether a receipt is for a given selector; nobody else can."""
    canonical = json.dumps(selector, sort_keys=True, separators=(",", ":")).encode()
    return hmac.new(_receipt_key(), canonical, hashlib.sha256).hexdigest()


class _Digest:
    """HMAC-SHA256, under the receipt key (:func:`selector_hmac`'s), over the removed rows: one
    line per row, ``table \\t id \\t sha256(content)``, in table then id order, so the same removal
    always gives the same value. Keyed, so that a reader of the receipt, who knows its ids, cannot
    confirm a guessed text by hashing it; whoever holds the key can."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str]] = []

    def add(self, table: str, row_id: str, content: bytes | str | None) -> None:
        data = content.encode() if isinstance(content, str) else (content or b"")
        self.rows.append((table, row_id, hashlib.sha256(data).hexdigest()))

    def hexdigest(self) -> str:
        digest = hmac.new(_receipt_key(), digestmod=hashlib.sha256)
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


def _check_purge(caller: Principal, project: Project, subject_store: MemoryStore | None, memories: Any,
                 documents: Any) -> None:
    stores = MemoryStore.objects.filter(project=project).filter(
        Q(pk__in=memories.values("store_id")) | Q(pk=subject_store.pk if subject_store is not None else None))
    for row in [*stores, *documents]:
        require(caller, PURGE, row)


@transaction.atomic
def subject_erase(*, project: Project, caller: Principal, subject_external_id: str | None = None,
                  tags: dict[str, Any] | None = None) -> ErasureReceipt:
    """Erase what the selector reaches inside ``caller``'s reach (module docstring) and return the
    stored receipt. 400 VALIDATION_ERROR / SUBJECT_INVALID for a bad selector, 403 GRANT_REQUIRED
    when the caller lacks ``purge`` on a store or document reached, 409 LEGAL_HOLD for held rows."""
    principal = caller.label
    selector = _validate_selector(subject_external_id, tags)
    subject_store = None
    if subject_external_id is not None:
        subject_store = visible(caller, MemoryStore.objects.filter(
            project=project, tier=Tier.USER, subject_external_id=subject_external_id), None).first()
    memory_filter = Q(pk__in=[])
    if subject_store is not None:
        memory_filter |= Q(store=subject_store)
    if tags:
        memory_filter |= Q(tags__contains=tags)
    memories = visible(caller, Memory.objects.of_project(project.pk).filter(memory_filter), None)
    documents = (visible(caller, Document.objects.filter(project=project, tags__contains=tags), None) if tags
                 else Document.objects.none())
    _check_purge(caller, project, subject_store, memories, documents)
    check_legal_hold(memories=memories,
                     versions=DocumentVersion.objects.filter(project=project, document__in=documents))
    return erase_rows(project=project, principal=principal, selector=selector, memories=memories,
                      documents=documents, subject_store=subject_store)


def erase_rows(*, project: Project, principal: str, selector: dict[str, Any], memories: QuerySet[Memory],
               documents: QuerySet[Document], subject_store: MemoryStore | None = None) -> ErasureReceipt:
    """Remove ``memories`` and ``documents`` (rows of ``project`` the caller's reach, purge grants and
    legal hold were checked for) and return the stored receipt naming ``selector`` by its HMAC.

    The memories' revisions, the content rows nothing else uses any more, the entities no edge names
    any more (counted as ``entity``) and the cached memory maps of their stores go with them; their
    ledger rows are redacted and the generations those rows came from lose their conversation text.
    With ``subject_store`` the whole store's content rows and ledger are erased too, and the store
    stays as an anonymous shell. Runs inside the caller's transaction (every caller is atomic)."""
    memory_filter = Q(pk__in=memories.values("pk"))
    store_ids = sorted(set(memories.values_list("store_id", flat=True))
                       | ({subject_store.pk} if subject_store is not None else set()))
    for store_id in store_ids:  # sorted: two erasures never wait on each other's locks
        lock_store(store_id)
    memories = Memory.objects.of_project(project.pk).filter(memory_filter)  # re-read under the locks

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
    revision_rows = list(MemoryRevision.objects.filter(project=project, content__project=project,
                                                       memory_id__in=memory_ids)
                         .values_list("pk", "content__text"))
    content_ids = set(memories.values_list("content_id", flat=True)) | set(
        MemoryRevision.objects.filter(project=project, memory_id__in=memory_ids).values_list("content_id", flat=True))
    if subject_store is not None:
        content_ids |= set(MemoryContent.objects.filter(project=project, store=subject_store)
                           .values_list("pk", flat=True))
    assertion_filter = Q(memory_id__in=memory_ids) | Q(replaced_memory_id__in=memory_ids)
    if subject_store is not None:
        assertion_filter |= Q(store=subject_store)
    assertions = MemoryAssertion.objects.filter(assertion_filter, project=project)
    assertion_rows = list(assertions.values_list("pk", "content"))
    generation_ids = sorted(set(assertions.exclude(generation_id=None).values_list("generation_id", flat=True)))

    # order_by(): the models' default orders join the document (the receipt sorts its ids itself)
    version_rows = list(DocumentVersion.objects.filter(project=project, document__in=documents).order_by()
                        .values_list("pk", "sha256"))
    chunk_rows = list(Chunk.objects.filter(project=project, document__in=documents).order_by()
                      .values_list("pk", "text"))
    raw_rows = [(pk, bytes(data)) for pk, data in
                RawCapture.objects.filter(project=project, document__in=documents).order_by().values_list("pk", "data")]
    document_rows = list(documents.values_list("pk", "sha256"))
    vectors = (MemoryContent.objects.filter(project=project, pk__in=content_ids, embedding__isnull=False).count()
               + Chunk.objects.filter(project=project, document__in=documents, embedding__isnull=False).count())
    named = entities_named_by(memory_ids=memory_ids, project_id=project.pk)

    # memories (revisions cascade), then the content rows nothing else uses any more
    delete_in_project(Memory.objects.filter(pk__in=memory_ids), project.pk)
    used = Q(Exists(Memory.objects.filter(project=project, content_id=OuterRef("pk")))) | Q(
        Exists(MemoryRevision.objects.filter(project=project, content_id=OuterRef("pk"))))
    orphan_contents = MemoryContent.objects.filter(project=project, pk__in=content_ids).exclude(used)
    content_rows = list(orphan_contents.values_list("pk", "text"))
    delete_in_project(MemoryContent.objects.filter(pk__in=[pk for pk, _ in content_rows]), project.pk)
    ledger_redact(project_id=project.pk, assertion_ids=[pk for pk, _ in assertion_rows], principal=principal)
    generations = Generation.objects.filter(pk__in=generation_ids, project=project)
    generation_rows = list(generations.values_list("pk", "output"))
    generations.update(input_messages=[], output="", extraction={})
    entity_rows: list[tuple[str, Any]] = []
    for document in documents:
        entity_rows += document_delete(document=document)
    # entities nothing left names: their names would outlive what stated them
    entity_rows += entities_drop_unnamed(project_id=project.pk, entity_ids=named)
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
    record("entity", entity_rows)
    counts["vector"] = vectors
    if subject_store is not None:
        ids["memorystore"] = [subject_store.pk]
        counts["memorystore"] = 1
    memory_maps_drop(project_id=project.pk, store_ids=store_ids)  # their coordinates came from the erased vectors
    return ErasureReceipt.objects.create(
        project=project, selector_kind="+".join(sorted(selector)), selector_hmac=selector_hmac(selector),
        counts=counts, ids=ids, sha256=digest.hexdigest(), principal=principal[:200],
    )
