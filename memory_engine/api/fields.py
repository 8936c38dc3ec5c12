"""Shared serializer fields and helpers."""

from __future__ import annotations

import json
from typing import Any

from rest_framework import serializers

from memory_engine import strict
from memory_engine.conf import engine_settings
from memory_engine.exceptions import TagFilterTooLarge, ValidationFailed
from memory_engine.jsonobject import parse_json_object
from memory_engine.selectors.feed import shown_cursor
from memory_engine.strict import JSONObjectField
from memory_engine.text import contains_nul

__all__ = ["FeedCursorField", "ShareSerializer", "TagFilterField", "check_tag_filter", "parse_tags_param"]


def check_tag_filter(tags: dict[str, Any]) -> dict[str, Any]:
    """A ``tags`` filter has at most MAX_TAG_FILTER_KEYS keys (400 TAG_FILTER_TOO_LARGE)."""
    limit = engine_settings.MAX_TAG_FILTER_KEYS
    if len(tags) > limit:
        raise TagFilterTooLarge(f"A tags filter may name at most {limit} keys; this one names {len(tags)}.",
                                details={"keys": len(tags), "max_keys": limit})
    return tags


class TagFilterField(JSONObjectField):
    """A ``tags`` filter: a JSON object of at most MAX_TAG_FILTER_KEYS keys."""

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        return check_tag_filter(super().to_internal_value(data))


class FeedCursorField(serializers.CharField):
    """A feed position a row keeps (a distiller's, a webhook subscription's or delivery's), shown
    as a feed cursor of the row's project: sealed, as ``GET /feed`` gives it (selectors.feed)."""

    def __init__(self, attribute: str = "cursor", **kwargs: Any) -> None:
        self.attribute = attribute
        kwargs.setdefault("help_text", "A feed cursor (opaque; may be passed as `after` to GET /feed); "
                                       "empty: nothing read yet.")
        super().__init__(source="*", read_only=True, **kwargs)

    def to_representation(self, value: Any) -> str:
        return shown_cursor(getattr(value, self.attribute), project_id=value.project_id)


def parse_tags_param(raw: str | None) -> dict[str, Any] | None:
    """``?tags={"team": "a"}`` -> dict, or a clear 400."""
    if not raw:  # absent or empty
        return None
    try:
        value = parse_json_object(raw)
    except json.JSONDecodeError:
        raise ValidationFailed("`tags` must be a JSON object, e.g. ?tags={\"team\":\"a\"}.",
                               details={"tags": raw[:200]}) from None
    except ValueError:
        raise ValidationFailed("`tags` must be a JSON object.", details={"tags": raw[:200]}) from None
    if contains_nul(value):
        raise ValidationFailed("`tags` may not contain null characters.", details={"tags": raw[:200]})
    return check_tag_filter(value)


class ShareSerializer(strict.Serializer):
    """``share`` on create (docs/security.md, *Access inside a project*)."""

    keys = serializers.ListField(child=serializers.CharField(max_length=40), max_length=100,
                                 help_text="Ids of keys of your project that get the actions on the new object.")
    actions = serializers.ListField(child=serializers.ChoiceField(choices=["search", "add", "forget", "purge"]),
                                    required=False, default=["search"], min_length=1)
