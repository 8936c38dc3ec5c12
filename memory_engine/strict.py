"""Strict input, in one place: every request body the API (and every tool call an agent or an MCP
client makes) reads goes through a serializer built on
:class:`Serializer` or :class:`ModelSerializer` below, and a field it does not declare answers
``400 UNKNOWN_FIELD`` naming it (at any nesting level, with its dotted path), never a silent
success, with the nearest declared name when one is close ("did you mean"). Read-only fields count
as known: echoing a resource back in a ``PUT`` stays valid; a ``PATCH`` (a partial update), which
sends only what it changes, is refused ``400 FIELD_READ_ONLY`` naming them instead of answering 200
with nothing changed.
``tests/hardening/test_strict_input.py`` sends an unknown field to every operation of the schema.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from django.utils import timezone
from rest_framework import serializers

from memory_engine.exceptions import FieldReadOnly, UnknownField
from memory_engine.jsonobject import parse_json_object
from memory_engine.text import contains_nul

__all__ = ["AwareDateTimeField", "JSONObjectField", "ModelSerializer", "Serializer", "StrictCharField", "StrictInput",
           "refuse_read_only", "refuse_unknown"]


#: Known to every form body: Django's CSRF field of a browser form sent with a session (accepted,
#: never listed among the fields an endpoint takes).
ALWAYS_KNOWN = frozenset({"csrfmiddlewaretoken"})


def _path(serializer: Any) -> str:
    """The dotted path of a nested serializer inside the request body ("" at the top; the items
    of a list share their list's name)."""
    names = []
    node = serializer
    while node is not None:
        if getattr(node, "field_name", ""):
            names.append(node.field_name)
        node = node.parent
    return ".".join(reversed(names))


def refuse_unknown(data: Any, known: set[str] | frozenset[str], *, prefix: str = "") -> None:
    """400 UNKNOWN_FIELD when the object ``data`` has keys outside ``known`` (and ALWAYS_KNOWN),
    suggesting the nearest known name of each when one is close (``details.suggestions``)."""
    if not isinstance(data, Mapping):
        return
    unknown = sorted(str(name) for name in data if name not in known and name not in ALWAYS_KNOWN)
    if not unknown:
        return
    dotted = (lambda name: f"{prefix}.{name}") if prefix else (lambda name: name)
    taken = sorted(set(known) - ALWAYS_KNOWN)
    suggestions = {}
    for name in unknown:
        close = difflib.get_close_matches(name, taken, n=1, cutoff=0.75)
        if close:
            suggestions[dotted(name)] = dotted(close[0])
    named = [dotted(name) + (f" (did you mean `{suggestions[dotted(name)]}`?)" if dotted(name) in suggestions else "")
             for name in unknown]
    details: dict[str, Any] = {"fields": [dotted(name) for name in unknown]}
    if suggestions:
        details["suggestions"] = suggestions
    raise UnknownField(f"Unknown field(s): {', '.join(named)}. This endpoint takes: "
                       f"{', '.join(taken) or 'no fields'}.", details=details)


def refuse_read_only(data: Any, read_only: set[str], *, prefix: str = "") -> None:
    """400 FIELD_READ_ONLY when the object ``data`` sets one of ``read_only``."""
    if not isinstance(data, Mapping):
        return
    named = sorted(f"{prefix}.{name}" if prefix else str(name) for name in data if name in read_only)
    if named:
        raise FieldReadOnly(f"Read-only field(s): {', '.join(named)}; this operation cannot change them. "
                            "Leave them out.", details={"fields": named})


class StrictInput:
    """Serializer mixin: refuse undeclared fields before validating the declared ones."""

    fields: Any
    #: Names a serializer takes besides its fields (a query serializer: the session's ``project_id``).
    also_known: frozenset[str] = frozenset()

    def to_internal_value(self, data: Any) -> Any:
        refuse_unknown(data, {*self.fields, *self.also_known}, prefix=_path(self))
        if getattr(self, "partial", False):
            refuse_read_only(data, {name for name, field in self.fields.items() if field.read_only},
                             prefix=_path(self))
        return super().to_internal_value(data)  # type: ignore[misc]


class Serializer(StrictInput, serializers.Serializer):
    """DRF's Serializer that refuses undeclared fields (``UNKNOWN_FIELD``)."""


class ModelSerializer(StrictInput, serializers.ModelSerializer):
    """DRF's ModelSerializer that refuses undeclared fields (``UNKNOWN_FIELD``)."""


class JSONObjectField(serializers.JSONField):
    """A JSON object (dict) field; arrays, scalars and NUL characters are rejected."""

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        try:
            value = parse_json_object(super().to_internal_value(data))
        except ValueError:
            raise serializers.ValidationError("Must be a JSON object.") from None
        if contains_nul(value):
            raise serializers.ValidationError("Null characters are not allowed.")
        return value


class StrictCharField(serializers.CharField):
    """A CharField that refuses numbers and booleans instead of stringifying them."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            raise serializers.ValidationError("Must be a string.")
        return super().to_internal_value(data)


class AwareDateTimeField(serializers.DateTimeField):
    """A DateTimeField that keeps a value without a time zone naive instead of reading it in the
    server's zone, so the check behind it refuses it (``expires_at``: the write funnel's
    ``validate_expires_at``, 400 EXPIRES_AT_INVALID): "2030-01-01 00:00" is a different moment in
    every zone, and guessing would move an expiry by hours."""

    def enforce_timezone(self, value: Any) -> Any:
        if timezone.is_naive(value):
            return value
        return super().enforce_timezone(value)
