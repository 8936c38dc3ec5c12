"""Project scoping for the operator console, implemented once.

Superusers see every project. Any other staff user sees only the projects they are a
member of (``Project.members``): changelists, detail pages, autocomplete, the choices
of foreign keys and list filters, and the custom console views all go through
:func:`visible_projects` / :class:`ProjectScopedAdmin`. Inside those projects a staff user
with grants (:class:`~memory_engine.models.StaffGrants`) sees only the documents, stores and
memories a ``search`` grant reaches, and changes them only with the action's grant
(:func:`require_admin_grant`; docs/security.md, *Access inside a project*).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import Model, QuerySet
from django.http import Http404, HttpRequest

from memory_engine.access import SEARCH
from memory_engine.models import (
    Agent,
    Document,
    Generation,
    IngestionRule,
    MemoryRule,
    MemoryStore,
    Project,
    TransformConfig,
)
from memory_engine.selectors.access import grant_tags, user_grants, user_principal_id

#: How each related model reaches its project (used to limit foreign-key choices).
PROJECT_PATHS: dict[type[Model], str] = {
    Project: "pk",
    MemoryStore: "project",
    Agent: "project",
    Document: "project",
    IngestionRule: "project",
    Generation: "project",
    TransformConfig: "project",
    MemoryRule: "store__project",
}


def visible_projects(request: HttpRequest) -> QuerySet[Project]:
    """The projects this admin user may see: all for a superuser, else their memberships."""
    projects = Project.objects.order_by("name")
    user = request.user
    if not user.is_authenticated:  # the admin lets no anonymous user in; nothing for them
        return projects.none()
    if user.is_superuser:
        return projects
    return projects.filter(members=user)


def scope_queryset(request: HttpRequest, queryset: QuerySet[Any], project_path: str) -> QuerySet[Any]:
    """Limit a queryset to the visible projects through ``project_path`` (e.g. ``store__project``)."""
    if request.user.is_superuser:
        return queryset
    return queryset.filter(**{f"{project_path}__in": visible_projects(request)}).distinct()


def scoped_project_or_404(request: HttpRequest, project_id: str) -> Project:
    """A project for a custom view: 404 when it does not exist or is not visible."""
    project = visible_projects(request).filter(pk=project_id).first()
    if project is None:
        raise Http404("No such project.")
    return project


def admin_access_tags(request: HttpRequest, action: str | None = SEARCH) -> list[str] | None:
    """The grant tags ``action`` reaches in the user's projects; None for a user without grants
    (and a superuser): the whole projects. Computed once per request."""
    cache = request.__dict__.setdefault("_memory_engine_admin_access", {})
    if action not in cache:
        grants = user_grants(request.user)
        cache[action] = None if grants is None else grant_tags(grants, action, visible_projects(request))
    return cache[action]


def admin_owner(request: HttpRequest) -> str | None:
    """The owner a document or store created here is tagged with: a user with grants only (a
    user without grants writes none, as before grants existed)."""
    return user_principal_id(request.user) if user_grants(request.user) is not None else None


def object_access_tags(obj: Any, path: str) -> list[str]:
    """The grant tags of ``obj`` through ``path`` (``access_tags``, ``store__access_tags``)."""
    value = obj
    for part in path.split("__"):
        value = getattr(value, part)
    return list(value)


def require_admin_grant(request: HttpRequest, action: str, objs: Any, path: str = "access_tags") -> None:
    """403 (PermissionDenied) unless the user's grants allow ``action`` on every one of ``objs``:
    an action on a selection runs on all of it or on none."""
    grants = user_grants(request.user)
    if grants is not None and not all(grants.allows(action, object_access_tags(o, path)) for o in objs):
        raise PermissionDenied


def require_perm(request: HttpRequest, *perms: str) -> None:
    """Custom views check the same Django model permissions as the changelists."""
    if not request.user.has_perms([f"memory_engine.{p}" for p in perms]):
        raise PermissionDenied


class TrustedForm(forms.ModelForm):
    """A form that names code (rule handlers, converters): what it may name depends on who saves it."""

    #: Set per request by ProjectScopedAdmin.get_form: superusers only.
    trusted = False


class ProjectScopedAdmin(admin.ModelAdmin):
    """A ModelAdmin whose rows, choices and filters are limited to the user's projects.

    Set ``project_path`` to the lookup from the model to its Project.
    """

    project_path = "project"
    #: The lookup to the grant tags of a row (``access_tags``, ``store__access_tags``); None: a
    #: model grants do not cover.
    access_tags_path: str | None = None

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change=change, **kwargs)
        if issubclass(form, TrustedForm):
            # Forms that name code (rule handlers, converters) trust only superusers; other staff
            # go through the same allow-lists as API keys (memory_engine.guards).
            form.trusted = bool(request.user.is_superuser)
        return form

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = scope_queryset(request, super().get_queryset(request), self.project_path)
        tags = admin_access_tags(request) if self.access_tags_path else None
        return queryset if tags is None else queryset.filter(**{f"{self.access_tags_path}__overlap": tags})

    def require_grant(self, request: HttpRequest, action: str, objs: Any) -> None:
        """:func:`require_admin_grant` on rows of this admin's model."""
        if self.access_tags_path:
            require_admin_grant(request, action, objs, self.access_tags_path)

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        path = PROJECT_PATHS.get(db_field.related_model)
        if path is not None and "queryset" not in kwargs:
            kwargs["queryset"] = scope_queryset(request, db_field.related_model._default_manager.all(), path)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def formfield_for_manytomany(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        path = PROJECT_PATHS.get(db_field.related_model)
        if path is not None and "queryset" not in kwargs:
            kwargs["queryset"] = scope_queryset(request, db_field.related_model._default_manager.all(), path)
        return super().formfield_for_manytomany(db_field, request, **kwargs)

    def get_list_filter(self, request: HttpRequest) -> Any:
        """Relation filters offer only values present in the visible rows."""
        filters = list(super().get_list_filter(request))
        if request.user.is_superuser:
            return filters
        scoped: list[Any] = []
        for item in filters:
            if isinstance(item, str) and self._is_relation(item):
                scoped.append((item, admin.RelatedOnlyFieldListFilter))
            else:
                scoped.append(item)
        return scoped

    def _is_relation(self, lookup: str) -> bool:
        model = self.model
        field = None
        for part in lookup.split("__"):
            field = model._meta.get_field(part)
            model = field.related_model if field.is_relation else model
        return bool(field is not None and field.is_relation)
