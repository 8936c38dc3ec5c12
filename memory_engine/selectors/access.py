"""Whose grants narrow a call (docs/security.md, *Access inside a project*): an API key's or a
staff user's, and the concrete grant tags an action reaches in a set of projects."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import F, Func

from memory_engine.access import Grants
from memory_engine.models import ApiKey, Document, MemoryStore, Project, StaffGrants


def user_principal_id(user: Any) -> str:
    """What a staff user's owner tag names: ``owner:user:<pk>``."""
    return f"user:{user.pk}"


def key_grants(key: ApiKey) -> Grants | None:
    """The key's grants; None when it has none (it reaches the whole project)."""
    grants = Grants.of(key.pk, key.grants)
    return grants if grants.restricted else None


def user_grants(user: Any) -> Grants | None:
    """The staff user's grants; None for a superuser, an anonymous user, or a user without
    grants (the whole of their projects, as before grants existed)."""
    if not getattr(user, "is_authenticated", False) or user.is_superuser:
        return None
    row = StaffGrants.objects.filter(user=user).values_list("grants", flat=True).first()
    if not row:
        return None
    grants = Grants.of(user_principal_id(user), row)
    return grants if grants.restricted else None


def grant_tags(grants: Grants, action: str | None, projects: Iterable[Project] | Any) -> list[str]:
    """The tags ``action`` reaches (None: any action): wildcard patterns are matched against the
    tags the documents and stores of ``projects`` (a project, or a queryset of them) carry."""
    catalogue: set[str] = set()
    if grants.needs_catalogue(action):
        where: dict[str, Any] = {"project": projects} if isinstance(projects, Project) else {"project__in": projects}
        for model in (Document, MemoryStore):
            catalogue.update(model.objects.filter(**where).values_list(
                Func(F("access_tags"), function="unnest"), flat=True).distinct())
    return grants.tags(action, catalogue)
