"""Who may call what: an authenticated key or staff session; read-only keys only read."""

from __future__ import annotations

from typing import Any

from rest_framework import permissions

from memory_engine.exceptions import ReadOnlyKey
from memory_engine.models import ApiKey


class ProjectAccess(permissions.BasePermission):
    def has_permission(self, request: Any, view: Any) -> bool:
        if isinstance(request.auth, ApiKey):
            if request.auth.read_only and request.method not in permissions.SAFE_METHODS and not getattr(
                view, "read_only_key_allowed", False
            ):
                raise ReadOnlyKey()
            return True
        user = request.user
        return bool(user and user.is_authenticated and user.is_staff)
