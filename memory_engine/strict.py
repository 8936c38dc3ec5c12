"""Strict input, in one place: every request body the API (and every tool call an agent or an MCP
client makes) reads goes through a serializer built on
:class:`Serializer` or :class:`ModelSerializer` below, and a field it does not declare answers
``400 UNKNOWN_FIELD`` naming it (at any nesting level, with its dotted path), never a silent
success. Read-only fields count as known: echoing a resource back in a ``PUT`` stays valid.
``tests/hardening/test_strict_input.py`` sends an unknown field to every operation of the schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework import serializers

from memory_engine.exceptions import UnknownField
from memory_engine.jsonobject import parse_json_object
from memory_engine.text import contains_nul

__all__ = ["JSONObjectField", "ModelSerializer", "Serializer", "StrictCharField", "StrictInput", "refuse_unknown"]


#: Known to every form body: Django's CSRF field of a browser form sent with a session.
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
    """400 UNKNOWN_FIELD when the object ``data`` has keys outside ``known``."""
    if not isinstance(data, Mapping):
        return
    unknown = sorted(str(name) for name in data if name not in known)
    if unknown:
        named = [f"{prefix}.{name}" if prefix else name for name in unknown]
        raise UnknownField(f"Unknown field(s): {', '.join(named)}. This endpoint takes: "
                           f"{', '.join(sorted(known)) or 'no fields'}.", details={"fields": named})


class StrictInput:
    """Serializer mixin: refuse undeclared fields before validating the declared ones."""

    fields: Any
    #: Names a serializer takes besides its fields (a query serializer: the session's ``project_id``).
    also_known: frozenset[str] = frozenset()

    def to_internal_value(self, data: Any) -> Any:
        refuse_unknown(data, {*self.fields, *self.also_known, *ALWAYS_KNOWN}, prefix=_path(self))
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
