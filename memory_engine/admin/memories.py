"""Admin for stores, memories (with their supersede timeline), superseded facts, the trash
(with restore) and the read-only assertion ledger: "why was this fact retired?"."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

from django import forms
from django.contrib import admin, messages
from django.db.models import F, OuterRef, QuerySet, Subquery
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from memory_engine.exceptions import MemoryEngineError
from memory_engine.grants import ADD, FORGET
from memory_engine.instruction_guard import version as guard_version
from memory_engine.models import DocumentVersion, Memory, MemoryAssertion, MemoryStore
from memory_engine.models.memories import Mechanism, Outcome
from memory_engine.policy import access_tags_write, visible
from memory_engine.queue import enqueue_guard_sweep
from memory_engine.selectors.memory_map import memory_map_answer
from memory_engine.services.guard_sweep import guard_counts
from memory_engine.services.memory_lifecycle import memory_forget, memory_restore, restorable_until
from memory_engine.services.memory_map import memory_map_request, recomputing
from memory_engine.services.stores import memory_store_delete, memory_store_save, validate_memory_store

from .erasure import ErasureAdmin
from .links import LinksInInline, LinksOutInline
from .memory_map import cluster_rows, memory_map_svg
from .retention import RETENTION_ACTIONS, RetentionActionsMixin, set_memories_retention
from .scoping import ProjectScopedAdmin, ReadOnlyAdminMixin, admin_caller, admin_owner, require_perm

#: Outcomes of the assertion that brings a memory into existence.
MAKING_OUTCOMES = (Outcome.CREATED, Outcome.SUPERSEDED, Outcome.DECLARED)
#: How far the timeline follows a supersede chain in each direction.
MAX_CHAIN = 200


def admin_link(obj: Any, label: str | None = None) -> str:
    if obj is None:
        return "-"
    url = reverse(f"admin:memory_engine_{obj._meta.model_name}_change", args=[obj.pk])
    return format_html('<a href="{}">{}</a>', url, label or obj.pk)


def similarity_text(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


class MemoryStoreForm(forms.ModelForm):
    """Store edits pass the API's checks (memory_engine.services.stores): a valid threshold
    pair and a name no other store of the project has."""

    class Meta:
        model = MemoryStore
        # The ModelAdmin picks the fields (its fieldsets override Meta.fields in get_form).
        fields = "__all__"  # noqa: DJ007

    def validate_unique(self) -> None:
        # Runs once the form's values are on the instance; the service's check replaces the
        # model's unique-name constraint check, so the message is the API's.
        try:
            validate_memory_store(self.instance)
        except MemoryEngineError as exc:
            self.add_error(None, f"{exc.code}: {exc.message}")


@admin.register(MemoryStore)
class MemoryStoreAdmin(ErasureAdmin, ProjectScopedAdmin):
    form = MemoryStoreForm
    list_display = ["name", "id", "project", "tier", "duplicate_threshold", "supersede_threshold", "judge_enabled",
                    "created_at", "map_column"]
    list_filter = ["project", "tier"]
    search_fields = ["name", "id", "subject_external_id"]
    # A store's tier and owner are set when it is made (API, subjects, agents): stores made here
    # are institutional.
    readonly_fields = ["id", "tier", "subject_external_id", "agent", "created_at", "memory_map_link",
                       "instruction_guard"]
    actions = ["judge_again"]

    @admin.display(description="instruction guard")
    def instruction_guard(self, obj: MemoryStore) -> str:
        """How many of the store's texts hold a finding of the guard's current version."""
        if obj.pk is None or obj._state.adding:
            return "-"
        counts = guard_counts(store_ids=[obj.pk])
        return format_html_join(", ", "{}: {} of {} judged by guard {}", (
            (table.replace("_", " "), count["current"], count["rows"], guard_version())
            for table, count in counts.items() if table != "chunks"))

    @admin.action(description="Judge their texts again with the instruction guard (rows of an older guard)",
                  permissions=["change"])
    def judge_again(self, request: HttpRequest, queryset: QuerySet[MemoryStore]) -> None:
        stores = list(queryset)
        self.require_grant(request, ADD, stores)
        unjudged = sum(count["rows"] - count["current"]
                       for count in guard_counts(store_ids=[store.pk for store in stores]).values())
        enqueue_guard_sweep([store.pk for store in stores])
        self.message_user(request, f"Queued: the instruction guard judges the {unjudged} rows of {len(stores)} "
                                   f"store(s) that hold no finding of its current version ({guard_version()}).",
                          messages.SUCCESS)

    @admin.display(description="memory map")
    def memory_map_link(self, obj: MemoryStore) -> str:
        if obj.pk is None or obj._state.adding:
            return "-"
        return format_html('<a href="{}">Draw the memory map</a>',
                           reverse("admin:memory_engine_memorystore_map", args=[obj.pk]))

    @admin.display(description="memory map")
    def map_column(self, obj: MemoryStore) -> str:
        return format_html('<a href="{}">map</a>', reverse("admin:memory_engine_memorystore_map", args=[obj.pk]))

    def get_urls(self) -> list[Any]:
        view = self.admin_site.admin_view(self.memory_map_view)
        return [path("<path:object_id>/map/", view, name="memory_engine_memorystore_map"), *super().get_urls()]

    def memory_map_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The store's memory map as a picture (memory_engine.admin.memory_map), masked as in the API."""
        store = self.get_object(request, object_id)
        if store is None or not self.has_view_permission(request, store):
            raise Http404("No such memory store.")
        require_perm(request, "view_memory")
        found = memory_map_request(store=store)
        answer = memory_map_answer(found, stale=recomputing(found))
        context = {**self.admin_site.each_context(request), "title": f"Memory map of {store.name}",
                   "opts": self.model._meta, "store": store, "answer": answer,
                   "svg": memory_map_svg(answer) if answer["status"] == "ready" else "",
                   "clusters": cluster_rows(answer)}
        return TemplateResponse(request, "admin/memory_engine/memorystore/memory_map.html", context)

    def save_model(self, request: HttpRequest, obj: MemoryStore, form: Any, change: bool) -> None:
        if change:
            self.require_grant(request, ADD, [MemoryStore.objects.get(pk=obj.pk)])  # the tags before the edit
        memory_store_save(project=obj.project, store=obj)
        if not change:
            access_tags_write(obj=obj, owner=admin_owner(request))

    def erase(self, request: HttpRequest, obj: MemoryStore) -> None:
        memory_store_delete(store=obj)


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


