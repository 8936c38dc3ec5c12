"""Formation: declarative state for stores and their memories (``memory_engine_apply``).

A declaration names stores and the memories each should hold. Applying it is
idempotent: declared texts already present are kept, missing ones are created
(bypassing dedup: the declaration is the truth), and memories this declaration made
earlier (source_type ``declared``) that are no longer declared are retired. Memories
written by other doors are never touched. Every decision records one assertion with
mechanism ``formation``. A declared memory that reads as instructions to an AI, in an agent or
institutional store, stops the run with INSTRUCTION_REJECTED before that store is written (the
write funnel's guard). The new texts are embedded before the store's transaction, many per
embedder call (:func:`declared_vectors`).

An optional ``memory_schema: {kinds, relation_types}`` section replaces the project's memory
schema (:func:`memory_engine.services.memory_schema.memory_schema_save`) before any store is
applied; without it the schema is left alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from django.db import DataError, transaction
from django.utils import timezone

from memory_engine.conf import engine_settings
from memory_engine.db import in_batches, insert_rows
from memory_engine.exceptions import ValidationFailed
from memory_engine.instruction_guard import findings
from memory_engine.instruction_guard.classifier import SCREEN_MODEL
from memory_engine.mentions.subject_keys import subject_keys
from memory_engine.models import Memory, MemoryAssertion, MemoryContent, MemoryStore, Project
from memory_engine.models.memories import Mechanism, Outcome, SourceType
from memory_engine.providers.embeddings import get_embedding_provider, refresh_embedding_provider

from .memories import (
    content_hash,
    embed_many_best_effort,
    lock_store,
    model_switched,
    validate_content,
    validate_thresholds,
)
from .memories.content import resolve_content
from .memories.validation import GUARDED_TIERS, refusal_of
from .memory_schema import memory_schema_save, validate_memory_schema

PRINCIPAL = "formation"

logger = logging.getLogger("memory_engine.formation")


@dataclass
class FormationReport:
    created: list[tuple[str, str]] = field(default_factory=list)
    kept: list[tuple[str, str]] = field(default_factory=list)
    retired: list[tuple[str, str]] = field(default_factory=list)
    stores_created: list[str] = field(default_factory=list)
    #: ``(kinds, relation_types)`` counts when the declaration set the memory schema, else None.
    memory_schema: tuple[int, int] | None = None


def parse_memory_schema(data: Any) -> dict[str, Any] | None:
    """The declaration's ``memory_schema`` section, validated (SCHEMA_INVALID), or None."""
    if not isinstance(data, dict) or data.get("memory_schema") is None:
        return None
    section = data["memory_schema"]
    if not isinstance(section, dict):
        raise ValidationFailed("`memory_schema` must be an object {kinds, relation_types}.")
    kinds, relation_types = validate_memory_schema(kinds=section.get("kinds"),
                                                   relation_types=section.get("relation_types"))
    return {"kinds": kinds, "relation_types": relation_types}


def parse_declaration(data: Any) -> list[dict[str, Any]]:
    """Validate ``{"stores": [{"name", "description"?, "tags"?, thresholds?, "memories": [...]}]}``.

    A memory is a string or ``{"content", "tags"?, "metadata"?}``.
    """
    if isinstance(data, dict) and data.get("stores") is None and data.get("memory_schema") is not None:
        return []  # a declaration of the memory schema alone
    if not isinstance(data, dict) or not isinstance(data.get("stores"), list):
        raise ValidationFailed("The declaration must be an object with a `stores` list.")
    stores = []
    for index, entry in enumerate(data["stores"]):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"].strip():
            raise ValidationFailed(f"stores[{index}] needs a non-empty `name`.")
        memories = []
        for m_index, item in enumerate(entry.get("memories") or []):
            if isinstance(item, str):
                item = {"content": item}
            if not isinstance(item, dict) or "content" not in item:
                raise ValidationFailed(f"stores[{index}].memories[{m_index}] needs `content`.")
            for key in ("tags", "metadata"):
                if not isinstance(item.get(key, {}), dict):
                    raise ValidationFailed(f"stores[{index}].memories[{m_index}].{key} must be an object.")
            memories.append({"content": validate_content(item["content"]), "tags": item.get("tags") or {},
                             "metadata": item.get("metadata") or {}})
        validate_thresholds(entry.get("duplicate_threshold"), entry.get("supersede_threshold"))
        stores.append({**entry, "name": entry["name"].strip(), "memories": memories})
    return stores


