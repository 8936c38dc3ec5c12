"""Webhook subscriptions in the admin (docs/webhooks.md): created through the service (the URL
passes the outbound guard), each with its deliveries (status, HTTP code, attempt, next retry).
The signing secret is shown once, in the response to the request that created or rotated it
(never on the change page, never in a message)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.cache import patch_cache_control

from memory_engine.exceptions import MemoryEngineError
from memory_engine.models import FeedKind, WebhookDelivery, WebhookSubscription
from memory_engine.policy import Principal, unrestricted_only
from memory_engine.providers.http import redact_url
from memory_engine.selectors.feed import shown_cursor
from memory_engine.webhooks import webhook_create, webhook_rotate_secret

from .scoping import ProjectScopedAdmin, ReadOnlyInlineMixin, admin_caller


class WebhookForm(forms.ModelForm):
    #: Set per request by WebhookSubscriptionAdmin.get_form: who creates the subscription.
    caller: Principal
    created: WebhookSubscription
    url = forms.URLField(max_length=2000, assume_scheme="https")
    event_kinds = forms.MultipleChoiceField(choices=FeedKind.choices, required=False,
                                            widget=forms.CheckboxSelectMultiple, help_text="None checked: all.")

    class Meta:
        model = WebhookSubscription
        fields = ["project", "url", "event_kinds", "active"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.instance._state.adding and data.get("project") and data.get("url"):
            try:  # the subscription is made here, so a refused URL is a form error
                self.created = webhook_create(project=data["project"], url=data["url"],
                                              event_kinds=data.get("event_kinds"), caller=self.caller)
            except MemoryEngineError as exc:
                raise ValidationError(f"{exc.code}: {exc.message}") from None
        return data


class WebhookDeliveryInline(ReadOnlyInlineMixin, admin.TabularInline):
    model = WebhookDelivery
    fields = ("created_at", "status", "attempt", "http_status", "event_count", "error", "next_retry_at")
    readonly_fields = fields
    ordering = ["-created_at"]


@admin.register(WebhookSubscription)
class WebhookSubscriptionAdmin(ProjectScopedAdmin):
    form = WebhookForm
    list_display = ["url_redacted", "project", "active", "failures", "next_attempt_at", "created_at"]
    list_filter = ["project", "active"]
    search_fields = ["url", "id"]
    readonly_fields = ["id", "url_redacted", "feed_cursor", "failures", "next_attempt_at", "created_by", "created_at"]
    inlines = [WebhookDeliveryInline]
    actions = ["rotate_secret"]

    def get_fields(self, request: Any, obj: Any = None) -> list[Any]:
        # A URL may carry a token in its query string (?tok=): readers see it without, as rule
        # handlers' URLs (redaction.mask_handler_config); lists show it so to everyone.
        fields = [f for f in super().get_fields(request, obj) if f != "url_redacted"]
        if obj is not None and not self.has_change_permission(request, obj):
            return [("url_redacted" if f == "url" else f) for f in fields]
        return fields

    def get_search_fields(self, request: HttpRequest) -> Any:
        # Searching the URL would let a reader confirm a token a character at a time.
        return self.search_fields if self.has_change_permission(request) else ["id"]

    @admin.display(description="URL")
    def url_redacted(self, obj: WebhookSubscription) -> str:
        return redact_url(obj.url) if obj.url else ""

    @admin.display(description="cursor")
    def feed_cursor(self, obj: WebhookSubscription) -> str:
        return shown_cursor(obj.cursor, project_id=obj.project_id)  # the position stays on the server

    def get_form(self, request: Any, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change=change, **kwargs)
        return type(form.__name__, (form,), {"caller": admin_caller(request)})

    def get_queryset(self, request: HttpRequest) -> Any:
        return unrestricted_only(admin_caller(request), super().get_queryset(request))

    def has_add_permission(self, request: Any) -> bool:
        # The feed is project-wide: a staff user with grants may not follow all of it.
        return not admin_caller(request).restricted and super().has_add_permission(request)

    def _show_secrets(self, request: Any, rows: list[dict[str, Any]], title: str) -> HttpResponse:
        context = {**self.admin_site.each_context(request), "title": title, "opts": self.model._meta,
                   "secrets": rows}
        response = TemplateResponse(request, "admin/memory_engine/webhooksubscription/secret.html", context)
        patch_cache_control(response, no_store=True, private=True)
        return response

    def response_add(self, request: Any, obj: WebhookSubscription, post_url_continue: str | None = None
                     ) -> HttpResponse:
        return self._show_secrets(request, [{"subscription": obj, "secret": obj.secret}], "New webhook subscription")

    @admin.action(description="Rotate the signing secret (shown once)", permissions=["change"])
    def rotate_secret(self, request: Any, queryset: Any) -> HttpResponse:
        rows = [{"subscription": s, "secret": webhook_rotate_secret(subscription=s)} for s in queryset]
        return self._show_secrets(request, rows, "New signing secrets")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return [*self.readonly_fields, "project", "url"] if obj is not None else []

    def get_inlines(self, request: Any, obj: Any) -> Any:
        return self.inlines if obj is not None else []

    def save_model(self, request: Any, obj: WebhookSubscription, form: Any, change: bool) -> None:
        if change:
            obj.save(update_fields=["event_kinds", "active"])
            return
        created = form.created
        obj.__dict__.update({k: v for k, v in created.__dict__.items() if k != "_state"})
        obj._state.adding = False