def making_assertion(memory: Memory) -> MemoryAssertion | None:
    return (memory.assertions.filter(outcome__in=MAKING_OUTCOMES).select_related("generation", "rule")
            .order_by("created_at").first())


def supersede_chain(memory: Memory) -> list[Memory]:
    """Every version of this fact, oldest first (follows ``supersedes`` back and
    ``superseded_by`` forward)."""
    base = Memory.objects.select_related("content", "store").defer("content__embedding")
    older: list[Memory] = []
    current = memory
    while len(older) < MAX_CHAIN:
        previous = base.filter(superseded_by=current).order_by("created_at").first()
        if previous is None:
            break
        older.append(previous)
        current = previous
    newer: list[Memory] = []
    current = memory
    while current.superseded_by_id and len(newer) < MAX_CHAIN:
        current = base.get(pk=current.superseded_by_id)
        newer.append(current)
    return [*reversed(older), memory, *newer]


def subject_lines(details: dict[str, Any]) -> dict[str, Any]:
    """What an assertion recorded of the subjects the decision read (docs/write-funnel.md,
    "Subjects"): the write's, the memory about one of them it read, the similar memory about
    another subject it left alone."""
    lines: dict[str, Any] = {}
    if details.get("subjects"):
        lines["write"] = ", ".join(details["subjects"])
    if details.get("subject"):
        lines["shared"] = details["subject"]
    if details.get("subject_mismatch"):
        lines["mismatch"] = details["subject_mismatch"]
    return lines


def timeline(memory: Memory) -> list[dict[str, Any]]:
    """One entry per version: the memory, the assertion that made it, how it ended."""
    entries = []
    for version in supersede_chain(memory):
        made = making_assertion(version)
        ended = (version.retiring_assertions.filter(outcome=Outcome.FORGOTTEN).order_by("created_at").first()
                 if version.invalidated_at and not version.superseded_by_id else None)
        entries.append({
            "memory": version,
            "current": version.pk == memory.pk,
            "assertion": made,
            "similarity": similarity_text(made.similarity if made else None),
            "changed_details": (made.details or {}).get("changed_details", []) if made else [],
            "judge": (made.details or {}).get("judge") if made else None,
            "subjects": subject_lines(made.details or {}) if made else {},
            "reassertions": version.assertions.filter(outcome=Outcome.SKIPPED).count(),
            "forgotten": ended,
        })
    return entries


