"""Helpers of the access tests: keys with grants, grant tags on rows."""

from __future__ import annotations

from typing import Any

from memory_engine.models import ApiKey, Document, MemoryStore
from memory_engine.services.keys import api_key_create
from tests.conftest import api_client

ALL = ["search", "add", "forget", "purge"]


def keyed(project: Any, grants: list[dict[str, Any]] | None = None, **kwargs: Any) -> tuple[Any, ApiKey]:
    key, raw = api_key_create(project=project, grants=grants, **kwargs)
    return api_client(raw), key


def tag(obj: Document | MemoryStore, *tags: str) -> None:
    type(obj).objects.filter(pk=obj.pk).update(access_tags=list(tags))
    obj.refresh_from_db()
