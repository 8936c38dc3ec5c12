"""The caller's project and principal, resolved once per request, and the one way a view
fetches a row of that project by id."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import django_filters
from django.core.exceptions import ValidationError
from django.db import DatabaseError
from django.db.models import Model, QuerySet
from rest_framework.parsers import MultiPartParser

from memory_engine import replicas
from memory_engine.exceptions import NotFound, ProjectNotFound, ProjectRequired, UnknownScope, ValidationFailed
from memory_engine.models import ApiKey, MemoryStore, Project
from memory_engine.policy import (
    SEARCH,
    SYSTEM,
    Principal,
    get_visible_or_404,
    key_principal,
    lookup_action,
    require_unrestricted,
    user_principal,
    visible,
)
from memory_engine.replicas import replica_aliases

from .limits import FormBodyParser, SafeJSONParser, check_request_size

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


def request_caller(request: Any) -> Principal:
    """The caller as the access policy sees it (memory_engine.policy), built once per request:
    the API key, or the session's staff user."""
    if "_memory_engine_caller" not in request.__dict__:
        request.__dict__["_memory_engine_caller"] = (
            key_principal(request.auth) if isinstance(request.auth, ApiKey) else user_principal(request.user))
    return request.__dict__["_memory_engine_caller"]


def request_principal(request: Any) -> str:
    """Recorded on every assertion: the key or the user that made the call."""
    return request_caller(request).label


def request_key(request: Any) -> ApiKey | None:
    """The API key of the call; None for a staff session."""
    return request.auth if isinstance(request.auth, ApiKey) else None


def project_object_or_404(queryset: QuerySet[M], pk: Any, *, error: type[NotFound] = NotFound,
                          field: str = "id") -> M:
    """The row ``pk`` of a queryset already limited to the caller's project, else a 404.

    An id of another project answers exactly like an id that never existed. A specific
    ``error`` (``AgentNotFound``, ...) names the kind of row in its message and echoes the
    id under ``details[field]``; the default is the plain ``NOT_FOUND``. For rows grants cover,
    views use :func:`memory_engine.policy.get_visible_or_404` with the caller instead.
    """
    return get_visible_or_404(SYSTEM, queryset, pk, action=None, error=error, field=field)


def referenced_store(caller: Principal, project: Project, store_id: Any, *, action: str | None = None,
                     field: str = "memory_store_id") -> MemoryStore:
    """The store a body or query parameter names (a write's target, a distiller's store, the memory
    map's), else ``400 UNKNOWN_SCOPE`` naming it under ``details[field]``, as a search scope or a
    list filter answers: an id a request *refers to* is 400 wherever it is sent; only an id in the
    path (``/memory-stores/{id}/…``) is 404. A store of another project or outside the caller's
    grants answers the same (docs/memory.md, *An unknown store*)."""
    try:
        return get_visible_or_404(caller, MemoryStore.objects.filter(project=project), store_id, action=action)
    except NotFound:
        raise UnknownScope(f"Not found in your project: {store_id}.", details={field: [store_id]}) from None


