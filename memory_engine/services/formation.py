"""Formation: declarative state for stores and their memories (``memory_engine_apply``).

A declaration names stores and the memories each should hold. Applying it is
idempotent: declared texts already present are kept, missing ones are created
(bypassing dedup: the declaration is the truth), and memories this declaration made
earlier (source_type ``declared``) that are no longer declared are retired. Memories
written by other doors are never touched. Every decision records one assertion with
mechanism ``formation``.

An optional ``memory_schema: {kinds, relation_types}`` section replaces the project's memory
schema (:func:`memory_engine.services.memory_schema.memory_schema_save`) before any store is
applied; without it the schema is left alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone

from memory_engine.exceptions import ValidationFailed
from memory_engine.models import Memory, MemoryAssertion, MemoryStore, Project
from memory_engine.models.memories import Mechanism, Outcome, SourceType

from .memory_schema import memory_schema_save, validate_memory_schema
from .memory_write import (
    _prepare_vector,
    _resolve_content,
    content_hash,
    lock_store,
    validate_content,
    validate_thresholds,
)

PRINCIPAL = "formation"


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


def apply_declaration(*, project: Project, data: Any, principal: str = PRINCIPAL) -> FormationReport:
    """Bring the project's declared stores to the declared state (see module docstring)."""
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
        vectors = {}
        for item in entry["memories"]:
            digest = content_hash(item["content"])
            vectors[digest] = _prepare_vector(store, item["content"], digest)[0]
        _apply_store(store, entry["memories"], vectors, principal, report)
    return report


@transaction.atomic
def _apply_store(store: MemoryStore, memories: list[dict[str, Any]], vectors: dict[str, Any],
                 principal: str, report: FormationReport) -> None:
    lock_store(store.pk)
    declared_ids = set()
    for item in memories:
        digest = content_hash(item["content"])
        content = _resolve_content(store, item["content"], digest, vectors.get(digest)).row
        memory = Memory.objects.filter(store=store, content=content, invalidated_at__isnull=True).first()
        action = "kept"
        if memory is None:
            memory = Memory.objects.create(store=store, content=content, tags=item["tags"],
                                           metadata=item["metadata"], source_type=SourceType.DECLARED)
            action = "created"
            report.created.append((store.name, content.text))
        else:
            report.kept.append((store.name, content.text))
        declared_ids.add(memory.pk)
        MemoryAssertion.objects.create(
            store=store, memory=memory, content=content.text, outcome=Outcome.DECLARED,
            decision_reason=action, details={"formation": action}, principal=principal,
            mechanism=Mechanism.FORMATION,
        )
    stale = Memory.objects.filter(store=store, source_type=SourceType.DECLARED, invalidated_at__isnull=True) \
        .exclude(pk__in=declared_ids).select_related("content")
    now = timezone.now()
    for memory in stale:
        Memory.objects.filter(pk=memory.pk).update(invalidated_at=now)
        MemoryAssertion.objects.create(
            store=store, memory=memory, replaced_memory=memory, content=memory.content.text,
            outcome=Outcome.FORGOTTEN, decision_reason="undeclared", details={"formation": "retired"},
            principal=principal, mechanism=Mechanism.FORMATION,
        )
        report.retired.append((store.name, memory.content.text))
