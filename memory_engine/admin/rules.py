"""Admin for memory rules and generations: per-rule counts and handler errors at a glance."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.widgets import FilteredSelectMultiple
from django.core.exceptions import ValidationError
from django.db.models import Prefetch
from django.http import HttpRequest, HttpResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from memory_engine.exceptions import LLMNotConfigured, MemoryEngineError
from memory_engine.models import Agent, Generation, MemoryRule
from memory_engine.policy import ADD
from memory_engine.redaction import SECRET_MASK, mask_handler_config, restore_masked_secrets
from memory_engine.services.rules import enqueue_rule_firing, is_pending, matching_rule_ids, validate_rule_handler

from .console import dry_run_view
from .memories import admin_link
from .scoping import ProjectScopedAdmin, ReadOnlyAdminMixin, TrustedForm, admin_caller, in_request_projects

COUNT_KEYS = ("created", "superseded", "skipped", "failed")


class MemoryRuleForm(TrustedForm):
    """Secrets in ``handler_config`` (``secret``, ``provider.API_KEY``) are shown masked and
    are write-only: the mask (or a blank) sent back keeps the stored value."""

    class Meta:
        model = MemoryRule
        fields = ["store", "on", "enabled", "source_agents", "handler_type", "handler_config"]
        help_texts = {"handler_config": f"Secrets show as {SECRET_MASK}; leave the mask to keep a secret, "
                                        "type a new value to replace it, remove the key to drop it."}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.initial["handler_config"] = mask_handler_config(self.instance.handler_config)

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if "handler_config" in data:
            data["handler_config"] = restore_masked_secrets(data["handler_config"], self.instance.handler_config)
        store = data.get("store")
        agents = data.get("source_agents")
        if store is not None and agents and any(a.project_id != store.project_id for a in agents):
            raise ValidationError("Source agents must belong to the store's project.")
        try:
            # Superusers may name any callable; other staff, like API keys, RULE_CALLABLE_PREFIXES.
            data["handler_config"] = validate_rule_handler(
                handler_type=data.get("handler_type", ""), config=data.get("handler_config") or {},
                trusted=self.trusted,
            )
        except MemoryEngineError as exc:
            raise ValidationError(f"{exc.code}: {exc.message}") from exc
        return data


@admin.register(MemoryRule)
class MemoryRuleAdmin(ProjectScopedAdmin):
    project_path = "project"
    form = MemoryRuleForm
    list_display = ["id", "store", "handler_type", "enabled", "on", "agents", "console_links", "created_at"]
    list_filter = ["enabled", "handler_type", "store__project"]
    search_fields = ["id", "store__name"]
    list_select_related = ["store"]
    readonly_fields = ["id", "created_at", "handler_config_masked"]

    def get_fields(self, request: Any, obj: Any = None) -> list[Any]:
        # The raw config (with its secrets) is a form field only for editors; readers see it masked.
        fields = [f for f in super().get_fields(request, obj) if f != "handler_config_masked"]
        if obj is not None and not self.has_change_permission(request, obj):
            return [("handler_config_masked" if f == "handler_config" else f) for f in fields]
        return fields

    @admin.display(description="handler config")
    def handler_config_masked(self, obj: MemoryRule) -> str:
        return json.dumps(mask_handler_config(obj.handler_config, redact_urls=True), indent=2, sort_keys=True)

    @admin.display(description="source agents")
    def agents(self, obj: MemoryRule) -> str:
        names = [a.name for a in obj.source_agents.all()]
        return ", ".join(names) if names else "all agents"

    def get_queryset(self, request: Any) -> Any:
        agents = in_request_projects(request, Agent.objects.all())
        return super().get_queryset(request).prefetch_related(Prefetch("source_agents", queryset=agents))

    def formfield_for_manytomany(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        # The admin offers no field for a many-to-many with its own table (MemoryRuleAgent, which
        # carries the project): the same two-list picker, over the agents this user may see.
        if db_field.name == "source_agents":
            kwargs.setdefault("queryset", self._choices(request, Agent))
            kwargs.setdefault("widget", FilteredSelectMultiple("source agents", is_stacked=False))
            kwargs.setdefault("required", False)
            return db_field.formfield(**kwargs)
        return super().formfield_for_manytomany(db_field, request, **kwargs)

    def save_model(self, request: HttpRequest, obj: MemoryRule, form: Any, change: bool) -> None:
        # A rule writes into its store as the user who saved it (memory_engine.policy), checked
        # again at every firing.
        self.require_grant(request, ADD, [obj])
        obj.acting_as = admin_caller(request).reference[:200]
        obj.project_id = obj.store.project_id
        super().save_model(request, obj, form, change)

    def get_urls(self) -> list[Any]:
        view = self.admin_site.admin_view(self.dry_run)
        return [path("<path:object_id>/dry-run/", view, name="memory_engine_memoryrule_dry_run"),
                *super().get_urls()]

    def dry_run(self, request: HttpRequest, object_id: str) -> HttpResponse:
        return dry_run_view(self, request, object_id)

    @admin.display(description="console")
    def console_links(self, obj: MemoryRule) -> str:
        assertions = reverse("admin:memory_engine_memoryassertion_changelist")
        return format_html('<a href="{}">dry run</a> · <a href="{}?rule__id__exact={}">assertions</a>',
                           reverse("admin:memory_engine_memoryrule_dry_run", args=[obj.pk]), assertions, obj.pk)


class ExtractionErrorFilter(admin.SimpleListFilter):
    title = "rule errors"
    parameter_name = "rule_errors"

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "With a rule error"), ("llm", LLMNotConfigured.code)]

    def queryset(self, request: Any, queryset: Any) -> Any:
        if self.value() == "yes":
            return queryset.filter(extraction__icontains='"code"')
        if self.value() == "llm":
            return queryset.filter(extraction__icontains=LLMNotConfigured.code)
        return queryset


@admin.register(Generation)
class GenerationAdmin(ReadOnlyAdminMixin, ProjectScopedAdmin):
    list_display = ["id", "agent", "project", "status", "rule_counts", "rule_errors", "assertions_link", "created_at",
                    "completed_at"]
    list_filter = ["status", ExtractionErrorFilter, "project", "agent"]
    search_fields = ["id", "agent__name", "output"]
    list_select_related = ["agent", "project"]
    date_hierarchy = "created_at"
    readonly_fields = ("id", "project", "agent", "status", "initiator_link", "started_by_rule", "input_messages",
                       "output", "extraction_table", "created_at", "completed_at")
    fields = readonly_fields
    actions = ["fire_rules"]
    deletable = True

    @admin.display(description="initiator")
    def initiator_link(self, obj: Generation) -> str:
        return admin_link(obj.initiator)

    @admin.display(description="assertions")
    def assertions_link(self, obj: Generation) -> str:
        return format_html('<a href="{}?generation={}">assertions</a>',
                           reverse("admin:memory_engine_memoryassertion_changelist"), obj.pk)

    @admin.display(description="rules: created/superseded/skipped/failed")
    def rule_counts(self, obj: Generation) -> str:
        entries = list((obj.extraction or {}).values())
        if not entries:
            return "-"
        totals = [sum(int(e.get(k) or 0) for e in entries if isinstance(e, dict)) for k in COUNT_KEYS]
        return f"{len(entries)} rule(s): " + "/".join(map(str, totals))

    @admin.display(description="rule errors")
    def rule_errors(self, obj: Generation) -> str:
        codes = sorted({
            e["error"].get("code", "?") for e in (obj.extraction or {}).values()
            if isinstance(e, dict) and isinstance(e.get("error"), dict)
        })
        if not codes:
            return "-"
        return format_html('<strong style="color:#ba2121">{}</strong>', ", ".join(codes))

    @admin.display(description="extraction (per rule)")
    def extraction_table(self, obj: Generation) -> str:
        extraction = obj.extraction or {}
        if not extraction:
            return "No rule has fired for this generation (yet)."
        rules = {r.pk: r for r in MemoryRule.objects.filter(pk__in=list(extraction)).select_related("store")}
        rows = []
        assertions = reverse("admin:memory_engine_memoryassertion_changelist")
        for rule_id, entry in extraction.items():
            entry = entry if isinstance(entry, dict) else {}
            error = entry.get("error") if isinstance(entry.get("error"), dict) else None
            rows.append((
                admin_link(rules.get(rule_id), rule_id) if rule_id in rules else rule_id,
                *(entry.get(k, 0) for k in COUNT_KEYS),
                (f"pending since {entry.get('enqueued_at')} (attempt {entry.get('attempts', 1)})"
                 if is_pending(entry) else f"{error.get('code')}: {error.get('message')}" if error else ""),
                format_html('<a href="{}?generation={}&amp;rule__id__exact={}">assertions</a>', assertions, obj.pk,
                            rule_id),
            ))
        header = "".join(f"<th>{h}</th>" for h in ("rule", *COUNT_KEYS, "error", ""))
        body = format_html_join(
            "", "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", rows)
        return format_html("<table><thead><tr>{}</tr></thead><tbody>{}</tbody></table>", mark_safe(header), body)

    def has_fire_rules_permission(self, request: Any) -> bool:
        # The same permission as completing a generation through the API (which fires the rules).
        return request.user.has_perm("memory_engine.change_generation")

    @admin.action(description="Run the matching memory rules again (in the background)", permissions=["fire_rules"])
    def fire_rules(self, request: Any, queryset: Any) -> None:
        enqueued = 0
        for generation in queryset:
            for rule_id in matching_rule_ids(generation=generation):
                enqueue_rule_firing(project_id=generation.project_id, rule_id=rule_id, generation_id=generation.pk)
                enqueued += 1
        self.message_user(request, f"Enqueued {enqueued} rule firing(s).", messages.SUCCESS)
