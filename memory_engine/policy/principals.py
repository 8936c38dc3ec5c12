"""Who acts: an API key (with or without grants, read-only or not), a staff user (Django model
permissions, staff grants), a superuser, or the system (sweeps, formation, management commands).

A :class:`Principal` is built once per call (request, MCP connection, rule firing, webhook
delivery, admin page) and handed to :mod:`memory_engine.policy`, which answers what it may see
and do. Its :attr:`~Principal.label` is what the ledger records; its
:attr:`~Principal.reference` is what a stored rule or subscription keeps to act as it again
(:func:`principal_from_reference`, checked anew at every firing).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from memory_engine.db import across_projects
from memory_engine.exceptions import PrincipalInactive
from memory_engine.grants import Grants
from memory_engine.models import ApiKey, Project, StaffGrants

__all__ = ["SYSTEM", "Principal", "PrincipalKind", "key_principal", "principal_from_reference",
           "system_principal", "user_principal"]


class PrincipalKind(StrEnum):
    KEY = "key"
    USER = "user"
    SYSTEM = "system"


@dataclass(frozen=True, eq=False)
class Principal:
    """One caller, as the policy sees it."""

    kind: PrincipalKind
    #: Recorded on assertions, receipts and captures: ``key:<id>``, ``user:<username>``, ``system:<name>``.
    label: str
    #: Kept by rules and subscriptions to act as this principal again: ``key:<id>``, ``user:<pk>``,
    #: ``system:<name>``.
    reference: str
    #: None: not narrowed inside its projects (a key or staff user without grants, a superuser, the system).
    grants: Grants | None = None
    read_only: bool = False
    user: Any = None
    key: ApiKey | None = None
    #: The projects it acts in (None: every project).
    project_ids: frozenset[str] | None = None
    #: Per-call caches of the policy (the tags an action reaches, the projects' tag catalogue).
    cache: dict[Any, Any] = field(default_factory=dict, repr=False)

    @property
    def restricted(self) -> bool:
        """Narrowed by grants inside its projects."""
        return self.grants is not None

    @property
    def superuser(self) -> bool:
        return self.kind == PrincipalKind.SYSTEM or bool(self.user is not None and self.user.is_superuser)

    @property
    def owner(self) -> str | None:
        """The owner id a new document or store is tagged with (``owner:<owner>``): a key's id; a
        staff user's ``user:<pk>`` when the user has grants (without grants a session writes none)."""
        if self.kind == PrincipalKind.KEY and self.key is not None:
            return str(self.key.pk)
        return self.grants.owner if self.grants is not None else None

    def has_perm(self, permission: str) -> bool:
        """A Django model permission (``memory_engine.view_memory``): keys and the system need none
        (a key's scope is its read-only flag and its grants); staff users need theirs."""
        if self.kind != PrincipalKind.USER:
            return True
        return bool(self.user.has_perm(permission if "." in permission else f"memory_engine.{permission}"))

    def in_project(self, project_id: str) -> bool:
        return self.project_ids is None or project_id in self.project_ids


def key_principal(key: ApiKey) -> Principal:
    grants = Grants.of(str(key.pk), key.grants)
    return Principal(kind=PrincipalKind.KEY, label=f"key:{key.pk}", reference=f"key:{key.pk}",
                     grants=grants if grants.restricted else None, read_only=bool(key.read_only), key=key,
                     project_ids=frozenset({key.project_id}))


def user_principal(user: Any) -> Principal:
    """A staff user (or superuser) of the admin or a session call; anonymous users reach nothing."""
    if not getattr(user, "is_authenticated", False):
        return Principal(kind=PrincipalKind.USER, label="user:anonymous", reference="user:anonymous",
                         user=user, project_ids=frozenset(), read_only=True)
    grants = None
    projects = None
    if not user.is_superuser:
        row = StaffGrants.objects.filter(user=user).values_list("grants", flat=True).first()
        parsed = Grants.of(f"user:{user.pk}", row or [])
        grants = parsed if parsed.restricted else None
        with across_projects():  # the user's memberships, wherever their projects are
            projects = frozenset(Project.objects.filter(members=user).values_list("pk", flat=True))
    return Principal(kind=PrincipalKind.USER, label=f"user:{user.get_username()}", reference=f"user:{user.pk}",
                     grants=grants, user=user, project_ids=projects)


def system_principal(name: str) -> Principal:
    """The engine itself (a sweep, formation, a management command): every project, no grants."""
    return Principal(kind=PrincipalKind.SYSTEM, label=f"system:{name}", reference=f"system:{name}")


SYSTEM = system_principal("engine")


def principal_from_reference(reference: str, *, project_id: str) -> Principal:
    """The principal a stored rule or subscription acts as, as it is now: PRINCIPAL_INACTIVE when
    its key was revoked or deleted, its user deactivated, deleted, no longer staff or no longer a
    member of ``project_id``. An empty reference (rows older than the policy) acts as the system."""
    kind, _, value = (reference or "").partition(":")
    if not reference or kind == PrincipalKind.SYSTEM:
        return system_principal(value or "engine")
    if kind == PrincipalKind.KEY:
        key = ApiKey.objects.select_related("project").filter(pk=value, project_id=project_id).first()
        if key is None or not key.is_active:
            raise PrincipalInactive(details={"principal": reference})
        return key_principal(key)
    if kind == PrincipalKind.USER:
        from django.contrib.auth import get_user_model

        user = get_user_model().objects.filter(pk=value).first() if value.isdigit() else None
        if user is None or not user.is_active or not (user.is_staff or user.is_superuser):
            raise PrincipalInactive(details={"principal": reference})
        principal = user_principal(user)
        if not principal.in_project(project_id):
            raise PrincipalInactive(details={"principal": reference})
        return principal
    raise PrincipalInactive(details={"principal": reference})
