"""The legal-hold guard every removal path calls first (forget, purge, erasure, delete).

A memory or document version whose ``retention_class`` is ``legal_hold`` is never removed:
:func:`check_legal_hold` raises 409 LEGAL_HOLD naming the held rows, before anything changes.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from memory_engine.exceptions import LegalHold
from memory_engine.models import DocumentVersion, Memory
from memory_engine.models.retention import RetentionClass

__all__ = ["check_legal_hold"]

#: At most this many held ids are named in the error's details.
NAMED_MAX = 100


def check_legal_hold(*, memories: QuerySet[Memory] | None = None,
                     versions: QuerySet[DocumentVersion] | None = None) -> None:
    """409 LEGAL_HOLD when any of ``memories`` or ``versions`` is under legal hold."""
    details: dict[str, Any] = {}
    if memories is not None:
        held = list(memories.filter(retention_class=RetentionClass.LEGAL_HOLD)
                    .order_by("pk").values_list("pk", flat=True)[:NAMED_MAX])
        if held:
            details["memory_ids"] = held
    if versions is not None:
        held_versions = list(versions.filter(retention_class=RetentionClass.LEGAL_HOLD)
                             .order_by("pk").values_list("pk", "document_id")[:NAMED_MAX])
        if held_versions:
            details["document_version_ids"] = [v for v, _ in held_versions]
            details["document_ids"] = sorted({d for _, d in held_versions})
    if details:
        raise LegalHold(details=details)