def apply_declaration(*, project: Project, data: Any, principal: str = PRINCIPAL,
                      on_start: Callable[[str, int], Any] | None = None,
                      on_progress: Callable[[str, int], Any] | None = None) -> FormationReport:
    """Bring the project's declared stores to the declared state (see module docstring).

    ``on_start(store name, texts to embed)`` and ``on_progress(store name, texts embedded)``
    follow the embedding of each store's new texts (:func:`declared_vectors`).
    """
    report = FormationReport()
    schema = parse_memory_schema(data)
    stores = parse_declaration(data)
    if schema is not None:
        memory_schema_save(project=project, **schema)
        report.memory_schema = (len(schema["kinds"]), len(schema["relation_types"]))
    for entry in stores:
        store, created = MemoryStore.objects.get_or_create(
            project=project, name=entry["name"],
            defaults={key: entry[key] for key in ("description", "tags", "duplicate_threshold",
                                                    "supersede_threshold") if key in entry},
        )
        if created:
            report.stores_created.append(store.name)
        for retry in (False, True):
            vectors = declared_vectors(store, entry["memories"], on_start=on_start, on_progress=on_progress)
            judged = _judged(store, entry["memories"], vectors)  # INSTRUCTION_REJECTED before any write
            try:
                _apply_store(store, entry["memories"], vectors, principal, report, judged=judged)
                break
            except DataError as exc:
                if retry or not model_switched(exc):
                    raise
                # The embedding model was switched to another dimension since the texts were
                # embedded, and the store's transaction rolled back before its first row: embed
                # them with the model now active and apply the store again, as a write does.
                logger.info("the embedding model changed during a formation run; embedding store %s again",
                            store.pk)
                refresh_embedding_provider()
    return report


class _Judged(NamedTuple):
    """The instruction guard's findings on a declaration's texts (by content hash) and on each
    declared memory's tags and metadata (in order)."""

    texts: dict[str, dict[str, Any] | None]
    fields: list[dict[str, Any] | None]


def _judged(store: MemoryStore, memories: list[dict[str, Any]], vectors: dict[str, tuple[Any, str]]) -> _Judged:
    """The guard's findings on the declared texts and fields, the classifier run once over all of
    them (the screen reads the vectors the default embedder just made), as the write funnel stores
    them; in an agent or institutional store a declared memory that reads as instructions at the
    write gate refuses the whole declaration (INSTRUCTION_REJECTED) before anything is written."""
    texts = _distinct_texts(memories)
    provider = get_embedding_provider()
    screen = {text: vectors[digest][0] for digest, text in texts.items()
              if provider is not None and provider.model_name == SCREEN_MODEL
              and vectors.get(digest, (None, ""))[0] is not None}
    found = findings([[text] for text in texts.values()] + [["", item["tags"], item["metadata"]] for item in memories],
                     vectors=screen)
    if store.tier in GUARDED_TIERS:
        for finding in found:
            verdict = finding.verdict("write")
            if verdict.blocked:
                raise refusal_of(store, verdict)
    stored = [finding.as_json() if finding.by else None for finding in found]
    return _Judged(dict(zip(texts, stored, strict=False)), stored[len(texts):])


def _distinct_texts(memories: list[dict[str, Any]]) -> dict[str, str]:
    """The declared texts by content hash, each once, in declaration order."""
    return {content_hash(item["content"]): item["content"] for item in memories}


def declared_vectors(store: MemoryStore, memories: list[dict[str, Any]], *,
                     on_start: Callable[[str, int], Any] | None = None,
                     on_progress: Callable[[str, int], Any] | None = None) -> dict[str, tuple[Any, str]]:
    """``{content hash: (vector, failure)}`` for the declared texts whose content rows in ``store``
    have no vector yet, embedded EMBEDDING_BATCH_SIZE texts per provider call (outside any
    transaction, as a write embeds). A text the embedder fails on gets ``(None, reason)``: its
    memory is stored without a vector and the reason goes into its assertion's details, as the
    write funnel does (``memory_engine_reembed --missing`` fills the vector in later)."""
    texts = _distinct_texts(memories)
    embedded = {digest for batch in in_batches(list(texts)) for digest in MemoryContent.objects.filter(
        store=store, content_hash__in=batch, embedding__isnull=False).values_list("content_hash", flat=True)}
    missing = [(digest, text) for digest, text in texts.items() if digest not in embedded]
    if on_start:
        on_start(store.name, len(missing))
    vectors: dict[str, tuple[Any, str]] = {}
    size = engine_settings.EMBEDDING_BATCH_SIZE
    for start in range(0, len(missing), size):
        batch = missing[start:start + size]
        results = embed_many_best_effort([text for _, text in batch])
        vectors.update((digest, result) for (digest, _), result in zip(batch, results, strict=True))
        if on_progress:
            on_progress(store.name, len(batch))
    return vectors


