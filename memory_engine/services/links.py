"""Evidence links: record and delete that one memory or document version supports or
contradicts another (search counts them: SEARCH_CORROBORATION, docs/retrieval.md)."""

from __future__ import annotations

from django.db import IntegrityError, transaction

from memory_engine.db import delete_in_project
from memory_engine.exceptions import LinkEndNotFound, LinkExists, LinkInvalid
from memory_engine.models import DocumentVersion, EvidenceLink, Memory, Project

#: What a link's end may be.
LinkEnd = Memory | DocumentVersion

#: Id prefixes of the two kinds of end (memory_engine.ids).
MEMORY_PREFIX, VERSION_PREFIX = "mem_", "dv_"


def link_end(*, project: Project, end_id: object, field: str) -> LinkEnd:
    """The memory (``mem_…``) or document version (``dv_…``) ``end_id`` of ``project``.

    Raises LinkInvalid (400) for an id of neither kind, LinkEndNotFound (404) for an id that
    is not in the project (another project's id answers like one that never existed)."""
    if not isinstance(end_id, str) or not end_id.startswith((MEMORY_PREFIX, VERSION_PREFIX)):
        raise LinkInvalid(f"`{field}` must be a memory id (mem_…) or a document version id (dv_…).",
                          details={"field": field})
    end: LinkEnd | None
    if end_id.startswith(MEMORY_PREFIX):
        end = Memory.objects.select_related("store").filter(pk=end_id, store__project=project).first()
    else:
        end = DocumentVersion.objects.select_related("document").filter(pk=end_id, document__project=project).first()
    if end is None:
        raise LinkEndNotFound(details={"field": field, field: end_id})
    return end


def _project_id(end: LinkEnd) -> int:
    return end.store.project_id if isinstance(end, Memory) else end.document.project_id


@transaction.atomic
def evidence_link_create(*, project: Project, kind: str, source: LinkEnd, target: LinkEnd,
                         created_by: str = "") -> EvidenceLink:
    """A link: ``source`` supports or contradicts ``target`` (both of ``project``).

    Raises LinkInvalid (400: an unknown kind, an end linked to itself), LinkEndNotFound (404:
    an end of another project) and LinkExists (409: the same source, target and kind)."""
    if kind not in EvidenceLink.Kind.values:
        raise LinkInvalid(f"`kind` must be one of {', '.join(EvidenceLink.Kind.values)}.", details={"field": "kind"})
    for field, end in (("source_id", source), ("target_id", target)):
        if _project_id(end) != project.pk:
            raise LinkEndNotFound(details={"field": field, field: end.pk})
    if source.pk == target.pk:
        raise LinkInvalid("A link needs two different ends.", details={"field": "target_id"})
    ends = {
        "source_memory": source if isinstance(source, Memory) else None,
        "source_version": source if isinstance(source, DocumentVersion) else None,
        "target_memory": target if isinstance(target, Memory) else None,
        "target_version": target if isinstance(target, DocumentVersion) else None,
    }
    existing = EvidenceLink.objects.filter(kind=kind, **ends).values_list("id", flat=True).first()
    if existing is not None:
        raise LinkExists(details={"id": existing})
    try:
        with transaction.atomic():
            return EvidenceLink.objects.create(project=project, kind=kind, created_by=created_by, **ends)
    except IntegrityError:  # a concurrent request created the same link first (me_link_unique)
        raise LinkExists(details={"id": EvidenceLink.objects.filter(kind=kind, **ends)
                                  .values_list("id", flat=True).first()}) from None


def evidence_link_delete(*, link: EvidenceLink) -> None:
    delete_in_project(EvidenceLink.objects.filter(pk=link.pk), link.project_id)