class NonBlankFilter(django_filters.CharFilter):
    """A list filter that, when sent, must hold a value: ``?memory_store_id=`` or ``?name=`` with
    nothing after it (an unset shell variable) answers ``400 VALIDATION_ERROR`` naming the
    parameter, never the unfiltered list. ``param``: the query parameter (default: the field)."""

    def __init__(self, *, param: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.query_param = param

    @property
    def param(self) -> str:
        return self.query_param or self.field_name  # the FilterSet names the field after its attribute

    def filter(self, qs: QuerySet[Any], value: Any) -> QuerySet[Any]:
        if value in (None, ""):
            if self.param in self.parent.data:
                raise ValidationFailed(f"`{self.param}` is blank; name a value, or leave the parameter out.",
                                       details={"fields": {self.param: ["This parameter may not be blank."]}})
            return qs
        return self.filter_value(qs, value)

    def filter_value(self, qs: QuerySet[Any], value: Any) -> QuerySet[Any]:
        return super().filter(qs, value)


class ScopeIdFilter(NonBlankFilter):
    """A list filter naming one row by id (``?memory_store_id=``, ``?agent_id=``, ...): an id that
    names no row the caller may see answers ``400 UNKNOWN_SCOPE`` naming it, as a search scope
    does, instead of an empty page (another project's or another team's id answers the same); the
    parameter sent blank answers ``400 VALIDATION_ERROR`` naming it, never the unfiltered list."""

    def __init__(self, *, param: str, model: type[Model], project_path: str = "project",
                 match: Callable[[QuerySet[Any], Any], QuerySet[Any]] | None = None, **kwargs: Any) -> None:
        self.scope_model, self.project_path, self.match = model, project_path, match
        super().__init__(param=param, **kwargs)

    def known(self, request: Any, value: Any) -> bool:
        """Whether ``value`` names a row of the caller's project it may see."""
        rows = self.scope_model._default_manager.filter(**{self.project_path: request_project(request)})
        return visible(request_caller(request), rows).filter(pk=value).exists()

    def filter_value(self, qs: QuerySet[Any], value: Any) -> QuerySet[Any]:
        try:
            found = self.known(self.parent.request, value)
        except (TypeError, ValueError, ValidationError):
            found = False
        if not found:
            raise UnknownScope(f"Not found in your project: {value}.", details={self.param: [value]})
        return self.match(qs, value) if self.match is not None else super().filter_value(qs, value)


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
    parser_classes = [SafeJSONParser, FormBodyParser, MultiPartParser]
    #: Model permissions a staff session needs when the HTTP method on the view's model does
    #: not say it (memory_engine.api.permissions); settable per action with @action(...).
    session_permissions: list[str] | None = None
    #: The 404 of a detail route for an id not in the caller's project (see project_object_or_404).
    not_found_error: type[NotFound] = NotFound
    not_found_field = "id"

    #: Project-wide configuration (ingestion rules, transform configs, replay runs, the memory
    #: schema, webhooks): it reaches every team's rows, so a caller narrowed by grants may not
    #: change it (memory_engine.policy.require_unrestricted).
    project_wide_writes = False

    #: Whether the reads of a request that only reads (safe methods, and POSTs that set
    #: ``read_only_key_allowed``) may run on a read replica (memory_engine.replicas); False for a
    #: view whose read may also write (find-or-create).
    replica_reads = True
    #: A replica is used for this view's search only when its lexical channel answers there.
    replica_search = False

    def initial(self, request: Any, *args: Any, **kwargs: Any) -> None:
        check_request_size(request)  # before authentication reads anything, and before parsing
        super().initial(request, *args, **kwargs)
        if self.project_wide_writes and request.method not in ("GET", "HEAD", "OPTIONS"):
            require_unrestricted(self.caller)
        # After authentication (a key made a moment ago is read on the primary).
        if replica_aliases() and self.replica_reads and self._only_reads(request):
            self._replica = replicas.reads_from_replica(self.caller.label, search=self.replica_search)
            self._replica.__enter__()

    def _only_reads(self, request: Any) -> bool:
        return request.method in ("GET", "HEAD", "OPTIONS") or bool(getattr(self, "read_only_key_allowed", False))

    def handle_exception(self, exc: Exception) -> Any:
        # A replica that failed mid-request: the same read again on the primary, no 5xx.
        if isinstance(exc, DatabaseError) and replicas.reading_replica():
            replicas.mark_down(replicas.current_read_alias(), exc)
            replicas.use_primary()
            handler = getattr(self, self.request.method.lower(), None)
            if handler is not None:
                return handler(self.request, *self.args, **self.kwargs)
        return super().handle_exception(exc)

    def finalize_response(self, request: Any, response: Any, *args: Any, **kwargs: Any) -> Any:
        replica = self.__dict__.pop("_replica", None)
        if replica is not None:
            replica.__exit__(None, None, None)
        elif replica_aliases() and not self._only_reads(request) and getattr(response, "status_code", 500) < 400:
            replicas.note_write(self.caller.label)  # its next reads wait for a replica that has this
        return super().finalize_response(request, response, *args, **kwargs)

    @property
    def project(self) -> Project:
        return request_project(self.request)

    @property
    def principal(self) -> str:
        return request_principal(self.request)

    @property
    def caller(self) -> Principal:
        return request_caller(self.request)

    @property
    def detail_action(self) -> str | None:
        """The action a row lookup filters by (memory_engine.policy.lookup_action): ``search`` for
        reads, including POSTs that only read (``read_only_key_allowed``); any action for writes,
        so a row the caller sees but may not change answers 403 GRANT_REQUIRED, not 404."""
        if getattr(self, "read_only_key_allowed", False):
            return SEARCH
        return lookup_action(self.request.method)

    def get_object(self) -> Any:
        """DRF's get_object, through :func:`project_object_or_404` (get_queryset is project-scoped)."""
        queryset = self.filter_queryset(self.get_queryset())
        lookup = self.lookup_url_kwarg or self.lookup_field
        row = project_object_or_404(queryset, self.kwargs[lookup],
                                    error=self.not_found_error, field=self.not_found_field)
        self.check_object_permissions(self.request, row)
        return row
