"""The entity graph in the admin (docs/entities.md): a list to find entities, a page per entity
(its neighbours as a picture, its facts over time, the chunks that mention it) and a merge
action. Entities are made by reading memories and chunks, never added or edited here."""

from __future__ import annotations

import math
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from memory_engine.exceptions import MemoryEngineError
from memory_engine.models import Entity
from memory_engine.policy import ADD
from memory_engine.selectors.entities import entity_detail, entity_neighbours
from memory_engine.services.entities import entity_merge

from .scoping import ProjectScopedAdmin, ReadOnlyAdminMixin, admin_caller

#: The picture's size (px) and how many neighbours it draws.
GRAPH_SIZE, GRAPH_NEIGHBOURS = 420, 12


def graph_svg(entity: Entity, neighbours: list[tuple[Entity, int]]) -> SafeString | str:
    """The entity in the middle, its neighbours on a circle, each line as thick as the memories
    they share; every neighbour links to its own page."""
    if not neighbours:
        return ""
    centre, radius = GRAPH_SIZE / 2, GRAPH_SIZE / 2 - 60
    most = max(count for _, count in neighbours)
    parts = []
    for index, (other, count) in enumerate(neighbours):
        angle = 2 * math.pi * index / len(neighbours)
        x, y = centre + radius * math.cos(angle), centre + radius * math.sin(angle)
        url = reverse("admin:memory_engine_entity_change", args=[other.pk])
        parts.append((f"{centre:.0f}", f"{centre:.0f}", f"{x:.0f}", f"{y:.0f}", f"{1 + 4 * count / most:.1f}", url,
                      f"{x:.0f}", f"{y:.0f}", f"{x:.0f}", f"{y + 18:.0f}", f"{other.name} ({count})"))
    body = format_html_join(
        "", '<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#79aec8" stroke-width="{}"/>'
            '<a href="{}"><circle cx="{}" cy="{}" r="6" fill="#417690"/>'
            '<text x="{}" y="{}" text-anchor="middle" font-size="12">{}</text></a>', parts)
    return format_html(
        '<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" role="img" aria-label="{}">{}'
        '<circle cx="{}" cy="{}" r="9" fill="#b36b00"/><text x="{}" y="{}" text-anchor="middle" '
        'font-size="13" font-weight="bold">{}</text></svg>',
        GRAPH_SIZE, GRAPH_SIZE, f"{entity.name} and its neighbours", body, f"{centre:.0f}", f"{centre:.0f}",
        f"{centre:.0f}", f"{centre - 14:.0f}", entity.name)


@admin.register(Entity)
class EntityAdmin(ReadOnlyAdminMixin, ProjectScopedAdmin):
    """An operator finds an entity, reads what is known of it over time, and merges entities
    that are one thing ("Mel" into "Melanie")."""

    project_path = "project"
    list_display = ["name", "kind", "key", "alias_list", "project", "updated_at"]
    list_filter = ["kind", "project"]
    search_fields = ["id", "name", "key"]
    fields = readonly_fields = ("id", "project", "name", "kind", "key", "aliases", "created_at", "updated_at")
    change_form_template = "admin/memory_engine/entity/change_form.html"
    actions = ["merge_selected"]

    @admin.display(description="aliases")
    def alias_list(self, obj: Entity) -> str:
        return ", ".join(obj.aliases) or "-"

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "",
                    extra_context: dict[str, Any] | None = None) -> HttpResponse:
        entity = self.get_object(request, object_id)
        extra = dict(extra_context or {})
        if entity is not None:
            caller = admin_caller(request)
            detail = entity_detail(caller=caller, entity=entity)
            extra.update(edges=detail.edges, chunks=detail.chunks,
                         graph_svg=graph_svg(entity, entity_neighbours(caller=caller, entity=entity,
                                                                       limit=GRAPH_NEIGHBOURS)))
        return super().change_view(request, object_id, form_url, extra_context=extra)

    def has_merge_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perms(["memory_engine.change_entity", "memory_engine.delete_entity"])

    @admin.action(description="Merge the selected entities into the one with the most edges", permissions=["merge"])
    def merge_selected(self, request: HttpRequest, queryset: QuerySet[Entity]) -> None:
        self.require_grant(request, ADD, queryset)
        by_project: dict[str, list[Entity]] = {}
        for entity in queryset.order_by("created_at", "id"):
            by_project.setdefault(entity.project_id, []).append(entity)
        merged = 0
        for entities in by_project.values():
            if len(entities) < 2:
                continue
            target = max(entities, key=lambda e: (e.edges.count(), -entities.index(e)))
            try:
                entity_merge(target=target, sources=[e for e in entities if e.pk != target.pk])
            except MemoryEngineError as exc:
                self.message_user(request, f"Not merged: {exc.code}.", messages.WARNING)
                continue
            merged += len(entities) - 1
        if merged:
            self.message_user(request, f"Merged {merged} entity(ies).", messages.SUCCESS)
        else:
            self.message_user(request, "Select two or more entities of one project to merge.", messages.WARNING)
