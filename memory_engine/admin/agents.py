"""Admin for agents: their retrieval scope and write store (an agent made here gets its own
store, as through the API; deleting one erases that store's memories and ledger rows)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from memory_engine.models import Agent
from memory_engine.policy import ADD
from memory_engine.services.agents import agent_delete
from memory_engine.services.stores import agent_store_create

from .erasure import ErasureAdmin
from .scoping import ProjectScopedAdmin, admin_caller, admin_owner


@admin.register(Agent)
class AgentAdmin(ErasureAdmin, ProjectScopedAdmin):
    list_display = ["name", "id", "project", "write_memory_store", "created_at"]
    list_filter = ["project"]
    search_fields = ["name", "id"]
    readonly_fields = ["id", "created_at"]
    autocomplete_fields = ["write_memory_store"]

    def save_model(self, request: HttpRequest, obj: Agent, form: Any, change: bool) -> None:
        if change:  # an agent goes with its own store (memory_engine.policy)
            self.require_grant(request, ADD, [obj])
        super().save_model(request, obj, form, change)
        if not change:
            agent_store_create(agent=obj, owner=admin_owner(request))

    def erase(self, request: HttpRequest, obj: Agent) -> None:
        agent_delete(agent=obj, caller=admin_caller(request))
