"""Who may call what.

* An API key is a tenant: it reaches its own project; a read-only key only reads (views
  that merely read through a POST set ``read_only_key_allowed``).
* A staff session is a project operator: it reaches the projects it is a member of
  (:func:`memory_engine.api.scoping.request_project`) with Django's model permissions,
  exactly as in the admin. The permission comes from the HTTP method on the view's model
  (GET view, POST add, PUT/PATCH change, DELETE delete; a POST that only reads needs view);
  a view or action that does something else names its permissions in ``session_permissions``.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from rest_framework import permissions

from memory_engine.exceptions import ModelPermissionRequired, ReadOnlyKey
from memory_engine.models import ApiKey

#: The model permission each HTTP method needs (Django's codename prefixes).
METHOD_PERMISSIONS = {"GET": "view", "HEAD": "view", "OPTIONS": "view", "POST": "add", "PUT": "change",
                      "PATCH": "change", "DELETE": "delete"}


def session_permissions(request: Any, view: Any) -> list[str]:
    """The ``app_label.codename`` permissions a staff session needs for this request."""
    explicit = getattr(view, "session_permissions", None)
    if explicit is not None:
        return [p if "." in p else f"memory_engine.{p}" for p in explicit]
    model = getattr(getattr(view, "queryset", None), "model", None)
    if model is None:
        if request.method in permissions.SAFE_METHODS:
            return []  # e.g. the API root: links, no rows
        # Fail closed: a writing view the mapping does not cover is a programming error.
        raise ImproperlyConfigured(f"{view.__class__.__name__} needs a queryset or session_permissions.")
    if getattr(view, "read_only_key_allowed", False):
        action = "view"
    else:
        action = METHOD_PERMISSIONS.get(request.method or "", "change")
    return [f"{model._meta.app_label}.{action}_{model._meta.model_name}"]


class ProjectAccess(permissions.BasePermission):
    """Keys by their scope (read-only or read-write); staff sessions by model permission."""

    def has_permission(self, request: Any, view: Any) -> bool:
        if isinstance(request.auth, ApiKey):
            if request.auth.read_only and request.method not in permissions.SAFE_METHODS and not getattr(
                view, "read_only_key_allowed", False
            ):
                raise ReadOnlyKey()
            return True
        user = request.user
        if not (user and user.is_authenticated and user.is_staff):
            return False
        required = session_permissions(request, view)
        missing = [p for p in required if not user.has_perm(p)]
        if missing:
            raise ModelPermissionRequired(details={"missing": missing})
        return True


def require_write_access(request: Any, permission: str) -> None:
    """For a safe-method view that may write (find-or-create): a read-only key cannot
    (READ_ONLY_KEY), a staff session needs ``permission`` (MODEL_PERMISSION_REQUIRED)."""
    if isinstance(request.auth, ApiKey):
        if request.auth.read_only:
            raise ReadOnlyKey()
    elif not request.user.has_perm(permission):
        raise ModelPermissionRequired(details={"missing": [permission]})
