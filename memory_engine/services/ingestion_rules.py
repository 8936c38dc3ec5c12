"""Ingestion rules: which converter handles which content type.

A rule's ``content_type_glob`` uses ``*`` (any run of characters) and ``?`` (one
character). The most specific matching rule wins: fewest wildcards, then the longest
literal part. Two rules of equal specificity that could both match one content type
would make the choice arbitrary, so saving such a rule is refused (``RULE_AMBIGUOUS``).
"""

from __future__ import annotations

import re
from fnmatch import fnmatchcase
from functools import cache
from typing import Any

from django.db import transaction

from memory_engine.chunking import validate_chunk_settings
from memory_engine.conf import engine_settings
from memory_engine.db import lock_project_documents
from memory_engine.exceptions import IngestionRuleInvalid, RuleAmbiguous, RuleExists
from memory_engine.guards import check_callable_allowed, check_outbound_url
from memory_engine.models import IngestionRule, Project
from memory_engine.providers.converters.callable import load_callable

_GLOB = re.compile(r"^[a-z0-9!#$&^_.+\-*?]+/[a-z0-9!#$&^_.+\-*?]+$|^\*$")
FIELDS = (
    "name", "content_type_glob", "converter_type", "converter_path", "converter_url", "converter_secret",
    "converter_timeout", "native_extraction", "file_delivery", "chunk_strategy", "chunk_size",
    "chunk_overlap", "enabled", "guard_policy",
)


def glob_specificity(glob: str) -> tuple[int, int]:
    """Sort key, smaller is more specific: (wildcards, -literal characters)."""
    wildcards = glob.count("*") + glob.count("?")
    return wildcards, -(len(glob) - wildcards)


def globs_overlap(a: str, b: str) -> bool:
    """Whether some string matches both globs (``*`` and ``?`` only)."""

    @cache
    def meet(i: int, j: int) -> bool:
        if i == len(a) and j == len(b):
            return True
        if i < len(a) and a[i] == "*":
            return meet(i + 1, j) or (j < len(b) and meet(i, j + 1))
        if j < len(b) and b[j] == "*":
            return meet(i, j + 1) or (i < len(a) and meet(i + 1, j))
        if i == len(a) or j == len(b):
            return False
        return (a[i] == b[j] or "?" in (a[i], b[j])) and meet(i + 1, j + 1)

    return meet(0, 0)


def rule_for_content_type(*, project: Project, content_type: str) -> IngestionRule | None:
    """The most specific enabled rule of the project whose glob matches ``content_type``."""
    content_type = content_type.lower()
    matches = [
        rule for rule in IngestionRule.objects.filter(project=project, enabled=True)
        if fnmatchcase(content_type, rule.content_type_glob)
    ]
    if not matches:
        return None
    return min(matches, key=lambda rule: (glob_specificity(rule.content_type_glob), rule.created_at))


def _invalid(message: str, **details: Any) -> IngestionRuleInvalid:
    return IngestionRuleInvalid(message, details=details)


def validate_rule(rule: IngestionRule, *, trusted: bool = False) -> None:
    """Raise IngestionRuleInvalid (400: RULE_EXISTS, RULE_AMBIGUOUS, or INGESTION_RULE_INVALID with
    a message naming the field to fix), CONVERTER_NOT_FOUND or CHUNK_SETTINGS_INVALID (400), or
    NotAllowed (400) when the rule as a whole — the stored row merged with the change — names a callable
    outside ``CONVERTER_CALLABLE_PREFIXES`` (only superusers, ``trusted``, may) or a URL the
    outbound guard refuses (memory_engine.guards)."""
    glob = rule.content_type_glob = (rule.content_type_glob or "").strip().lower()
    if not _GLOB.match(glob):
        raise _invalid("content_type_glob must look like application/pdf, image/* or */*; only * and ? "
                       "are wildcards.", content_type_glob=glob)
    if rule.converter_type == IngestionRule.ConverterType.CALLABLE:
        # Before importing: importing a module runs its code.
        check_callable_allowed(rule.converter_path, setting="CONVERTER_CALLABLE_PREFIXES", trusted=trusted)
        load_callable(rule.converter_path)  # 400 CONVERTER_NOT_FOUND
    elif rule.converter_type == IngestionRule.ConverterType.HTTP:
        if not re.match(r"^https?://", rule.converter_url or ""):
            raise _invalid("An http converter needs converter_url (http:// or https://).")
        if rule.converter_path:
            # A path parked on an http rule would become code the moment the type changes.
            raise _invalid("An http converter takes no converter_path; send converter_path: \"\".",
                           converter_path=rule.converter_path)
        check_outbound_url(rule.converter_url)
    else:
        raise _invalid("converter_type must be `callable` or `http`.", converter_type=rule.converter_type)
    if not 0 < float(rule.converter_timeout) <= 3600:
        raise _invalid("converter_timeout must be in (0, 3600] seconds.", converter_timeout=rule.converter_timeout)
    if rule.chunk_strategy or rule.chunk_size is not None or rule.chunk_overlap is not None:
        validate_chunk_settings(strategy=rule.chunk_strategy or "size", chunk_size=rule.chunk_size or 1000,
                                chunk_overlap=rule.chunk_overlap if rule.chunk_overlap is not None else
                                min(200, (rule.chunk_size or 1000) - 1),
                                max_chars=engine_settings.MAX_CHUNK_CHARS)  # 400 CHUNK_SETTINGS_INVALID
    others = IngestionRule.objects.filter(project_id=rule.project_id).exclude(pk=rule.pk)
    for other in others:
        if other.content_type_glob == glob:
            raise RuleExists(f"Rule {other.pk} already handles {glob}; edit it instead.",
                             details={"conflicts_with": other.pk})
        if glob_specificity(other.content_type_glob) == glob_specificity(glob) and globs_overlap(
            other.content_type_glob, glob
        ):
            raise RuleAmbiguous(
                f"{glob} is exactly as specific as rule {other.pk} ({other.content_type_glob}) and both can "
                "match the same content type, so neither would clearly win; make one glob more specific.",
                details={"conflicts_with": other.pk, "content_type_glob": other.content_type_glob},
            )


@transaction.atomic
def ingestion_rule_save(*, project: Project, rule: IngestionRule | None = None, trusted: bool = False,
                        **fields: Any) -> IngestionRule:
    """Create (rule=None) or update a rule after validating the merged result (see
    :func:`validate_rule`; ``trusted``: a superuser); serialized per project."""
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise _invalid(f"Unknown rule fields: {', '.join(sorted(unknown))}.")
    lock_project_documents(project.pk)
    rule = rule or IngestionRule(project=project)
    for name, value in fields.items():
        setattr(rule, name, value)
    validate_rule(rule, trusted=trusted)
    rule.save()
    return rule
