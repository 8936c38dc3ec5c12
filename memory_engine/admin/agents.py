"""Admin for agents: their retrieval scope and write store."""

from __future__ import annotations

from django.contrib import admin

from memory_engine.models import Agent

from .scoping import ProjectScopedAdmin


@admin.register(Agent)
class AgentAdmin(ProjectScopedAdmin):
    list_display = ["name", "id", "project", "write_memory_store", "created_at"]
    list_filter = ["project"]
    search_fields = ["name", "id"]
    readonly_fields = ["id", "created_at"]
    autocomplete_fields = ["write_memory_store"]
