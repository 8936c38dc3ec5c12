"""Grant tags on create (docs/security.md, *Access inside a project*)."""

from __future__ import annotations

from django.db import transaction

from memory_engine.access import owner_tag
from memory_engine.models import ApiKey, Document, MemoryStore


@transaction.atomic
def access_tags_write(*, obj: Document | MemoryStore, creator: ApiKey | None) -> None:
    """Write the creator key's owner tag on a new document or store (nothing for a staff session)."""
    if creator is None:
        return
    tag = owner_tag(creator.pk)
    if tag not in obj.access_tags:
        obj.access_tags = [*obj.access_tags, tag]
        type(obj).objects.filter(pk=obj.pk).update(access_tags=obj.access_tags)


__all__ = ["access_tags_write"]
