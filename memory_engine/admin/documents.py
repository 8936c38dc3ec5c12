"""Admin for documents (why is this PDF not searchable?) and ingestion rules.

Uploads, re-ingests and rule edits go through the same services as the API.
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from memory_engine.exceptions import MemoryEngineError
from memory_engine.grants import ADD
from memory_engine.instruction_guard import Finding
from memory_engine.models import Chunk, Document, DocumentVersion, IngestionRule
from memory_engine.models.documents import ChunkStrategy, DocumentStatus
from memory_engine.policy import access_tags_write
from memory_engine.providers.http import redact_url
from memory_engine.redaction import converter_target, secret_state
from memory_engine.selectors.documents import version_diff, version_text
from memory_engine.services import reembed
from memory_engine.services.documents import (
    Lineage,
    Upload,
    chunking_label,
    document_create,
    document_delete,
    document_reingest,
)
from memory_engine.services.ingestion_rules import validate_rule

from .console import ingestion_rule_tester_view
from .erasure import ErasureAdmin
from .memories import admin_link
from .next_steps import NEXT_STEPS
from .retention import RETENTION_ACTIONS, RetentionActionsMixin, set_documents_retention
from .scoping import ProjectScopedAdmin, ReadOnlyInlineMixin, TrustedForm, admin_owner

STATUS_COLOURS: dict[str, str] = {
    DocumentStatus.PENDING: "#777",
    DocumentStatus.PROCESSING: "#1f6feb",
    DocumentStatus.READY: "#1a7f37",
    DocumentStatus.FAILED: "#cf222e",
}


def chunk_guard_verdict(chunk: Chunk) -> str:
    """What the instruction guard's stored finding says of a chunk at the read gate."""
    finding = Finding.stored(chunk.guard, (chunk.text,))
    if finding is None:
        return "not judged by the current guard yet (judged when read)"
    verdict = finding.verdict("read")
    if not verdict.blocked:
        return "passes"
    score = "" if verdict.score is None else f", score {verdict.score:.2f}"
    return f"withheld: {verdict.family} ({verdict.rule}{score})"


class ChunkInline(ReadOnlyInlineMixin, admin.TabularInline):
    model = Chunk
    fields = readonly_fields = ("chunk_index", "page", "text_preview", "embedded", "guard_verdict")
    show_change_link = False
    classes = ["collapse"]

    @admin.display(description="instruction guard")
    def guard_verdict(self, obj: Chunk) -> str:
        return chunk_guard_verdict(obj)

    @admin.display(description="text")
    def text_preview(self, obj: Chunk) -> str:
        return obj.text[:300] + ("…" if len(obj.text) > 300 else "")

    @admin.display(boolean=True)
    def embedded(self, obj: Chunk) -> bool:
        return obj.embedding is not None

    def get_queryset(self, request: Any) -> QuerySet[Chunk]:
        # The live chunks: a staged generation's are the replay run's, not the document's.
        return super().get_queryset(request).filter(generation__isnull=True).defer("embedding").order_by(
            "chunk_index")


class DocumentUploadForm(forms.ModelForm):
    """Upload through the admin: the same service (and checks) as POST /documents/ingest."""

    #: The admin user uploading (set per request by DocumentAdmin.get_form).
    user: Any = None
    upload = forms.FileField(help_text="The content type is sniffed from the bytes.")
    document_path = forms.CharField(required=False, label="Path", help_text="Default: /<file name>.")
    strategy = forms.ChoiceField(choices=[("", "default (recursive for text, else page)"), *ChunkStrategy.choices],
                                 required=False, label="Chunk strategy")
    size = forms.IntegerField(required=False, min_value=1, label="Chunk size")
    overlap = forms.IntegerField(required=False, min_value=0, label="Chunk overlap")
    password = forms.CharField(required=False, widget=forms.PasswordInput, help_text="For an encrypted PDF.")

    class Meta:
        model = Document
        fields = ["project", "title", "tags", "metadata"]

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if self.errors:
            return data
        file = data["upload"]
        try:
            self.created = document_create(
                project=data["project"],
                upload=Upload(file.read(), filename=file.name or "", declared_content_type=file.content_type),
                path=data.get("document_path") or None, title=data.get("title") or "",
                tags=data.get("tags") or {}, metadata=data.get("metadata") or {},
                chunk_strategy=data.get("strategy") or None, chunk_size=data.get("size"),
                chunk_overlap=data.get("overlap"), password=data.get("password") or None,
                lineage=Lineage(captured_by=f"user:{self.user.get_username()}" if self.user else "",
                                captured_by_kind=DocumentVersion.CapturedByKind.HUMAN),
            )
        except MemoryEngineError as exc:
            raise ValidationError(f"{exc.code}: {exc.message}") from exc
        return data


