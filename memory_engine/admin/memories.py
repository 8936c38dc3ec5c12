"""Admin for stores, memories (with their supersede chain) and the read-only ledger."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from memory_engine.models import Memory, MemoryAssertion, MemoryStore


def admin_link(obj: Any, label: str | None = None) -> str:
    if obj is None:
        return "-"
    url = reverse(f"admin:memory_engine_{obj._meta.model_name}_change", args=[obj.pk])
    return format_html('<a href="{}">{}</a>', url, label or obj.pk)


@admin.register(MemoryStore)
class MemoryStoreAdmin(admin.ModelAdmin):
    list_display = ["name", "id", "project", "duplicate_threshold", "supersede_threshold", "created_at"]
    list_filter = ["project"]
    search_fields = ["name", "id"]
    readonly_fields = ["id", "created_at"]


class ValidityFilter(admin.SimpleListFilter):
    title = "validity"
    parameter_name = "validity"

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, str]]:
        return [("valid", "Valid"), ("invalidated", "Invalidated")]

    def queryset(self, request: Any, queryset: Any) -> Any:
        if self.value() == "valid":
            return queryset.filter(invalidated_at__isnull=True)
        if self.value() == "invalidated":
            return queryset.filter(invalidated_at__isnull=False)
        return queryset


@admin.register(Memory)
class MemoryAdmin(admin.ModelAdmin):
    list_display = ["id", "text_preview", "store", "source_type", "created_at", "invalidated_at", "successor"]
    list_filter = [ValidityFilter, "store__project", "store", "source_type"]
    search_fields = ["id", "content__text"]
    list_select_related = ["content", "store", "superseded_by"]
    readonly_fields = ["id", "store", "content", "text", "tags", "metadata", "source_type", "about_kind",
                       "about_key", "created_at", "invalidated_at", "successor", "predecessors"]
    fields = readonly_fields
    date_hierarchy = "created_at"

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    @admin.display(description="text")
    def text_preview(self, obj: Memory) -> str:
        return obj.content.text[:100]

    @admin.display(description="superseded by")
    def successor(self, obj: Memory) -> str:
        return admin_link(obj.superseded_by)

    @admin.display(description="supersedes")
    def predecessors(self, obj: Memory) -> str:
        return format_html(" ".join(admin_link(m) for m in obj.supersedes.all())) or "-"


@admin.register(MemoryAssertion)
class MemoryAssertionAdmin(admin.ModelAdmin):
    list_display = ["id", "outcome", "decision_reason", "similarity", "mechanism", "principal", "store",
                    "memory_link", "created_at"]
    list_filter = ["outcome", "mechanism", "decision_reason", "store__project", "store"]
    search_fields = ["content", "principal", "id", "memory__id"]
    date_hierarchy = "created_at"
    list_select_related = ["store", "memory"]

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    @admin.display(description="memory")
    def memory_link(self, obj: MemoryAssertion) -> str:
        return admin_link(obj.memory)
