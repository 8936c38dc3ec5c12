"""Evidence links in the admin: read-only inlines on a memory (what supports or contradicts it,
what it bears on) and a list to find and delete links. Links are created through the API
(POST /api/v1/links), which checks both ends are in one project."""

from __future__ import annotations

from django.contrib import admin

from memory_engine.models import EvidenceLink

from .scoping import ProjectScopedAdmin, ReadOnlyAdminMixin, ReadOnlyInlineMixin

LINK_FIELDS = ("kind", "source_id", "target_id", "created_by", "created_at")


class _LinkInline(ReadOnlyInlineMixin, admin.TabularInline):
    model = EvidenceLink
    fields = readonly_fields = LINK_FIELDS
    show_change_link = False


class LinksInInline(_LinkInline):
    """Links whose target is this memory: what supports or contradicts it."""

    fk_name = "target_memory"
    verbose_name_plural = "evidence links to this memory"


class LinksOutInline(_LinkInline):
    """Links whose source is this memory: what it supports or contradicts."""

    fk_name = "source_memory"
    verbose_name_plural = "evidence links from this memory"


@admin.register(EvidenceLink)
class EvidenceLinkAdmin(ReadOnlyAdminMixin, ProjectScopedAdmin):
    """Links are made through the API (it checks both ends are of one project) and deleted and
    made again, never edited."""

    project_path = "project"
    list_display = ["id", "kind", "source_id", "target_id", "project", "created_by", "created_at"]
    list_filter = ["kind", "project"]
    search_fields = ["id", "source_memory__id", "source_version__id", "target_memory__id", "target_version__id"]
    fields = readonly_fields = ("id", "project", *LINK_FIELDS)
    deletable = True
