"""API key services: create (the raw key is returned once), revoke."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from memory_engine.grants import validate_grants
from memory_engine.models import ApiKey, Project
from memory_engine.models.tenancy import hash_key


@transaction.atomic
def api_key_create(*, project: Project, name: str = "", read_only: bool = False,
                   expires_at: datetime | None = None, grants: Any = None) -> tuple[ApiKey, str]:
    """Create a key and return it with its raw secret (never stored, never shown again).
    ``grants`` (docs/security.md, *Access inside a project*): empty reaches the whole project."""
    prefix, raw = ApiKey.generate()
    key = ApiKey.objects.create(
        project=project, name=name, prefix=prefix, hashed_key=hash_key(raw), read_only=read_only,
        expires_at=expires_at, grants=validate_grants(grants),
    )
    return key, raw


def api_key_grants_set(*, key: ApiKey, grants: Any) -> ApiKey:
    """Replace the key's grants (validated; VALIDATION_ERROR for a bad one). Empty: the whole project."""
    key.grants = validate_grants(grants)
    key.save(update_fields=["grants"])
    return key


def api_key_revoke(*, key: ApiKey) -> ApiKey:
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
    return key
