"""Project scoping for the operator console, implemented once.

Superusers see every project. Any other staff user sees only the projects they are a
member of (``Project.members``): changelists, detail pages, autocomplete, the choices
of foreign keys and list filters, and the custom console views all go through
:func:`visible_projects` / :class:`ProjectScopedAdmin`. Inside those projects the access policy
(:mod:`memory_engine.policy`) decides for a staff user with grants
(:class:`~memory_engine.models.StaffGrants`): every grant-covered row (stores and their memories,
ledger rows and rules; documents; agents and their generations; links) is listed only when a
``search`` grant reaches it, and changed only with the action's grant (:func:`require_admin_grant`;
docs/security.md, *The access policy*).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import Model, QuerySet
from django.http import Http404, HttpRequest

from memory_engine.db import across_projects
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
from memory_engine.policy import SEARCH, TAG_FILTERS, Principal, allows, reach, user_principal, visible

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


def request_projects(request: HttpRequest) -> list[str] | None:
    """The ids of the projects this admin user may see, read once per request; None for a
    superuser (every project). Filtering by the ids as values lets a distributed PostgreSQL read
    only the nodes that hold them (docs/scaling.md)."""
    if request.user.is_superuser:
        return None
    if "_memory_engine_projects" not in request.__dict__:
        with across_projects():  # a user's memberships, wherever their projects are
            request.__dict__["_memory_engine_projects"] = list(visible_projects(request).values_list("pk", flat=True))
    projects: list[str] = request.__dict__["_memory_engine_projects"]
    return projects


def scope_queryset(request: HttpRequest, queryset: QuerySet[Any], project_path: str) -> QuerySet[Any]:
    """Limit a queryset to the visible projects through ``project_path`` (e.g. ``project``)."""
    projects = request_projects(request)
    if projects is None:
        return queryset
    return queryset.filter(**{f"{project_path}__in": projects}).distinct()


def in_request_projects(request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
    """Rows with ``project_id`` of the projects this admin user may see (a lookup beside a list:
    a subquery, a prefetch)."""
    projects = request_projects(request)
    return queryset if projects is None else queryset.filter(project_id__in=projects)


class ProjectRelatedOnlyFilter(admin.RelatedOnlyFieldListFilter):
    """A relation's filter offering the values present in the visible rows, themselves read by
    the user's projects."""

    def field_choices(self, field: Any, request: HttpRequest, model_admin: Any) -> Any:
        present = model_admin.get_queryset(request).distinct().values_list(f"{self.field_path}__pk", flat=True)
        limit: dict[str, Any] = {"pk__in": present}
        projects = request_projects(request)
        if projects is not None and any(f.name == "project" for f in field.related_model._meta.fields):
            limit["project_id__in"] = projects
        return field.get_choices(include_blank=False, limit_choices_to=limit,
                                 ordering=self.field_admin_ordering(field, request, model_admin))


def scoped_project_or_404(request: HttpRequest, project_id: str) -> Project:
    """A project for a custom view: 404 when it does not exist or is not visible."""
    project = visible_projects(request).filter(pk=project_id).first()
    if project is None:
        raise Http404("No such project.")
    return project


def admin_caller(request: HttpRequest) -> Principal:
    """The admin user as the access policy sees it, built once per request."""
    if "_memory_engine_caller" not in request.__dict__:
        request.__dict__["_memory_engine_caller"] = user_principal(request.user)
    return request.__dict__["_memory_engine_caller"]


def admin_access_tags(request: HttpRequest, action: str | None = SEARCH) -> list[str] | None:
    """The grant tags ``action`` reaches in the user's projects; None for a user without grants
    (and a superuser): the whole projects."""
    return reach(admin_caller(request), action)


def admin_owner(request: HttpRequest) -> str | None:
    """The owner a document or store created here is tagged with: a user with grants only (a
    user without grants writes none, as before grants existed)."""
    return admin_caller(request).owner


