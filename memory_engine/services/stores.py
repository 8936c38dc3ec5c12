"""Store and project lifecycle services: creating and changing a memory store, and erasure
(the one way ledger rows may go)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import QuerySet

from memory_engine.db import allow_ledger_erasure
from memory_engine.exceptions import NameTaken, ValidationFailed
from memory_engine.models import MemoryStore, Project

from .documents import stored_files_delete_on_commit
from .memory_write import validate_thresholds

#: What a caller may set on a memory store.
STORE_FIELDS = ("name", "description", "tags", "duplicate_threshold", "supersede_threshold",
                "require_about_for_kinds", "judge_enabled")


def check_name_free(rows: QuerySet[Any], name: str | None, *, label: str) -> None:
    """409 NAME_TAKEN when one of ``rows`` (a project's stores, agents, ... without the row
    being saved) already has ``name``; ``label`` starts the message ("A memory store")."""
    if name and rows.filter(name=name).exists():
        raise NameTaken(f"{label} named {name!r} already exists.", details={"name": name})


def validate_memory_store(store: MemoryStore) -> None:
    """A store about to be saved: its thresholds form a valid pair (THRESHOLDS_INVALID) and
    no other store of its project has its name (NAME_TAKEN)."""
    validate_thresholds(store.duplicate_threshold, store.supersede_threshold)
    others = MemoryStore.objects.filter(project_id=store.project_id).exclude(pk=store.pk)
    check_name_free(others, store.name, label="A memory store")


@transaction.atomic
def memory_store_save(*, project: Project, store: MemoryStore | None = None, **fields: Any) -> MemoryStore:
    """Create (store=None) or update a memory store of ``project`` with ``fields`` (names in
    STORE_FIELDS) after :func:`validate_memory_store`."""
    unknown = set(fields) - set(STORE_FIELDS)
    if unknown:
        raise ValidationFailed(f"Unknown memory store fields: {', '.join(sorted(unknown))}.",
                               details={"fields": sorted(unknown)})
    store = store or MemoryStore(project=project)
    for name, value in fields.items():
        setattr(store, name, value)
    validate_memory_store(store)
    store.save()
    return store


@transaction.atomic
def memory_store_delete(*, store: MemoryStore) -> None:
    """Erase a store with its memories and their ledger rows."""
    allow_ledger_erasure()
    store.delete()


@transaction.atomic
def project_delete(*, project: Project) -> None:
    """Erase a project and everything in it, keys and stored document files included."""
    allow_ledger_erasure()
    stored_files_delete_on_commit(names=list(project.documents.values_list("file", flat=True)))
    project.delete()
