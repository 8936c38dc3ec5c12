"""API key services: create (the raw key is returned once), revoke, and the key of a secret."""

from __future__ import annotations

import hmac
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from memory_engine.exceptions import AuthenticationFailed
from memory_engine.grants import validate_grants
from memory_engine.models import ApiKey, Project
from memory_engine.models.tenancy import KEY_PREFIX, hash_key


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


def api_key_authenticate(raw: str) -> ApiKey:
    """The active key whose secret is ``raw`` (``me_…``), else 401 AUTHENTICATION_FAILED; notes the
    key's use. The one key check of the Bearer authentication and the MCP server."""
    parts = raw.split("_", 2)
    if len(parts) != 3 or parts[0] != KEY_PREFIX:
        raise AuthenticationFailed("Invalid API key.")
    key = ApiKey.objects.select_related("project").filter(prefix=parts[1]).first()
    # Hash even when the prefix is unknown, so timing does not reveal which prefixes exist.
    digest = hash_key(raw)
    if key is None or not hmac.compare_digest(key.hashed_key, digest):
        raise AuthenticationFailed("Invalid API key.")
    if not key.is_active:
        raise AuthenticationFailed("This API key is revoked or expired.")
    now = timezone.now()
    if key.last_used_at is None or (now - key.last_used_at).total_seconds() > 60:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
    return key
