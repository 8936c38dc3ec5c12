"""Subjects: the host's external id of an end user, owner of a user-tier memory store (base
layer: imports only exceptions). 1-200 characters, compared exactly (docs/memory.md)."""

from __future__ import annotations

from typing import Any

from memory_engine.exceptions import SubjectInvalid

__all__ = ["MAX_SUBJECT_LENGTH", "validate_subject"]

#: MemoryStore.subject_external_id's max_length.
MAX_SUBJECT_LENGTH = 200


def validate_subject(value: Any, *, field: str = "subject", allow_none: bool = False) -> str | None:
    """The external id as given; None only when ``allow_none``; else 400 SUBJECT_INVALID."""
    if value is None and allow_none:
        return None
    if (not isinstance(value, str) or not 1 <= len(value) <= MAX_SUBJECT_LENGTH or "\x00" in value
            or value.strip() != value):
        shown = value if isinstance(value, str) else repr(value)
        raise SubjectInvalid(details={"field": field, "value": shown[:MAX_SUBJECT_LENGTH]})
    return value
