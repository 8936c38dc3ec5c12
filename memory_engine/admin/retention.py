"""Retention in the admin: erasure receipts (read-only, downloadable as JSON) and the
retention-class actions on memories and documents (an operator's decision)."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils.html import format_html

from memory_engine.exceptions import GrantRequired
from memory_engine.models import Document, ErasureReceipt, Memory, RetentionChange
from memory_engine.models.retention import RetentionClass
from memory_engine.policy import FORGET, receipts_visible
from memory_engine.services.retention import document_retention_set, memory_retention_set

from .scoping import ProjectScopedAdmin, ReadOnlyAdminMixin, admin_caller


def receipt_json(receipt: ErasureReceipt) -> dict[str, Any]:
    return {"id": receipt.pk, "project_id": receipt.project_id, "selector_kind": receipt.selector_kind,
            "selector_hmac": receipt.selector_hmac, "counts": receipt.counts, "ids": receipt.ids,
            "sha256": receipt.sha256, "principal": receipt.principal, "created_at": receipt.created_at.isoformat()}


@admin.register(ErasureReceipt)
class ErasureReceiptAdmin(ReadOnlyAdminMixin, ProjectScopedAdmin):
    """Erasure receipts, read-only: the proof of an erasure stays."""

    list_display = ["id", "project", "selector_kind", "principal", "created_at", "download"]
    list_filter = ["project", "selector_kind"]
    search_fields = ["id", "sha256", "principal"]
    readonly_fields = ("id", "project", "selector_kind", "selector_hmac", "counts", "ids", "sha256",
                       "principal", "created_at", "download")
    fields = readonly_fields

    def get_queryset(self, request: HttpRequest) -> Any:
        return receipts_visible(admin_caller(request), super().get_queryset(request))

    @admin.display(description="receipt")
    def download(self, obj: ErasureReceipt) -> str:
        return format_html('<a href="{}">JSON</a>',
                           reverse("admin:memory_engine_erasurereceipt_download", args=[obj.pk]))

    def get_urls(self) -> list[Any]:
        view = self.admin_site.admin_view(self.download_view)
        return [path("<str:receipt_id>/download/", view, name="memory_engine_erasurereceipt_download"),
                *super().get_urls()]

    def download_view(self, request: HttpRequest, receipt_id: str) -> HttpResponse:
        if not self.has_view_permission(request):
            return HttpResponse(status=403)
        receipt = get_object_or_404(self.get_queryset(request), pk=receipt_id)
        response = HttpResponse(json.dumps(receipt_json(receipt), indent=2), content_type="application/json")
        response["Content-Disposition"] = f'attachment; filename="{receipt.pk}.json"'
        return response


@admin.register(RetentionChange)
class RetentionChangeAdmin(ReadOnlyAdminMixin, ProjectScopedAdmin):
    """The retention ledger: who changed which row's retention class, legal holds set and released
    included. Read-only: it is append-only in the database too."""

    list_display = ["created_at", "kind", "object_id", "previous_class", "retention_class", "principal", "project"]
    list_filter = ["project", "kind", "retention_class", "previous_class"]
    search_fields = ["object_id", "parent_id", "principal"]
    readonly_fields = ("id", "project", "kind", "object_id", "parent_id", "previous_class", "retention_class",
                       "principal", "created_at")
    fields = readonly_fields


def set_memories_retention(request: Any, queryset: QuerySet[Memory], retention_class: str) -> int:
    for memory in queryset:
        memory_retention_set(memory=memory, retention_class=retention_class, caller=admin_caller(request))
    return queryset.count()


def set_documents_retention(request: Any, queryset: QuerySet[Document], retention_class: str) -> int:
    for document in queryset:
        document_retention_set(document=document, retention_class=retention_class, caller=admin_caller(request))
    return queryset.count()


class RetentionActionsMixin:
    """Admin actions that set the retention class of the selected rows (change permission)."""

    retention_setter: Any = None

    def has_retention_permission(self, request: Any) -> bool:
        model = self.model  # type: ignore[attr-defined]
        return request.user.has_perm(f"memory_engine.change_{model._meta.model_name}")

    def _set(self, request: Any, queryset: QuerySet[Any], retention_class: str) -> None:
        self.require_grant(request, FORGET, queryset)  # type: ignore[attr-defined]  # a class decides deletion
        try:
            with transaction.atomic():  # every selected row, or none
                count = type(self).retention_setter(request, queryset, retention_class)
        except GrantRequired:  # releasing a legal hold needs the hold action (memory_engine.policy)
            raise PermissionDenied from None
        self.message_user(request, f"{count} row(s) now {retention_class}.", messages.SUCCESS)  # type: ignore[attr-defined]

    @admin.action(description="Place on legal hold", permissions=["retention"])
    def place_legal_hold(self, request: Any, queryset: QuerySet[Any]) -> None:
        self._set(request, queryset, RetentionClass.LEGAL_HOLD)

    @admin.action(description="Release to durable", permissions=["retention"])
    def make_durable(self, request: Any, queryset: QuerySet[Any]) -> None:
        self._set(request, queryset, RetentionClass.DURABLE)

    @admin.action(description="Make ephemeral", permissions=["retention"])
    def make_ephemeral(self, request: Any, queryset: QuerySet[Any]) -> None:
        self._set(request, queryset, RetentionClass.EPHEMERAL)


RETENTION_ACTIONS = ["place_legal_hold", "make_durable", "make_ephemeral"]