def memory_why(memory: Memory) -> dict[str, Any]:
    """What the top of a memory's page answers first: the decision that made it (and the memory it
    replaced, if any) and the one that retired it (what replaced it, or who forgot it)."""
    made = making_assertion(memory)
    ended = (memory.retiring_assertions.select_related("memory").order_by("-created_at").first()
             if memory.invalidated_at else None)
    return {
        "made": made,
        "made_similarity": similarity_text(made.similarity if made else None),
        "ended": ended,
        "ended_similarity": similarity_text(ended.similarity if ended else None),
    }


@admin.register(Memory)
class MemoryAdmin(ReadOnlyAdminMixin, RetentionActionsMixin, ProjectScopedAdmin):
    """Memories, read-only: they are forgotten through the funnel (an assertion), never deleted."""

    project_path = "project"
    list_display = ["id", "text_preview", "store", "kind", "facet", "confidence", "evidence_count", "source_type",
                    "created_at", "expires_at", "invalidated_at", "trashed_at", "successor", "retention_class",
                    "consent_category"]
    list_filter = [ValidityFilter, "store__project", "store", "source_type", "kind", "retention_class", "provenance",
                   "lineage", "consent_category"]
    search_fields = ["id", "content__text"]
    list_select_related = ["content", "store", "superseded_by"]
    readonly_fields = ("id", "store", "text", "kind", "title", "summary", "facet", "confidence", "evidence_count",
                       "reinforced_at", "expires_at", "trashed_at", "agent", "tags", "metadata", "source_type",
                       "about_kind", "about_key", "subjects", "created_at", "invalidated_at", "successor",
                       "predecessors",
                       "revisions", "retention_class", "provenance", "lineage", "consent_category", "derived_from")
    fields = readonly_fields
    date_hierarchy = "created_at"
    change_form_template = "admin/memory_engine/memory/change_form.html"
    inlines = [LinksInInline, LinksOutInline]

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> Any:
        memory = super().get_object(request, object_id, from_field)
        if memory is not None:  # the versions it was read out of that this operator may see
            memory.derived_versions = list(visible(admin_caller(request), DocumentVersion.objects.filter(
                derived_memories__memory=memory).select_related("document")))
        return memory

    @admin.display(description="derived from")
    def derived_from(self, obj: Memory) -> str:
        """The document versions a distiller read it out of."""
        versions = getattr(obj, "derived_versions", [])
        return format_html_join(", ", '<a href="{}">{} v{}</a>', (
            (reverse("admin:memory_engine_document_change", args=[v.document_id]), v.document.path, v.number)
            for v in versions)) or "-"
    actions = ["forget", *RETENTION_ACTIONS]
    retention_setter = set_memories_retention

    def has_forget_permission(self, request: Any) -> bool:
        return request.user.has_perm("memory_engine.delete_memory")

    @admin.action(description="Forget the selected memories (recorded as assertions)", permissions=["forget"])
    def forget(self, request: Any, queryset: QuerySet[Memory]) -> None:
        self.require_grant(request, FORGET, queryset)
        count, refused = 0, []
        for memory in queryset.filter(invalidated_at__isnull=True):
            try:
                memory_forget(memory=memory, principal=admin_caller(request).label,
                              mechanism=Mechanism.API)
                count += 1
            except MemoryEngineError as exc:  # LEGAL_HOLD
                refused.append(f"{memory.pk} ({exc.code})")
        self.message_user(request, f"Forgot {count} memory(ies).", messages.SUCCESS)
        if refused:
            self.message_user(request, f"Not forgotten: {', '.join(refused)}.", messages.WARNING)

    def get_urls(self) -> list[Any]:
        view = self.admin_site.admin_view(self.superseded_view)
        trash = self.admin_site.admin_view(self.trash_view)
        return [path("superseded/", view, name="memory_engine_memory_superseded"),
                path("trash/", trash, name="memory_engine_memory_trash"), *super().get_urls()]

    def trash_view(self, request: HttpRequest) -> HttpResponse:
        changelist = TrashedMemoryAdmin(Memory, self.admin_site)
        return changelist.changelist_view(request, extra_context={"title": "Trash: forgotten memories"})

    def superseded_view(self, request: HttpRequest) -> HttpResponse:
        changelist = SupersededMemoryAdmin(Memory, self.admin_site)
        return changelist.changelist_view(request, extra_context={"title": "Superseded facts: old → new"})

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "",
                    extra_context: dict[str, Any] | None = None) -> HttpResponse:
        memory = self.get_object(request, object_id)
        extra = dict(extra_context or {})
        if memory is not None:
            extra["timeline"] = timeline(memory)
            extra["why"] = memory_why(memory)
            extra["content_sharers"] = list(
                Memory.objects.filter(content_id=memory.content_id).exclude(pk=memory.pk)
                .select_related("store").order_by("created_at")[:50]
            )
            extra["assertions"] = list(memory.assertions.order_by("-created_at")[:50])
        return super().change_view(request, object_id, form_url, extra_context=extra)

    @admin.display(description="text")
    def text_preview(self, obj: Memory) -> str:
        return obj.content.text[:100]

    @admin.display(description="text")
    def text(self, obj: Memory) -> str:
        return obj.content.text

    @admin.display(description="superseded by")
    def successor(self, obj: Memory) -> str:
        return admin_link(obj.superseded_by)

    @admin.display(description="supersedes")
    def predecessors(self, obj: Memory) -> str:
        return format_html_join(" ", "{}", ((admin_link(m),) for m in obj.supersedes.all())) or "-"

    @admin.display(description="earlier wordings")
    def revisions(self, obj: Memory) -> str:
        """The wordings a restatement replaced, newest first (kept by the write funnel)."""
        rows = obj.revisions.select_related("content").defer("content__embedding").order_by("-created_at")[:50]
        return format_html_join(
            "", "<p><small>{}</small><br>{}</p>", ((f"{r.created_at:%Y-%m-%d %H:%M}", r.content.text) for r in rows)
        ) or "-"