def require_admin_grant(request: HttpRequest, action: str, objs: Any) -> None:
    """403 (PermissionDenied) unless the policy allows ``action`` on every one of ``objs``: an
    action on a selection runs on all of it or on none."""
    caller = admin_caller(request)
    if not all(allows(caller, action, obj) for obj in objs):
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

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change=change, **kwargs)
        if issubclass(form, TrustedForm):
            # Forms that name code (rule handlers, converters) trust only superusers; other staff
            # go through the same allow-lists as API keys (memory_engine.guards).
            form.trusted = bool(request.user.is_superuser)
        return form

    def _narrowed_on_project_wide(self, request: HttpRequest) -> bool:
        """A row grants do not cover is project-wide configuration (rules of ingestion, transform
        configs, the schema, the project itself): a user with grants reads it and changes none."""
        return self.model not in TAG_FILTERS and admin_caller(request).restricted

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return not self._narrowed_on_project_wide(request) and super().has_add_permission(request, *args)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return not self._narrowed_on_project_wide(request) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return not self._narrowed_on_project_wide(request) and super().has_delete_permission(request, obj)

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        return {} if self._narrowed_on_project_wide(request) else super().get_actions(request)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = scope_queryset(request, super().get_queryset(request), self.project_path)
        if queryset.model in TAG_FILTERS:  # a grant-covered model: the policy narrows it
            queryset = visible(admin_caller(request), queryset)
        return queryset

    def require_grant(self, request: HttpRequest, action: str, objs: Any) -> None:
        """:func:`require_admin_grant` on rows of this admin's model (rows grants do not cover
        are project-wide: a user with grants may not act on them)."""
        if self.model in TAG_FILTERS:
            require_admin_grant(request, action, objs)
        elif admin_caller(request).restricted:
            raise PermissionDenied

    def _choices(self, request: HttpRequest, model: type[Model]) -> QuerySet[Any] | None:
        """The rows of ``model`` a foreign key of this admin may point at: the user's projects,
        and for a grant-covered model the rows the policy lets the user see."""
        path = PROJECT_PATHS.get(model)
        if path is None:
            return None
        rows = scope_queryset(request, model._default_manager.all(), path)
        return visible(admin_caller(request), rows) if model in TAG_FILTERS else rows

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if "queryset" not in kwargs and (rows := self._choices(request, db_field.related_model)) is not None:
            kwargs["queryset"] = rows
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def formfield_for_manytomany(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if "queryset" not in kwargs and (rows := self._choices(request, db_field.related_model)) is not None:
            kwargs["queryset"] = rows
        return super().formfield_for_manytomany(db_field, request, **kwargs)

    def get_list_filter(self, request: HttpRequest) -> Any:
        """Relation filters offer only values present in the visible rows."""
        filters = list(super().get_list_filter(request))
        if request.user.is_superuser:
            return filters
        scoped: list[Any] = []
        for item in filters:
            if isinstance(item, str) and self._is_relation(item):
                scoped.append((item, ProjectRelatedOnlyFilter))
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



class ReadOnlyAdminMixin(admin.ModelAdmin):
    """Rows the services write and operators only read in the admin (the ledger, receipts,
    generations, memories): nothing is added or changed here, and nothing deleted unless the
    admin sets ``deletable`` (then the next class in line decides, e.g. ProjectScopedAdmin).
    Put it first: ``class MemoryAssertionAdmin(ReadOnlyAdminMixin, ProjectScopedAdmin)``."""

    #: whether an operator with delete permission may delete rows here
    deletable = False

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.deletable and super().has_delete_permission(request, obj)


class ReadOnlyInlineMixin(admin.options.InlineModelAdmin):
    """An inline that shows rows and adds or deletes none (chunks, links, deliveries): list its
    fields as ``readonly_fields`` too. Put it first: ``class ChunkInline(ReadOnlyInlineMixin,
    admin.TabularInline)``."""

    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
