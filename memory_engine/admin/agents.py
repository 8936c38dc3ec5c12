"""Admin for agents: their retrieval scope and write store (an agent made here gets its own
store, as through the API; deleting one erases that store's memories and ledger rows)."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.db.models import OuterRef, Subquery
from django.http import HttpRequest

from memory_engine.models import Agent, MemoryStore
from memory_engine.policy import ADD, visible
from memory_engine.selectors.agents import agent_scope_in_reach
from memory_engine.services.agents import agent_delete
from memory_engine.services.stores import agent_store_create

from .erasure import ErasureAdmin
from .scoping import ProjectScopedAdmin, admin_caller, admin_owner, in_request_projects


@admin.register(Agent)
class AgentAdmin(ErasureAdmin, ProjectScopedAdmin):
    list_display = ["name", "id", "project", "write_store", "created_at"]
    list_filter = ["project"]
    search_fields = ["name", "id"]
    readonly_fields = ["id", "created_at", "knowledge_config_in_reach", "write_store"]
    autocomplete_fields = ["write_memory_store"]
    #: Shown instead of the fields to a user narrowed by grants (memory_engine.selectors.agents):
    #: a shared agent's scope may name other teams' stores and documents. Such a user changes
    #: them through the API, which checks each id against its reach.
    SCOPE_FIELDS = {"knowledge_config": "knowledge_config_in_reach", "write_memory_store": "write_store"}

    def get_queryset(self, request: HttpRequest) -> Any:
        stores = in_request_projects(request, MemoryStore.objects.all())
        write_store = visible(admin_caller(request), stores.filter(
            project_id=OuterRef("project_id"), pk=OuterRef("write_memory_store_id")))
        return super().get_queryset(request).annotate(write_store_name=Subquery(write_store.values("name")[:1]))

    def get_fields(self, request: Any, obj: Any = None) -> list[Any]:
        fields = [f for f in super().get_fields(request, obj) if f not in self.SCOPE_FIELDS.values()]
        if admin_caller(request).restricted and obj is not None:
            return [*(f for f in fields if f not in self.SCOPE_FIELDS), *self.SCOPE_FIELDS.values()]
        return fields

    def get_exclude(self, request: HttpRequest, obj: Any = None) -> Any:
        # not in the form at all for a narrowed user: saving keeps what it cannot see
        if obj is not None and admin_caller(request).restricted:
            return list(self.SCOPE_FIELDS)
        return super().get_exclude(request, obj)

    @admin.display(description="write memory store")
    def write_store(self, obj: Agent) -> str:
        return getattr(obj, "write_store_name", None) or "-"

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> Any:
        obj = super().get_object(request, object_id, from_field)
        if obj is not None:  # the reader the scope is shown to (this admin serves every request)
            obj.admin_reader = admin_caller(request)
        return obj

    @admin.display(description="knowledge config")
    def knowledge_config_in_reach(self, obj: Agent) -> str:
        config = agent_scope_in_reach(obj.admin_reader, obj)[0] if hasattr(obj, "admin_reader") else {}
        return json.dumps(config, indent=2, sort_keys=True)

    def save_model(self, request: HttpRequest, obj: Agent, form: Any, change: bool) -> None:
        if change:  # an agent goes with its own store (memory_engine.policy)
            self.require_grant(request, ADD, [obj])
        super().save_model(request, obj, form, change)
        if not change:
            agent_store_create(agent=obj, owner=admin_owner(request))

    def erase(self, request: HttpRequest, obj: Agent) -> None:
        agent_delete(agent=obj, caller=admin_caller(request))
