"""A project's memory schema: the kinds (and relation types) its memories may have.

Without a schema, or with no kinds declared, any kind is accepted and the tool enums stay open.
When a schema declares kinds, exactly those are accepted: the built-in kinds (fact, preference,
observation, instruction) must be listed too to stay accepted.

An entry is ``{"name", "display_name"?, "description"?}`` (a bare string is shorthand for
``{"name": string}``): ``name`` matches :data:`NAME_PATTERN`, ``display_name`` (one line of at
most 200 characters) defaults to the name in words, ``description`` (at most 1000) to ``""``. Names are
unique within ``kinds`` and within ``relation_types``.
"""

from __future__ import annotations

import re
from typing import Any

from django.db import transaction

from memory_engine.exceptions import KindUnknown, SchemaInvalid
from memory_engine.models import MemorySchema, Project
from memory_engine.models.memories import Kind

#: The kinds a memory has when its project declares none (named in the open tool descriptions).
BUILTIN_KINDS: tuple[str, ...] = tuple(Kind.values)
#: A kind or relation type name: lowercase ASCII letters, digits and ``_``, starting with a letter.
NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,99}")
MAX_DISPLAY_NAME = 200
#: Not in a display name: it is rendered as one line of a list in the tool descriptions.
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")
MAX_DESCRIPTION = 1000
#: Entries per list: every declared kind is rendered into the agents' tool descriptions.
MAX_ENTRIES = 100
SECTIONS = ("kinds", "relation_types")


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


def memory_schema_of(project: Project) -> dict[str, list[dict[str, str]]]:
    """``{"kinds": [...], "relation_types": [...]}`` of the project; empty lists without a schema."""
    schema = MemorySchema.objects.filter(project=project).first()
    if schema is None:
        return {"kinds": [], "relation_types": []}
    return {"kinds": list(schema.kinds or []), "relation_types": list(schema.relation_types or [])}


def _invalid(section: str, index: int | None, message: str, **details: Any) -> SchemaInvalid:
    where = section if index is None else f"{section}[{index}]"
    return SchemaInvalid(f"{where}: {message}", details={"field": where, **details})


def _entry(section: str, index: int, raw: Any) -> dict[str, str]:
    if isinstance(raw, str):
        raw = {"name": raw}
    if not isinstance(raw, dict):
        raise _invalid(section, index, "must be an object {name, display_name?, description?} or a name.")
    unknown = sorted(set(raw) - {"name", "display_name", "description"})
    if unknown:
        raise _invalid(section, index, f"unknown keys: {', '.join(map(str, unknown))}.", keys=unknown)
    name = raw.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise _invalid(section, index, "`name` must be 1-100 lowercase ASCII letters, digits and _, "
                                       "starting with a letter.", name=name[:120] if isinstance(name, str) else None)
    display_name = raw.get("display_name")
    if display_name is None or (isinstance(display_name, str) and not display_name.strip()):
        display_name = name.replace("_", " ").capitalize()
    if (not isinstance(display_name, str) or len(display_name) > MAX_DISPLAY_NAME
            or CONTROL_CHARACTERS.search(display_name)):
        raise _invalid(section, index, f"`display_name` must be one line of at most {MAX_DISPLAY_NAME} "
                                       "characters.", name=name)
    description = raw.get("description")
    if description is None:
        description = ""
    if not isinstance(description, str) or len(description) > MAX_DESCRIPTION or "\x00" in description:
        raise _invalid(section, index, f"`description` must be a string of at most {MAX_DESCRIPTION} "
                                       "characters.", name=name)
    return {"name": name, "display_name": display_name.strip(), "description": description.strip()}


def _section(section: str, raw: Any) -> list[dict[str, str]]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise _invalid(section, None, "must be a list.")
    if len(raw) > MAX_ENTRIES:
        raise _invalid(section, None, f"at most {MAX_ENTRIES} entries.", count=len(raw))
    entries: list[dict[str, str]] = []
    seen: set[str] = set()
    for index, item in enumerate(raw):
        entry = _entry(section, index, item)
        if entry["name"] in seen:
            raise _invalid(section, index, f"name {entry['name']!r} is declared twice.", name=entry["name"])
        seen.add(entry["name"])
        entries.append(entry)
    return entries


def validate_memory_schema(*, kinds: Any, relation_types: Any) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """The normalized ``(kinds, relation_types)``, or 400 SCHEMA_INVALID naming the bad entry
    (``details.field`` is e.g. ``"kinds[2]"``). ``None`` stands for an empty list."""
    return _section("kinds", kinds), _section("relation_types", relation_types)


@transaction.atomic
def memory_schema_save(*, project: Project, kinds: Any, relation_types: Any) -> MemorySchema:
    """Replace the project's memory schema (creating it) after :func:`validate_memory_schema`."""
    normalized_kinds, normalized_relations = validate_memory_schema(kinds=kinds, relation_types=relation_types)
    schema, _ = MemorySchema.objects.select_for_update().get_or_create(project=project)
    schema.kinds = normalized_kinds
    schema.relation_types = normalized_relations
    schema.save()
    return schema
