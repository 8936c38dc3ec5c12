"""The caller's project and principal, resolved once per request, and the one way a view
fetches a row of that project by id."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from django.core.exceptions import ValidationError
from django.db.models import Model, QuerySet
from rest_framework.parsers import FormParser, MultiPartParser

from memory_engine.access import Grants
from memory_engine.exceptions import GrantRequired, NotFound, ProjectNotFound, ProjectRequired
from memory_engine.models import ApiKey, Project
from memory_engine.selectors.access import grant_tags, key_grants, user_grants

from .limits import SafeJSONParser, check_request_size

M = TypeVar("M", bound=Model)


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
        found = projects.filter(pk=project_id).first()
        if found is None:
            raise ProjectNotFound("No such project.")
        project = found
    request._memory_engine_project = project
    return project


def request_principal(request: Any) -> str:
    """Recorded on every assertion: the key or the user that made the call."""
    if isinstance(request.auth, ApiKey):
        return f"key:{request.auth.pk}"
    return f"user:{request.user.get_username()}"


def request_key(request: Any) -> ApiKey | None:
    """The API key of the call; None for a staff session."""
    return request.auth if isinstance(request.auth, ApiKey) else None


def lookup_action(request: Any) -> str | None:
    """The action a detail lookup filters by: ``search`` for reads; for writes any granted action,
    so an object the key may see but not change answers 403 GRANT_REQUIRED, not 404."""
    return "search" if request.method in ("GET", "HEAD", "OPTIONS") else None


def request_grants(request: Any) -> Grants | None:
    """The caller's grants when it has any: an API key's, or a staff session user's
    (:class:`~memory_engine.models.StaffGrants`); None: the whole project (no grants, a superuser)."""
    if "_memory_engine_grants" not in request.__dict__:
        request.__dict__["_memory_engine_grants"] = (
            key_grants(request.auth) if isinstance(request.auth, ApiKey) else user_grants(request.user))
    return request.__dict__["_memory_engine_grants"]


def request_owner(request: Any) -> str | None:
    """Whose owner tag a new document or store gets: the key's; a staff user's only when the user
    has grants (without, a session writes none, as before grants existed)."""
    if isinstance(request.auth, ApiKey):
        return str(request.auth.pk)
    grants = request_grants(request)
    return grants.key_id if grants is not None else None


def access_tags(request: Any, action: str | None) -> list[str] | None:
    """The grant tags ``action`` reaches for this request (None: any action), computed once per
    request; None when the caller is not restricted."""
    grants = request_grants(request)
    if grants is None:
        return None
    cache = request.__dict__.setdefault("_memory_engine_access", {})
    if action not in cache:
        cache[action] = grant_tags(grants, action, request_project(request))
    return cache[action]


def key_access_tags(key: ApiKey, action: str | None) -> list[str] | None:
    """As :func:`access_tags`, for a key outside a request (the MCP server)."""
    grants = key_grants(key)
    return None if grants is None else grant_tags(grants, action, key.project)


def visible(queryset: QuerySet[M], request: Any, action: str | None = "search", *,
            field: str = "access_tags") -> QuerySet[M]:
    """``queryset`` less the rows the caller's grants do not reach for ``action`` (filtered in SQL)."""
    tags = access_tags(request, action)
    return queryset if tags is None else queryset.filter(**{f"{field}__overlap": tags})


def require_grant(request: Any, action: str, object_tags: list[str]) -> None:
    """403 GRANT_REQUIRED when the caller's grants (a key's or a staff user's) lack ``action`` on
    an object it can see."""
    grants = request_grants(request)
    if grants is not None and not grants.allows(action, object_tags):
        raise GrantRequired(details={"action": action})


def project_object_or_404(queryset: QuerySet[M], pk: Any, *, error: type[NotFound] = NotFound,
                          field: str = "id") -> M:
    """The row ``pk`` of a queryset already limited to the caller's project, else a 404.

    An id of another project answers exactly like an id that never existed. A specific
    ``error`` (``AgentNotFound``, ...) names the kind of row in its message and echoes the
    id under ``details[field]``; the default is the plain ``NOT_FOUND``.
    """
    try:
        row = queryset.filter(pk=pk).first()
    except (TypeError, ValueError, ValidationError):  # an id no row can have (e.g. a NUL in it)
        row = None
    if row is not None:
        return row
    if error is NotFound:
        raise NotFound()
    raise error(details={field: pk})


if TYPE_CHECKING:
    # The mixin goes before a DRF view class and calls its methods; type checkers see that base.
    from rest_framework.generics import GenericAPIView

    _ViewBase = GenericAPIView
else:
    _ViewBase = object


class ProjectScopedMixin(_ViewBase):
    """Viewset mixin: ``self.project`` and ``self.principal`` from the request; request
    size and JSON depth limits (memory_engine.api.limits) for every API view."""

    request: Any
    parser_classes = [SafeJSONParser, FormParser, MultiPartParser]
    #: Model permissions a staff session needs when the HTTP method on the view's model does
    #: not say it (memory_engine.api.permissions); settable per action with @action(...).
    session_permissions: list[str] | None = None
    #: The 404 of a detail route for an id not in the caller's project (see project_object_or_404).
    not_found_error: type[NotFound] = NotFound
    not_found_field = "id"

    def initial(self, request: Any, *args: Any, **kwargs: Any) -> None:
        check_request_size(request)  # before authentication reads anything, and before parsing
        super().initial(request, *args, **kwargs)

    @property
    def project(self) -> Project:
        return request_project(self.request)

    @property
    def principal(self) -> str:
        return request_principal(self.request)

    def get_object(self) -> Any:
        """DRF's get_object, through :func:`project_object_or_404` (get_queryset is project-scoped)."""
        queryset = self.filter_queryset(self.get_queryset())
        lookup = self.lookup_url_kwarg or self.lookup_field
        row = project_object_or_404(queryset, self.kwargs[lookup],
                                    error=self.not_found_error, field=self.not_found_field)
        self.check_object_permissions(self.request, row)
        return row
