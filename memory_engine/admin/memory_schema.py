"""Admin for a project's memory schema: the memory kinds and relation types it accepts."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from memory_engine.exceptions import MemoryEngineError
from memory_engine.models import MemorySchema
from memory_engine.services.memory_schema import memory_schema_save, validate_memory_schema

from .scoping import ProjectScopedAdmin

ENTRY_HELP = ('A JSON list of {"name": "preference", "display_name": "Preference", "description": "..."}; '
              "names are lowercase letters, digits and _.")


class MemorySchemaForm(forms.ModelForm):
    """Edits pass the API's checks (memory_engine.services.memory_schema): errors read
    ``SCHEMA_INVALID: kinds[1]: ...`` as the API answers them."""

    class Meta:
        model = MemorySchema
        fields = ["project", "kinds", "relation_types"]
        help_texts = {"kinds": f"{ENTRY_HELP} Empty: any kind is accepted. When kinds are declared, only "
                               "those are accepted: list the built-ins (fact, preference, observation, "
                               "instruction) you want to keep.",
                      "relation_types": ENTRY_HELP}

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        try:
            kinds, relation_types = validate_memory_schema(kinds=cleaned.get("kinds"),
                                                           relation_types=cleaned.get("relation_types"))
        except MemoryEngineError as exc:
            self.add_error(None, f"{exc.code}: {exc.message}")
        else:
            cleaned["kinds"], cleaned["relation_types"] = kinds, relation_types
        return cleaned


@admin.register(MemorySchema)
class MemorySchemaAdmin(ProjectScopedAdmin):
    form = MemorySchemaForm
    list_display = ["project", "kind_names", "updated_at"]
    list_filter = ["project"]
    readonly_fields = ["updated_at"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        # One schema per project: its project is chosen when it is made.
        return [*self.readonly_fields, "project"] if obj is not None else self.readonly_fields

    @admin.display(description="kinds")
    def kind_names(self, obj: MemorySchema) -> str:
        return ", ".join(k.get("name", "?") for k in obj.kinds if isinstance(k, dict)) or "(any)"

    def save_model(self, request: HttpRequest, obj: MemorySchema, form: Any, change: bool) -> None:
        saved = memory_schema_save(project=obj.project, kinds=obj.kinds, relation_types=obj.relation_types)
        obj.pk, obj.updated_at = saved.pk, saved.updated_at