class ReingestForm(forms.Form):
    """Optional new chunk settings for "Re-ingest with new chunk settings"."""

    strategy = forms.ChoiceField(choices=[("", "keep"), *ChunkStrategy.choices], required=False,
                                 label="Chunk strategy")
    size = forms.IntegerField(required=False, min_value=1, label="Chunk size")
    overlap = forms.IntegerField(required=False, min_value=0, label="Chunk overlap")


@admin.register(Document)
class DocumentAdmin(RetentionActionsMixin, ErasureAdmin, ProjectScopedAdmin):
    list_display = ["path", "project", "status_badge", "progress", "error_code", "chunking", "rule",
                    "size_bytes", "created_at"]
    list_filter = ["status", "project", "content_type", "chunk_strategy"]
    search_fields = ["path", "title", "id", "sha256"]
    list_select_related = ["project", "ingestion_rule"]
    date_hierarchy = "created_at"
    actions = ["reingest", "reingest_with_settings", "reembed_missing", *RETENTION_ACTIONS]
    retention_setter = set_documents_retention
    inlines = [ChunkInline]
    readonly_fields = [
        "id", "project", "path", "content_type", "file", "original_filename", "size_bytes", "sha256",
        "status_badge", "progress", "error_explained", "chunking", "rule", "attempts", "heartbeat_at",
        "ingested_at", "created_at", "updated_at", "source", "external_ref", "last_seen_at", "version_history",
        "withheld_chunks",
    ]
    fieldsets = [  # ingestion first: "why is this PDF not searchable?"
        ("Ingestion", {"fields": ["path", "status_badge", "progress", "error_explained", "chunking", "rule",
                                  "attempts", "heartbeat_at", "ingested_at", "withheld_chunks"]}),
        (None, {"fields": ["id", "project", "title", "tags", "metadata"]}),
        ("File", {"fields": ["content_type", "file", "original_filename", "size_bytes", "sha256", "created_at",
                             "updated_at"]}),
        ("Source and versions", {"fields": ["source", "external_ref", "last_seen_at", "version_history"]}),
    ]

    @admin.display(description="withheld chunks")
    def withheld_chunks(self, obj: Document) -> str:
        """The live chunks the instruction guard keeps out of every read (they read as instructions
        to an AI), with the reason; a chunk not judged by the current guard yet says so."""
        rows = []
        for chunk in obj.chunks.filter(generation__isnull=True).defer("embedding").order_by("chunk_index"):
            verdict = chunk_guard_verdict(chunk)
            if verdict != "passes":
                rows.append((chunk.chunk_index, chunk.page or "-", verdict, chunk.text[:160]))
        if not rows:
            return "none: every chunk passes the instruction guard"
        return format_html("<ul>{}</ul>", format_html_join(
            "", "<li>chunk {} (page {}): {} — <q>{}</q></li>", rows))

    def get_form(self, request: Any, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        if obj is None:
            # The version records who captured it: a form class of this request's user.
            kwargs["form"] = type("DocumentUploadForm", (DocumentUploadForm,), {"user": request.user})
        return super().get_form(request, obj, change=change, **kwargs)

    def get_fieldsets(self, request: Any, obj: Any = None) -> Any:
        if obj is None:
            return [(None, {"fields": ["project", "upload", "document_path", "title", "tags", "metadata",
                                       "strategy", "size", "overlap", "password"]})]
        return self.fieldsets

    def get_readonly_fields(self, request: Any, obj: Any = None) -> Any:
        return [] if obj is None else self.readonly_fields

    def get_inlines(self, request: Any, obj: Any) -> Any:
        return self.inlines if obj is not None else []

    def save_model(self, request: Any, obj: Document, form: Any, change: bool) -> None:
        if change:
            self.require_grant(request, ADD, [obj])
            obj.save(update_fields=["title", "tags", "metadata", "updated_at"])
            return
        created = form.created  # made by DocumentUploadForm.clean through the service
        access_tags_write(obj=created, owner=admin_owner(request))
        obj.__dict__.update({k: v for k, v in created.__dict__.items() if k != "_state"})
        obj._state.adding = False

    def erase(self, request: HttpRequest, obj: Document) -> None:
        document_delete(document=obj)

    def get_urls(self) -> list[Any]:
        view = self.admin_site.admin_view(self.version_diff_view)
        return [path("<path:object_id>/versions/diff/", view, name="memory_engine_document_version_diff"),
                *super().get_urls()]

    @admin.display(description="versions")
    def version_history(self, obj: Document) -> str:
        versions = list(obj.versions.order_by("-number"))
        if not versions:
            return "-"
        diff_url = reverse("admin:memory_engine_document_version_diff", args=[obj.pk])
        rows = format_html_join("", "<tr><td>v{}</td><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td>"
                                    "<td>{} ({})</td><td>{}</td><td>{}</td></tr>", (
            (v.number, v.status, v.sha256[:12], v.provenance, v.source_class, v.captured_by or "-",
             v.captured_by_kind, v.created_at.strftime("%Y-%m-%d %H:%M:%S"),
             format_html('<a href="{}?a={}&amp;b={}">diff with v{}</a>', diff_url, older.pk, v.pk, older.number)
             if older is not None else "")
            for v, older in zip(versions, [*versions[1:], None], strict=True)))
        return format_html("<table><tr><th>version</th><th>status</th><th>sha256</th><th>provenance</th>"
                           "<th>lineage</th><th>captured by</th><th>captured at</th><th></th></tr>{}</table>", rows)

    def version_diff_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """A unified text diff between two versions of one document (``?a=<older>&b=<newer>``)."""
        document = self.get_object(request, object_id)
        if document is None or not self.has_view_permission(request, document):
            raise Http404("No such document.")
        versions = document.versions.select_related("raw_capture", "document")
        older = versions.filter(pk=request.GET.get("a", "")).first()
        newer = versions.filter(pk=request.GET.get("b", "")).first()
        if older is None or newer is None:
            raise Http404("Name two versions of this document: ?a=<version id>&b=<version id>.")
        context = {**self.admin_site.each_context(request), "title": f"{document.path}: v{older.number} → "
                   f"v{newer.number}", "opts": self.model._meta, "document": document, "older": older,
                   "newer": newer, "diff": version_diff(older, newer),
                   "binary": version_text(older) is None or version_text(newer) is None}
        return TemplateResponse(request, "admin/memory_engine/document/version_diff.html", context)

    @admin.display(description="status", ordering="status")
    def status_badge(self, obj: Document) -> str:
        return format_html('<b style="color:#fff;background:{};padding:1px 6px;border-radius:3px">{}</b>',
                           STATUS_COLOURS.get(obj.status, "#777"), obj.status)

    @admin.display(description="progress")
    def progress(self, obj: Document) -> str:
        text = f"{obj.indexed_chunks}/{obj.total_chunks}"
        if obj.unembedded_chunks:
            text += f" ({obj.unembedded_chunks} without vectors)"
        return text

    @admin.display(description="error")
    def error_code(self, obj: Document) -> str:
        return (obj.error or {}).get("code", "")

    @admin.display(description="error and next step")
    def error_explained(self, obj: Document) -> str:
        if not obj.error:
            return "-"
        code = obj.error.get("code", "")
        return format_html("<b>{}</b>: {}<br><i>Next:</i> {}<br><small>{}</small>", code, obj.error.get("message", ""),
                           NEXT_STEPS.get(code, "Fix the cause, then re-ingest."),
                           json.dumps(obj.error.get("details") or {}))

    @admin.display(description="chunking")
    def chunking(self, obj: Document) -> str:
        return chunking_label(obj.chunk_strategy, obj.chunk_size, obj.chunk_overlap)

    @admin.display(description="ingestion rule")
    def rule(self, obj: Document) -> str:
        return admin_link(obj.ingestion_rule, obj.ingestion_rule.content_type_glob) if obj.ingestion_rule else "-"

    @admin.action(description="Re-ingest the selected documents", permissions=["change"])
    def reingest(self, request: Any, queryset: QuerySet[Document]) -> None:
        self.require_grant(request, ADD, queryset)
        count = 0
        for document in queryset:
            document_reingest(document=document)
            count += 1
        self.message_user(request, f"{count} document(s) queued for re-ingestion.", messages.SUCCESS)

    @admin.action(description="Re-ingest the selected documents with new chunk settings…",
                  permissions=["change"])
    def reingest_with_settings(self, request: Any, queryset: QuerySet[Document]) -> Any:
        self.require_grant(request, ADD, queryset)
        form = ReingestForm(request.POST if "apply" in request.POST else None)
        if form.is_bound and form.is_valid():
            data = form.cleaned_data
            count = 0
            try:
                for document in queryset:
                    document_reingest(document=document, chunk_strategy=data["strategy"] or None,
                                      chunk_size=data["size"], chunk_overlap=data["overlap"])
                    count += 1
            except MemoryEngineError as exc:
                self.message_user(request, f"{exc.code}: {exc.message}", messages.ERROR)
                return None
            self.message_user(request, f"{count} document(s) queued for re-ingestion.", messages.SUCCESS)
            return None
        context = {**self.admin_site.each_context(request), "title": "Re-ingest with new chunk settings",
                   "opts": self.model._meta, "form": form, "documents": queryset,
                   "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME}
        return TemplateResponse(request, "admin/memory_engine/document/reingest.html", context)

    @admin.action(description="Re-embed missing vectors of the selected documents", permissions=["change"])
    def reembed_missing(self, request: Any, queryset: QuerySet[Document]) -> None:
        self.require_grant(request, ADD, queryset)
        report = reembed.reembed_missing(document_ids=list(queryset.values_list("pk", flat=True)))
        embedded, failed = sum(report.embedded.values()), sum(report.failed.values())
        level = messages.WARNING if failed else messages.SUCCESS
        self.message_user(request, f"{embedded} chunk vector(s) filled, {failed} failed.", level)


#: Form fields that only editors see (readers get ``converter_secret_state``).
WRITE_ONLY_FIELDS = ("new_converter_secret", "clear_converter_secret")


class IngestionRuleForm(TrustedForm):
    """The converter secret is write-only: never rendered back, blank keeps the stored one."""

    converter_url = forms.URLField(required=False, max_length=1000, assume_scheme="https")
    new_converter_secret = forms.CharField(
        required=False, max_length=200, label="Converter secret", strip=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Write-only: leave blank to keep the current secret.")
    clear_converter_secret = forms.BooleanField(required=False, label="Remove the converter secret")

    class Meta:
        model = IngestionRule
        fields = ["project", "name", "content_type_glob", "converter_type", "converter_path", "converter_url",
                  "new_converter_secret", "clear_converter_secret", "converter_timeout", "native_extraction",
                  "file_delivery", "chunk_strategy", "chunk_size", "chunk_overlap", "enabled"]

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if self.errors:
            return data
        new, clear = data.pop("new_converter_secret", ""), data.pop("clear_converter_secret", False)
        data["converter_secret"] = "" if clear else new or self.instance.converter_secret
        self.instance.converter_secret = data["converter_secret"]  # not a form field: set it here
        probe = IngestionRule(pk=self.instance.pk, **{k: v for k, v in data.items()})
        try:
            validate_rule(probe, trusted=self.trusted)  # only superusers may name any callable
        except MemoryEngineError as exc:
            raise ValidationError(f"{exc.code}: {exc.message}") from exc
        data["content_type_glob"] = probe.content_type_glob
        return data


@admin.register(IngestionRule)
class IngestionRuleAdmin(ProjectScopedAdmin):
    form = IngestionRuleForm
    list_display = ["content_type_glob", "project", "converter_type", "target", "native_extraction",
                    "file_delivery", "guard_policy", "enabled", "documents_count", "created_at"]
    list_filter = ["enabled", "converter_type", "project"]
    search_fields = ["content_type_glob", "name", "id", "converter_url", "converter_path"]
    list_select_related = ["project"]
    readonly_fields = ["id", "converter_secret_state", "converter_url_redacted", "created_at"]

    def get_fields(self, request: Any, obj: Any = None) -> list[Any]:
        fields = [f for f in super().get_fields(request, obj) if f != "converter_url_redacted"]
        if obj is not None and not self.has_change_permission(request, obj):
            # Readers get no write-only field and the URL without its query string (tokens).
            return [("converter_url_redacted" if f == "converter_url" else f) for f in fields
                    if f not in WRITE_ONLY_FIELDS]
        return fields

    @admin.display(description="converter secret")
    def converter_secret_state(self, obj: IngestionRule) -> str:
        return secret_state(obj.converter_secret)

    @admin.display(description="converter URL")
    def converter_url_redacted(self, obj: IngestionRule) -> str:
        return redact_url(obj.converter_url) if obj.converter_url else ""

    def get_urls(self) -> list[Any]:
        view = self.admin_site.admin_view(self.tester)
        return [path("tester/", view, name="memory_engine_ingestionrule_tester"), *super().get_urls()]

    def tester(self, request: HttpRequest) -> HttpResponse:
        return ingestion_rule_tester_view(self, request)

    @admin.display(description="converter")
    def target(self, obj: IngestionRule) -> str:
        return converter_target(obj)

    @admin.display(description="documents")
    def documents_count(self, obj: IngestionRule) -> int:
        return obj.documents.count()
