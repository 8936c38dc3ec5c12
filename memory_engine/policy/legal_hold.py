"""Legal hold, in one place: the check every path that deletes or redacts calls first (memory
forget and purge, store, agent and project deletion, document forget, purge and delete, erasure,
the sweeps and their cascades), and the rule for releasing a hold.

A memory or document version whose ``retention_class`` is ``legal_hold`` is never removed:
:func:`check_legal_hold` raises 409 LEGAL_HOLD naming the held rows, before anything changes.
Releasing a hold (changing the class of a held row to anything else) needs the ``hold`` action
(:func:`require_hold_release`), which no grant pattern includes unless it names it; the change is
written to the ledger by the service that makes it.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Model, QuerySet

from memory_engine.exceptions import LegalHold
from memory_engine.grants import HOLD
from memory_engine.models import DocumentVersion, Memory
from memory_engine.models.retention import RetentionClass

from .decisions import require
from .principals import Principal

__all__ = ["check_legal_hold", "releases_hold", "require_hold_release"]

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


def releases_hold(current: str, new: str) -> bool:
    """Whether changing a row's retention class from ``current`` to ``new`` releases a hold."""
    return current == RetentionClass.LEGAL_HOLD and new != RetentionClass.LEGAL_HOLD


def require_hold_release(principal: Principal, obj: Model, *, current: str, new: str) -> None:
    """403 GRANT_REQUIRED (``details.action: "hold"``) when the change releases a hold that
    ``principal`` may not release."""
    if releases_hold(current, new):
        require(principal, HOLD, obj)
