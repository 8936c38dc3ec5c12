"""Admin for resident distillers: what each read and wrote at its latest ticks, and tick now."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest
from django.utils.html import format_html_join

from memory_engine.exceptions import MemoryEngineError
from memory_engine.models import Distiller, DistillerRun
from memory_engine.policy import ADD
from memory_engine.selectors.distillers import run_errors_in_reach
from memory_engine.selectors.feed import shown_cursor
from memory_engine.services.distillers import COUNT_KEYS, distiller_fields, distiller_tick

from .scoping import ProjectScopedAdmin, ReadOnlyInlineMixin, admin_caller


class DistillerForm(forms.ModelForm):
    class Meta:
        model = Distiller
        fields = ["store", "document_paths", "tags", "prompt", "enabled"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        try:  # the service's checks (paths, tags, LLM_OVERRIDABLE for a prompt) as a form error
            data.update(distiller_fields(**{k: data[k] for k in ("document_paths", "tags", "prompt") if k in data}))
        except MemoryEngineError as exc:
            raise ValidationError(f"{exc.code}: {exc.message}") from None
        return data


class DistillerRunInline(ReadOnlyInlineMixin, admin.TabularInline):
    model = DistillerRun
    fields = ("started_at", "finished_at", "counts_summary", "errors_summary")
    readonly_fields = fields
    ordering = ["-started_at"]

    def get_queryset(self, request: HttpRequest) -> Any:
        # Errors name document versions and memories: only those the viewer may see are shown
        # (an inline is built per request, so the viewer can be kept on it).
        self.caller = admin_caller(request)
        return super().get_queryset(request)

    @admin.display(description="counts")
    def counts_summary(self, run: DistillerRun) -> str:
        return ", ".join(f"{key} {run.counts.get(key, 0)}" for key in COUNT_KEYS)

    @admin.display(description="errors")
    def errors_summary(self, run: DistillerRun) -> str:
        errors = run_errors_in_reach(self.caller, run.project_id, [run.errors])[0]
        return format_html_join("", "<div>{}</div>", ((json.dumps(e, sort_keys=True),) for e in errors[:10]))


@admin.register(Distiller)
class DistillerAdmin(ProjectScopedAdmin):
    form = DistillerForm
    list_display = ["id", "store", "enabled", "document_paths", "last_tick", "created_by", "created_at"]
    list_filter = ["enabled", "project"]
    search_fields = ["id", "store__name"]
    list_select_related = ["store"]
    readonly_fields = ["id", "project", "feed_cursor", "acting_as", "leased_until", "created_by", "created_at"]
    inlines = [DistillerRunInline]
    actions = ["tick_now"]

    @admin.display(description="cursor")
    def feed_cursor(self, obj: Distiller) -> str:
        return shown_cursor(obj.cursor, project_id=obj.project_id)  # the position stays on the server

    @admin.display(description="last tick")
    def last_tick(self, obj: Distiller) -> str:
        run = DistillerRun.objects.filter(project_id=obj.project_id, distiller=obj).first()
        if run is None:
            return "never"
        done = ", ".join(f"{key} {run.counts[key]}" for key in COUNT_KEYS if run.counts.get(key))
        return done or "nothing new"

    def save_model(self, request: HttpRequest, obj: Distiller, form: Any, change: bool) -> None:
        # A distiller reads and writes as the user who saved it (memory_engine.policy), checked
        # again at every tick.
        self.require_grant(request, ADD, [obj])
        caller = admin_caller(request)
        obj.project_id = obj.store.project_id
        obj.acting_as = caller.reference[:200]
        if not change:
            obj.created_by = caller.label[:200]
        super().save_model(request, obj, form, change)

    @admin.action(description="Tick now (read what is new and write its claims)", permissions=["change"])
    def tick_now(self, request: HttpRequest, queryset: Any) -> None:
        for distiller in queryset:
            self.require_grant(request, ADD, [distiller])
            run = distiller_tick(distiller_id=distiller.pk, project_id=distiller.project_id)
            if run is None:
                self.message_user(request, f"{distiller.pk}: disabled, or another tick is running.", messages.WARNING)
                continue
            counts = ", ".join(f"{key} {run.counts.get(key, 0)}" for key in COUNT_KEYS)
            level = messages.WARNING if run.errors else messages.SUCCESS
            errors = f"; {len(run.errors)} error(s), first: {run.errors[0].get('code')}" if run.errors else ""
            self.message_user(request, f"{distiller.pk}: {counts}{errors}", level)
