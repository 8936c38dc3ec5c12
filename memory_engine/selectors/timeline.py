"""The timeline: what came in lately, one event per document of the caller's reach (its active
live version), newest capture first; a document captured again rises to the top
(docs/documents.md, *Timeline*)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import F

from memory_engine.models import Document, Project
from memory_engine.models.documents import DocumentStatus
from memory_engine.policy import Principal, visible

__all__ = ["TimelineEvent", "timeline"]


@dataclass(frozen=True)
class TimelineEvent:
    #: When its active version was captured.
    at: datetime
    title: str
    path: str
    source: str
    document_id: str
    version_id: str
    #: Who captured that version (the ledger's principal label).
    principal_id: str


def timeline(*, project: Project, caller: Principal, limit: int = 50, before: datetime | None = None
             ) -> list[TimelineEvent]:
    """Up to ``limit`` events captured before ``before`` (the ``at`` of the last event of the
    previous page), newest first; forgotten documents and ones with no live version are left out."""
    documents = visible(caller, Document.objects.filter(project=project, forgotten_at__isnull=True,
                                                        active_version__isnull=False))
    documents = documents.exclude(status=DocumentStatus.FAILED).annotate(
        at=F("active_version__created_at"), version_id=F("active_version_id"),
        principal_id=F("active_version__captured_by"))
    if before is not None:
        documents = documents.filter(at__lt=before)
    rows = documents.order_by("-at", "-id").values("at", "title", "path", "source", "id", "version_id",
                                                   "principal_id")[:limit]
    return [TimelineEvent(at=row["at"], title=row["title"] or row["path"].rsplit("/", 1)[-1], path=row["path"],
                          source=row["source"], document_id=row["id"], version_id=row["version_id"],
                          principal_id=row["principal_id"]) for row in rows]
