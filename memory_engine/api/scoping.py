"""The caller's project and principal, resolved once per request."""

from __future__ import annotations

from typing import Any

from rest_framework.parsers import FormParser, MultiPartParser

from memory_engine.exceptions import NotFound, ProjectRequired
from memory_engine.models import ApiKey, Project

from .limits import SafeJSONParser, check_request_size


def request_project(request: Any) -> Project:
    """The key's project; for staff sessions the project named by X-Project-Id / ?project_id=."""
    cached = getattr(request, "_memory_engine_project", None)
    if cached is not None:
        return cached
    if isinstance(request.auth, ApiKey):
        project = request.auth.project
    else:
        project_id = request.headers.get("X-Project-Id") or request.query_params.get("project_id")
        if not project_id:
            raise ProjectRequired()
        projects = Project.objects.all()
        if not request.user.is_superuser:
            projects = projects.filter(members=request.user)
        project = projects.filter(pk=project_id).first()
        if project is None:
            raise NotFound("No such project.", code="PROJECT_NOT_FOUND")
    request._memory_engine_project = project
    return project


def request_principal(request: Any) -> str:
    """Recorded on every assertion: the key or the user that made the call."""
    if isinstance(request.auth, ApiKey):
        return f"key:{request.auth.pk}"
    return f"user:{request.user.get_username()}"


class ProjectScopedMixin:
    """Viewset mixin: ``self.project`` and ``self.principal`` from the request; request
    size and JSON depth limits (memory_engine.api.limits) for every API view."""

    request: Any
    parser_classes = [SafeJSONParser, FormParser, MultiPartParser]
    #: Model permissions a staff session needs when the HTTP method on the view's model does
    #: not say it (memory_engine.api.permissions); settable per action with @action(...).
    session_permissions: list[str] | None = None

    def initial(self, request: Any, *args: Any, **kwargs: Any) -> None:
        check_request_size(request)  # before authentication reads anything, and before parsing
        super().initial(request, *args, **kwargs)  # type: ignore[misc]

    @property
    def project(self) -> Project:
        return request_project(self.request)

    @property
    def principal(self) -> str:
        return request_principal(self.request)