def _declared_contents(store: MemoryStore, memories: list[dict[str, Any]],
                       vectors: dict[str, tuple[Any, str]], judged: _Judged) -> dict[str, MemoryContent]:
    """Each distinct declared text's content row, by content hash, under the store lock: the rows
    the store has (read one query per IN_LIST_MAX texts; one that lacks a vector gets it through
    the write funnel's upsert) and the new ones, with their vectors, in one INSERT."""
    texts = _distinct_texts(memories)
    rows = {row.content_hash: row for batch in in_batches(list(texts))
            for row in MemoryContent.objects.filter(store=store, content_hash__in=batch)
            .only("id", "store_id", "content_hash", "text", "embedding_model", "created_at")}
    provider = get_embedding_provider()
    new = []
    for digest, text in texts.items():
        vector = vectors.get(digest, (None, ""))[0]
        if digest not in rows:
            rows[digest] = MemoryContent(store=store, project_id=store.project_id, content_hash=digest, text=text,
                                         embedding=vector,
                                         embedding_model=provider.model_name if provider and vector is not None else "",
                                         guard=judged.texts.get(digest))
            new.append(rows[digest])
        elif vector is not None:  # the row has no vector yet (declared_vectors embedded only those)
            rows[digest] = resolve_content(store, text, digest, vector, guard=judged.texts.get(digest)).row
    insert_rows(new)
    return rows


@transaction.atomic
def _apply_store(store: MemoryStore, memories: list[dict[str, Any]], vectors: dict[str, tuple[Any, str]],
                 principal: str, report: FormationReport, *, judged: _Judged) -> None:
    """Under the store lock: the declared texts' content rows (:func:`_declared_contents`), the
    live memories of those rows (one query per IN_LIST_MAX rows), then the new memories and every
    declared memory's assertion in one INSERT each (memory_engine.db.insert_rows)."""
    lock_store(store.pk)
    contents = _declared_contents(store, memories, vectors, judged)
    live: dict[str, Memory] = {}
    for batch in in_batches([row.pk for row in contents.values()]):
        for found in Memory.objects.filter(store=store, content__in=batch,
                                           invalidated_at__isnull=True).order_by("created_at", "id"):
            live.setdefault(found.content_id, found)  # the first, as the oldest live one
    created: list[Memory] = []
    assertions: list[MemoryAssertion] = []
    for item, fields_guard in zip(memories, judged.fields, strict=True):
        digest = content_hash(item["content"])
        content = contents[digest]
        memory = live.get(content.pk)
        action = "kept"
        if memory is None:
            memory = live[content.pk] = Memory(store=store, project_id=store.project_id, content=content,
                                               tags=item["tags"],
                                               metadata=item["metadata"], source_type=SourceType.DECLARED,
                                               subjects=subject_keys(content.text), guard=fields_guard)
            created.append(memory)
            action = "created"
            report.created.append((store.name, content.text))
        else:
            report.kept.append((store.name, content.text))
        failure = vectors.get(digest, (None, ""))[1]
        details = {"formation": action, **({"embedding": failure} if failure else {})}
        assertions.append(MemoryAssertion(
            store=store, project_id=store.project_id, memory=memory, content=content.text, outcome=Outcome.DECLARED,
            decision_reason=action, details=details, principal=principal, mechanism=Mechanism.FORMATION,
        ))
    insert_rows(created)
    insert_rows(assertions)
    declared_ids = {live[row.pk].pk for row in contents.values()}
    stale_ids = [pk for pk in Memory.objects.filter(store=store, source_type=SourceType.DECLARED,
                                                    invalidated_at__isnull=True).values_list("pk", flat=True)
                 if pk not in declared_ids]
    stale = [memory for batch in in_batches(stale_ids)
             for memory in Memory.objects.filter(pk__in=batch).select_related("content")]
    now = timezone.now()
    for memory in stale:
        Memory.objects.filter(pk=memory.pk).update(invalidated_at=now)
        MemoryAssertion.objects.create(
            store=store, project_id=store.project_id, memory=memory, replaced_memory=memory,
            content=memory.content.text,
            outcome=Outcome.FORGOTTEN, decision_reason="undeclared", details={"formation": "retired"},
            principal=principal, mechanism=Mechanism.FORMATION,
        )
        report.retired.append((store.name, memory.content.text))
