"""Grant tags on create (docs/security.md, *Access inside a project*): the creator's owner tag
and ``share: {keys: [...]}``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db import transaction

from memory_engine.exceptions import ValidationFailed
from memory_engine.grants import SEARCH, owner_tag, share_tag, validate_grants
from memory_engine.models import ApiKey, Document, MemoryStore, Project


@dataclass(frozen=True)
class Share:
    """Keys of the project the new object is shared with, and the actions they get on it."""

    keys: list[ApiKey]
    actions: tuple[str, ...] = (SEARCH,)


def share_resolve(*, project: Project, key_ids: Sequence[str], actions: Sequence[str] = (SEARCH,)) -> Share:
    """The keys named by id; ids that are not keys of ``project`` -> VALIDATION_ERROR naming
    them (a key of another project answers like one that does not exist)."""
    validate_grants([{"pattern": "share", "actions": list(actions)}])
    wanted = list(dict.fromkeys(key_ids))
    keys = {k.pk: k for k in ApiKey.objects.filter(project=project, pk__in=wanted)}
    if missing := [i for i in wanted if i not in keys]:
        raise ValidationFailed(f"Not keys of your project: {', '.join(missing)}.",
                               details={"field": "share.keys", "keys": missing})
    return Share(keys=[keys[i] for i in wanted], actions=tuple(actions))


@transaction.atomic
def access_tags_write(*, obj: Document | MemoryStore, owner: str | None, share: Share | None = None) -> None:
    """Tag a new document or store: the creator's owner tag ``owner:<owner>`` (a key id, or
    ``user:<pk>`` for a staff user with grants, :attr:`Principal.owner`; None: none)
    and, with ``share``, ``share:<object id>`` granted to each shared key that has grants (a key
    without grants already reaches the whole project; a grant would restrict it). One transaction."""
    tags = list(obj.access_tags)
    if owner is not None:
        tags.append(owner_tag(owner))
    if share is not None and share.keys:
        tag = share_tag(obj.pk)
        tags.append(tag)
        for key in ApiKey.objects.select_for_update().filter(pk__in=[k.pk for k in share.keys]):
            if key.grants:
                key.grants = validate_grants([*key.grants, {"pattern": tag, "actions": list(share.actions)}])
                key.save(update_fields=["grants"])
    tags = list(dict.fromkeys(tags))
    if tags != obj.access_tags:
        obj.access_tags = tags
        # by its project too: one node's statement on a distributed PostgreSQL (docs/scaling.md)
        type(obj).objects.filter(project_id=obj.project_id, pk=obj.pk).update(access_tags=tags)