class TrashedMemoryAdmin(MemoryAdmin):
    """Not registered: served by MemoryAdmin at ``memory/trash/``. Forgotten agent and
    institutional memories until the sweep purges them; the Restore action brings them back."""

    list_display = ["id", "text_preview", "store", "trashed_at", "restorable_until"]
    list_filter = ["store__project", "store"]
    date_hierarchy = "trashed_at"
    ordering = ["-trashed_at"]
    actions = ["restore"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Memory]:
        return super().get_queryset(request).filter(trashed_at__isnull=False)

    def get_urls(self) -> list[Any]:
        return []

    def has_restore_permission(self, request: Any) -> bool:
        return request.user.has_perm("memory_engine.delete_memory")

    @admin.display(description="restorable until")
    def restorable_until(self, obj: Memory) -> str:
        until = restorable_until(obj)
        return f"{until:%Y-%m-%d %H:%M}" if until else "-"

    @admin.action(description="Restore the selected memories (recorded as assertions)", permissions=["restore"])
    def restore(self, request: Any, queryset: QuerySet[Memory]) -> None:
        self.require_grant(request, FORGET, queryset)
        restored, refused = 0, []
        for memory in queryset:
            try:
                memory_restore(memory=memory, principal=admin_caller(request).label,
                               mechanism=Mechanism.API)
                restored += 1
            except MemoryEngineError as exc:
                refused.append(f"{memory.pk} ({exc.code})")
        self.message_user(request, f"Restored {restored} memory(ies).", messages.SUCCESS)
        if refused:
            self.message_user(request, f"Not restored: {', '.join(refused)}.", messages.WARNING)


class DoorFilter(admin.SimpleListFilter):
    """The door (mechanism) of the write that retired the memory."""

    title = "door"
    parameter_name = "door"

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, str]]:
        return list(Mechanism.choices)

    def queryset(self, request: Any, queryset: Any) -> Any:
        return queryset.filter(retired_door=self.value()) if self.value() else queryset


if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

    class _Retirement(TypedDict):
        successor_text: str
        retired_similarity: float | None
        retired_door: str | None
        retired_reason: str | None

    #: A memory as SupersededMemoryAdmin.get_queryset annotates it.
    RetiredMemory = WithAnnotations[Memory, _Retirement]


