"""Shared serializer fields and helpers."""

from __future__ import annotations

import json
from typing import Any

from rest_framework import serializers

from memory_engine.exceptions import ValidationFailed


class JSONObjectField(serializers.JSONField):
    """A JSON object (dict) field; arrays and scalars are rejected."""

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        value = super().to_internal_value(data)
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                raise serializers.ValidationError("Must be a JSON object.") from None
        if not isinstance(value, dict):
            raise serializers.ValidationError("Must be a JSON object.")
        return value


class StrictCharField(serializers.CharField):
    """A CharField that refuses numbers and booleans instead of stringifying them."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            raise serializers.ValidationError("Must be a string.")
        return super().to_internal_value(data)


def parse_tags_param(raw: str | None) -> dict[str, Any] | None:
    """``?tags={"team": "a"}`` -> dict, or a clear 400."""
    if raw in (None, ""):
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        raise ValidationFailed("`tags` must be a JSON object, e.g. ?tags={\"team\":\"a\"}.",
                               details={"tags": raw[:200]}) from None
    if not isinstance(value, dict):
        raise ValidationFailed("`tags` must be a JSON object.", details={"tags": raw[:200]})
    return value
