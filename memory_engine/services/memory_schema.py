"""A project's memory schema: the kinds (and relation types) its memories may have.

Without a schema, or with no kinds declared, any kind is accepted and the tool enums stay open.
"""

from __future__ import annotations

from memory_engine.exceptions import KindUnknown
from memory_engine.models import MemorySchema, Project


def accepted_kinds(project: Project | str) -> list[str] | None:
    """The kind names the project's schema declares, None when any kind is accepted."""
    project_id = project if isinstance(project, str) else project.pk
    schema = MemorySchema.objects.filter(project_id=project_id).only("kinds").first()
    if schema is None or not schema.kinds:
        return None
    return [k["name"] for k in schema.kinds if isinstance(k, dict) and isinstance(k.get("name"), str)]


def check_kind(project: Project | str, kind: str) -> None:
    """400 KIND_UNKNOWN unless the project's schema accepts ``kind``."""
    accepted = accepted_kinds(project)
    if accepted is not None and kind not in accepted:
        raise KindUnknown(f"Kind {kind!r} is not declared in this project's memory schema.",
                          details={"kind": kind, "accepted": accepted})
