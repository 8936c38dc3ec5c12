"""Admin for transform configs (create; immutable afterwards) and the replay runs they stage:
replay from a config, promote or demote a run. Actions call the same services as the command."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from memory_engine.exceptions import MemoryEngineError
from memory_engine.models import ReplayRun, TransformConfig
from memory_engine.models.documents import ChunkStrategy
from memory_engine.services.documents.replay import (
    generation_demote,
    generation_promote,
    replay_run,
    transform_config_create,
)

from .scoping import ProjectScopedAdmin


def admin_principal(request: HttpRequest) -> str:
    return f"user:{request.user.get_username()}"


class TransformConfigForm(forms.ModelForm):
    """Created through the service (version numbering, the same checks as the API)."""

    chunk_strategy = forms.ChoiceField(choices=[("", "(each document's own)"), *ChunkStrategy.choices],
                                       required=False)

    class Meta:
        model = TransformConfig
        fields = ["project", "name", "chunk_strategy", "chunk_size", "chunk_overlap", "max_chunks_per_document",
                  "embedding_provider", "embedding_model", "search"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in ("embedding_provider", "embedding_model"):
            if name not in self.fields:  # the change view: every field is read-only
                continue
            self.fields[name].required = False
            self.fields[name].help_text = "Blank: the deployment's active one (the only one accepted today)."

    def _post_clean(self) -> None:  # the service validates and numbers the version, not the model
        pass

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.errors or not self.instance._state.adding:
            return data
        try:
            self.instance = transform_config_create(
                project=data["project"], name=data.get("name") or "", chunk_strategy=data.get("chunk_strategy") or "",
                chunk_size=data.get("chunk_size"), chunk_overlap=data.get("chunk_overlap"),
                max_chunks_per_document=data.get("max_chunks_per_document"),
                embedding_provider=data.get("embedding_provider") or "",
                embedding_model=data.get("embedding_model") or "", search=data.get("search"),
                created_by=getattr(self, "principal", ""),
            )
        except MemoryEngineError as exc:
            raise forms.ValidationError(f"{exc.code}: {exc.message}") from exc
        return data


@admin.register(TransformConfig)
class TransformConfigAdmin(ProjectScopedAdmin):
    list_display = ["name", "version", "project", "chunk_strategy", "chunk_size", "embedding_model", "created_by",
                    "created_at"]
    list_filter = ["project", "name"]
    search_fields = ["name", "id"]
    form = TransformConfigForm
    actions = ["replay"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return ["version"]
        return [field.name for field in TransformConfig._meta.fields]  # immutable: a change is a new version

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change=change, **kwargs)
        form.principal = admin_principal(request)
        return form

    def save_model(self, request: HttpRequest, obj: TransformConfig, form: Any, change: bool) -> None:
        pass  # saved by the form's clean, through the service

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.action(description="Replay the raw capture under this config (a staged generation)",
                  permissions=["add_replayrun"])
    def replay(self, request: HttpRequest, queryset: QuerySet[TransformConfig]) -> None:
        for config in queryset:
            run = replay_run(config=config, started_by=admin_principal(request))
            if run.status == ReplayRun.Status.FAILED:
                error = run.error or {}
                self.message_user(request, f"{run.pk} failed: {error.get('code')}: {error.get('message')}",
                                  messages.ERROR)
            else:
                self.message_user(request, f"{run.pk} completed: {run.documents_done} document(s), "
                                           f"{run.chunks_total} chunk(s) staged under {config}.", messages.SUCCESS)

    def has_add_replayrun_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("memory_engine.add_replayrun"))


@admin.register(ReplayRun)
class ReplayRunAdmin(ProjectScopedAdmin):
    list_display = ["id", "config", "project", "status", "documents_done", "documents_total", "chunks_total",
                    "started_by", "started_at", "finished_at", "promoted_by", "demoted_by"]
    list_filter = ["status", "project"]
    search_fields = ["id"]
    actions = ["promote", "demote"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return [field.name for field in ReplayRun._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # a replay starts from a transform config (its action) or the command

    def _switch(self, request: HttpRequest, queryset: QuerySet[ReplayRun], switch: Any) -> None:
        for run in queryset:
            try:
                run = switch(run=run, by=admin_principal(request))
            except MemoryEngineError as exc:
                self.message_user(request, f"{run.pk}: {exc.code}: {exc.message}", messages.ERROR)
            else:
                self.message_user(request, f"{run.pk} {run.status}.", messages.SUCCESS)

    @admin.action(description="Promote the selected generation (make it live)", permissions=["change"])
    def promote(self, request: HttpRequest, queryset: QuerySet[ReplayRun]) -> None:
        self._switch(request, queryset, generation_promote)

    @admin.action(description="Demote the selected generation (restore the previous live one)",
                  permissions=["change"])
    def demote(self, request: HttpRequest, queryset: QuerySet[ReplayRun]) -> None:
        self._switch(request, queryset, generation_demote)
