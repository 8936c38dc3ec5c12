"""Which sources one search reads: the filters of a request resolved against the caller's project.

Documents are searched when document_ids / document_paths / tags are given, or when nothing
scopes the search to memories (a bare query searches the project's documents, never its
memories); memories when memory_store_ids or tags are given. Ids outside the project are
refused (UNKNOWN_SCOPE) without saying whether they exist elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg.types.json import Jsonb

from memory_engine.exceptions import UnknownScope, ValidationFailed
from memory_engine.models import Document, MemoryStore, Project

from .results import DOCUMENT, MEMORY
from .validation import string_list


@dataclass
class Scope:
    """The resolved sources of one search."""

    project_id: str
    store_ids: list[str] | None  # None: memories are not searched
    search_documents: bool
    document_ids: list[str] | None
    path_patterns: list[str] | None
    tags: dict[str, Any] | None

    @property
    def sources(self) -> list[str]:
        """The sources searched, memories first."""
        return ([MEMORY] if self.store_ids is not None else []) + ([DOCUMENT] if self.search_documents else [])

    def params(self) -> dict[str, Any]:
        """The SQL parameters the scope filters of memory_engine.selectors.search.sql name."""
        return {
            "project": self.project_id,
            "store_ids": self.store_ids or [],
            "doc_ids": self.document_ids or [],
            "path_patterns": self.path_patterns or [],
            "tags": Jsonb(self.tags) if self.tags else None,
        }


def _like_prefix(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _missing(ids: list[str], found: set[str]) -> list[str]:
    return [i for i in ids if i not in found]


def resolve_scope(
    *,
    project: Project,
    query: str | None,
    memory_store_ids: list[str] | None,
    document_ids: list[str] | None,
    document_paths: list[str] | None,
    tags: dict[str, Any] | None,
) -> Scope:
    """Which sources to search; unknown or foreign ids -> UNKNOWN_SCOPE naming them."""
    store_ids = string_list("memory_store_ids", memory_store_ids)
    doc_ids = string_list("document_ids", document_ids)
    paths = string_list("document_paths", document_paths)
    if tags is not None and not isinstance(tags, dict):
        raise ValidationFailed("`tags` must be a JSON object.", details={"field": "tags"})
    unknown: dict[str, list[str]] = {}
    if store_ids:
        found = set(MemoryStore.objects.filter(project=project, pk__in=store_ids).values_list("pk", flat=True))
        if missing := _missing(store_ids, found):
            unknown["memory_store_ids"] = missing
    if doc_ids:
        found = set(Document.objects.filter(project=project, pk__in=doc_ids).values_list("pk", flat=True))
        if missing := _missing(doc_ids, found):
            unknown["document_ids"] = missing
    if unknown:
        names = ", ".join(i for ids in unknown.values() for i in ids)
        raise UnknownScope(f"Not found in your project: {names}.", details=unknown)

    tags = tags or None
    memories = bool(store_ids) or tags is not None
    if tags is not None and not store_ids:
        store_ids = list(MemoryStore.objects.filter(project=project).values_list("pk", flat=True))
    documents = bool(doc_ids) or bool(paths) or tags is not None or (query is not None and not memories)
    return Scope(
        project_id=project.pk,
        store_ids=store_ids if memories else None,
        search_documents=documents,
        document_ids=doc_ids or None,
        path_patterns=[_like_prefix(p) for p in paths] if paths else None,
        tags=tags,
    )
