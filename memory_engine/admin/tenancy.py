"""Admin for projects and API keys (a new key's secret is shown once)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.cache import patch_cache_control
from django.utils.html import format_html

from memory_engine.models import ApiKey, Project, StaffGrants
from memory_engine.services.keys import api_key_create, api_key_revoke
from memory_engine.services.stores import project_delete

from .console import overview_view, playground_view
from .erasure import ErasureAdmin
from .scoping import ProjectScopedAdmin, admin_caller, visible_projects


class ApiKeyInline(admin.TabularInline):
    model = ApiKey
    extra = 0
    fields = ["name", "prefix", "read_only", "created_at", "expires_at", "revoked_at", "last_used_at"]
    # A revoked key stays revoked: revoking is the "revoke" action, there is no un-revoke.
    readonly_fields = ["prefix", "created_at", "revoked_at", "last_used_at"]
    show_change_link = True

    def has_add_permission(self, request: Any, obj: Any = None) -> bool:
        return False


@admin.register(Project)
class ProjectAdmin(ErasureAdmin, ProjectScopedAdmin):
    project_path = "pk"
    list_display = ["name", "id", "console_links", "max_memories", "max_document_bytes", "created_at"]
    search_fields = ["name", "id"]
    readonly_fields = ["id", "created_at"]
    filter_horizontal = ["members"]
    inlines = [ApiKeyInline]

    def formfield_for_manytomany(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "members" and not request.user.is_superuser:
            # A project operator picks among the people of their own projects, not the whole instance.
            users = get_user_model()
            kwargs["queryset"] = users._default_manager.filter(
                memory_engine_projects__in=visible_projects(request)).distinct().order_by(users.USERNAME_FIELD)
        return super().formfield_for_manytomany(db_field, request, **kwargs)

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        # Deleting a project erases rows a staff user with grants may not reach.
        return not admin_caller(request).restricted and super().has_delete_permission(request, obj)

    def erase(self, request: HttpRequest, obj: Project) -> None:
        project_delete(project=obj)

    def get_urls(self) -> list[Any]:
        wrap = self.admin_site.admin_view
        return [
            path("playground/", wrap(self.playground), name="memory_engine_project_playground"),
            path("<path:object_id>/overview/", wrap(self.overview), name="memory_engine_project_overview"),
            *super().get_urls(),
        ]

    def overview(self, request: HttpRequest, object_id: str) -> HttpResponse:
        return overview_view(self, request, object_id)

    def playground(self, request: HttpRequest) -> HttpResponse:
        return playground_view(self, request)

    @admin.display(description="console")
    def console_links(self, obj: Project) -> str:
        return format_html('<a href="{}">overview</a> · <a href="{}?project={}">search playground</a>',
                           reverse("admin:memory_engine_project_overview", args=[obj.pk]),
                           reverse("admin:memory_engine_project_playground"), obj.pk)


@admin.register(ApiKey)
class ApiKeyAdmin(ProjectScopedAdmin):
    list_display = ["prefix", "name", "project", "read_only", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["project", "read_only", ("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["prefix", "name", "project__name"]
    fields = ["project", "name", "read_only", "grants", "expires_at", "prefix", "created_at", "last_used_at",
              "revoked_at"]
    readonly_fields = ["prefix", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]

    def has_add_permission(self, request: Any) -> bool:
        # A staff user with grants makes no key: a key without grants would reach the whole project.
        return not admin_caller(request).restricted and super().has_add_permission(request)

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return not admin_caller(request).restricted and super().has_change_permission(request, obj)

    def get_readonly_fields(self, request: Any, obj: ApiKey | None = None) -> list[str]:
        fields = list(super().get_readonly_fields(request, obj))
        return fields + ["project"] if obj else fields

    def save_model(self, request: Any, obj: ApiKey, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        key, raw = api_key_create(project=obj.project, name=obj.name, read_only=obj.read_only,
                                  expires_at=obj.expires_at, grants=obj.grants)
        obj.pk, obj.prefix, obj.hashed_key, obj.created_at = key.pk, key.prefix, key.hashed_key, key.created_at
        obj._state.adding = False
        request._memory_engine_new_key = raw  # shown by response_add, in this response only

    def response_add(self, request: Any, obj: ApiKey, post_url_continue: str | None = None) -> HttpResponse:
        """Show the new key in the response to the creating request itself. Not a message:
        Django's messages may travel in a cookie (signed, not encrypted) or the session."""
        raw = getattr(request, "_memory_engine_new_key", None)
        if raw is None:
            return super().response_add(request, obj, post_url_continue)
        context = {**self.admin_site.each_context(request), "title": "New API key", "opts": self.model._meta,
                   "key": obj, "raw_key": raw}
        response = TemplateResponse(request, "admin/memory_engine/apikey/created.html", context)
        patch_cache_control(response, no_store=True, private=True)
        return response

    @admin.action(description="Revoke selected keys", permissions=["change"])
    def revoke(self, request: Any, queryset: Any) -> None:
        keys = list(queryset.filter(revoked_at__isnull=True))
        for key in keys:
            api_key_revoke(key=key)
        messages.success(request, f"Revoked {len(keys)} key(s).")


@admin.register(StaffGrants)
class StaffGrantsAdmin(admin.ModelAdmin):
    """Grants of staff users (docs/security.md, *Access inside a project*): superusers only, so
    no staff user widens their own."""

    list_display = ["user", "grants", "updated_at"]
    search_fields = ["user__username"]
    raw_id_fields = ["user"]
    fields = ["user", "grants", "updated_at"]
    readonly_fields = ["updated_at"]

    def has_module_permission(self, request: Any) -> bool:
        return bool(request.user.is_superuser)

    def has_view_permission(self, request: Any, obj: Any = None) -> bool:
        return bool(request.user.is_superuser)

    def has_add_permission(self, request: Any) -> bool:
        return bool(request.user.is_superuser)

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return bool(request.user.is_superuser)

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return bool(request.user.is_superuser)
