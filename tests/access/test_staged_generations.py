"""Who may use staged generations (generation search, promote, demote): the policy's one check,
``memory_engine.policy.require_generation_access``, for every kind of principal. The REST doors
(tests/documents/test_replay.py) and the access matrix (tests/hardening) ask it."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser, Permission, User

from memory_engine.exceptions import StagedGenerationForbidden
from memory_engine.policy import (
    GENERATION_PERMISSION,
    Principal,
    key_principal,
    require_generation_access,
    system_principal,
    user_principal,
)
from memory_engine.services.keys import api_key_create

pytestmark = pytest.mark.django_db


def user(project: Any, username: str, *, staff: bool = True, superuser: bool = False,
         permissions: tuple[str, ...] = ()) -> Principal:
    if superuser:
        row = User.objects.create_superuser(username, f"{username}@example.com", "pw")
    else:
        row = User.objects.create_user(username, f"{username}@example.com", "pw", is_staff=staff)
        row.user_permissions.set(Permission.objects.filter(content_type__app_label="memory_engine",
                                                           codename__in=permissions))
    project.members.add(row)
    return user_principal(User.objects.get(pk=row.pk))  # fresh: Django caches permissions per instance


def answer(principal: Principal, permission: str | None) -> tuple[int, str, dict[str, Any]] | None:
    """None when allowed, else the refusal's status, code and details."""
    try:
        require_generation_access(principal, permission)
    except StagedGenerationForbidden as refused:
        return refused.status_code, refused.code, refused.details
    return None


def test_keys_and_users_without_staff_are_refused_whatever_the_permission(project: Any) -> None:
    key, _ = api_key_create(project=project)
    read_only, _ = api_key_create(project=project, read_only=True)
    granted, _ = api_key_create(project=project, grants=[{"pattern": "*", "actions": ["search", "add"]}])
    refused = (403, "STAGED_GENERATION_FORBIDDEN", {})
    for principal in (key_principal(key), key_principal(read_only), key_principal(granted),
                      user(project, "member", staff=False, permissions=("change_replayrun",)),
                      user_principal(AnonymousUser())):
        for permission in (None, GENERATION_PERMISSION):
            assert answer(principal, permission) == refused, (principal.label, permission)


def test_staff_need_the_permission_asked_for_and_superusers_and_the_system_have_it(project: Any) -> None:
    viewer = user(project, "viewer", permissions=("view_replayrun",))
    operator = user(project, "operator", permissions=("view_replayrun", "change_replayrun"))
    assert answer(viewer, None) is None  # searching a generation asks no model permission
    assert answer(viewer, GENERATION_PERMISSION) == (
        403, "STAGED_GENERATION_FORBIDDEN", {"missing": ["memory_engine.change_replayrun"]})
    for principal in (operator, user(project, "root", superuser=True), system_principal("test")):
        assert answer(principal, None) is None, principal.label
        assert answer(principal, GENERATION_PERMISSION) is None, principal.label