class SupersededMemoryAdmin(MemoryAdmin):
    """Not registered: served by MemoryAdmin at ``memory/superseded/``."""

    # Narrow enough for 1400 px with the navigation sidebar open: the texts link the two memories
    # (no id columns, which cannot wrap) and the time is "2026-12-06 03:48".
    list_display = ["old_text", "arrow", "new_text", "retiring_similarity", "retiring_reason", "door", "store",
                    "retired_at"]
    list_display_links = None
    list_filter = ["store", DoorFilter, "store__project"]
    date_hierarchy = "invalidated_at"
    list_select_related = ["content", "store", "superseded_by__content"]
    ordering = ["-invalidated_at"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Memory]:
        retiring = MemoryAssertion.objects.filter(replaced_memory=OuterRef("pk"), outcome=Outcome.SUPERSEDED) \
            .order_by("-created_at")
        return super().get_queryset(request).filter(superseded_by__isnull=False).annotate(
            retired_similarity=Subquery(retiring.values("similarity")[:1]),
            retired_reason=Subquery(retiring.values("decision_reason")[:1]),
            retired_door=Subquery(retiring.values("mechanism")[:1]),
            successor_text=F("superseded_by__content__text"),
        )

    def get_urls(self) -> list[Any]:
        return []

    @admin.display(description="old text (retired)", ordering="content__text")
    def old_text(self, obj: Memory) -> str:
        return format_html('<a href="{}" title="{}" style="text-decoration:line-through;color:#888">{}</a>',
                           reverse("admin:memory_engine_memory_change", args=[obj.pk]), obj.pk, obj.content.text)

    @admin.display(description="")
    def arrow(self, obj: Memory) -> str:
        return "→"

    @admin.display(description="new text")
    def new_text(self, obj: RetiredMemory) -> str:
        return format_html('<a href="{}" title="{}">{}</a>',
                           reverse("admin:memory_engine_memory_change", args=[obj.superseded_by_id]),
                           obj.superseded_by_id, obj.successor_text)

    @admin.display(description="retired", ordering="invalidated_at")
    def retired_at(self, obj: Memory) -> str:
        return f"{timezone.localtime(obj.invalidated_at):%Y-%m-%d %H:%M}" if obj.invalidated_at else "-"

    @admin.display(description="similarity", ordering="retired_similarity")
    def retiring_similarity(self, obj: RetiredMemory) -> str:
        return similarity_text(obj.retired_similarity)

    @admin.display(description="door", ordering="retired_door")
    def door(self, obj: RetiredMemory) -> str:
        return obj.retired_door or "-"

    @admin.display(description="reason", ordering="retired_reason")
    def retiring_reason(self, obj: RetiredMemory) -> str:
        return obj.retired_reason or "-"


@admin.register(MemoryAssertion)
class MemoryAssertionAdmin(ReadOnlyAdminMixin, ProjectScopedAdmin):
    """The append-only ledger, read-only."""

    project_path = "project"
    list_display = ["id", "outcome", "decision_reason", "similarity_display", "content_preview", "mechanism",
                    "principal", "store", "memory_link", "replaced_link", "generation_link", "rule_link",
                    "created_at"]
    list_filter = ["outcome", "mechanism", "decision_reason", "store__project", "store", "principal", "rule"]
    search_fields = ["content", "principal", "id", "memory__id", "generation__id"]
    date_hierarchy = "created_at"
    list_select_related = ["store", "memory", "replaced_memory", "generation", "rule"]
    ordering = ["-created_at"]
    readonly_fields = ("id", "store", "outcome", "decision_reason", "similarity", "content", "memory_link",
                       "replaced_link", "principal", "mechanism", "generation_link", "rule_link", "details",
                       "created_at")
    fields = readonly_fields

    @admin.display(description="similarity", ordering="similarity")
    def similarity_display(self, obj: MemoryAssertion) -> str:
        return similarity_text(obj.similarity)

    @admin.display(description="content")
    def content_preview(self, obj: MemoryAssertion) -> str:
        return obj.content[:80] + ("…" if len(obj.content) > 80 else "")

    @admin.display(description="memory")
    def memory_link(self, obj: MemoryAssertion) -> str:
        return admin_link(obj.memory)

    @admin.display(description="replaced")
    def replaced_link(self, obj: MemoryAssertion) -> str:
        return admin_link(obj.replaced_memory)

    @admin.display(description="generation")
    def generation_link(self, obj: MemoryAssertion) -> str:
        return admin_link(obj.generation) if obj.generation_id else "-"

    @admin.display(description="rule")
    def rule_link(self, obj: MemoryAssertion) -> str:
        return admin_link(obj.rule) if obj.rule_id else "-"
