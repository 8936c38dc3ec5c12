"""Admin for projects and API keys (a new key's secret is shown once)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.utils import timezone

from memory_engine.models import ApiKey, Project
from memory_engine.services.keys import api_key_create


class ApiKeyInline(admin.TabularInline):
    model = ApiKey
    extra = 0
    fields = ["name", "prefix", "read_only", "created_at", "expires_at", "revoked_at", "last_used_at"]
    readonly_fields = ["prefix", "created_at", "last_used_at"]
    show_change_link = True

    def has_add_permission(self, request: Any, obj: Any = None) -> bool:
        return False


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["name", "id", "max_memories", "max_document_bytes", "created_at"]
    search_fields = ["name", "id"]
    readonly_fields = ["id", "created_at"]
    filter_horizontal = ["members"]
    inlines = [ApiKeyInline]


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ["prefix", "name", "project", "read_only", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["project", "read_only", ("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["prefix", "name", "project__name"]
    fields = ["project", "name", "read_only", "expires_at", "prefix", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["prefix", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]

    def get_readonly_fields(self, request: Any, obj: ApiKey | None = None) -> list[str]:
        fields = list(super().get_readonly_fields(request, obj))
        return fields + ["project"] if obj else fields

    def save_model(self, request: Any, obj: ApiKey, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        key, raw = api_key_create(project=obj.project, name=obj.name, read_only=obj.read_only,
                                  expires_at=obj.expires_at)
        obj.pk, obj.prefix, obj.hashed_key, obj.created_at = key.pk, key.prefix, key.hashed_key, key.created_at
        obj._state.adding = False
        messages.warning(request, f"New API key (shown once, copy it now): {raw}")

    @admin.action(description="Revoke selected keys")
    def revoke(self, request: Any, queryset: Any) -> None:
        count = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        messages.success(request, f"Revoked {count} key(s).")
