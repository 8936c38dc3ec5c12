"""The arguments of the agent tools, checked as strictly as every request body (memory_engine.strict):
what the model may pass and what the host pins beside it. The REST tool endpoints, the MCP server
and the runners share these; ``POST /api/v1/memories`` shares the memory fields."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from memory_engine import strict
from memory_engine.consent_categories import ConsentCategory
from memory_engine.exceptions import ThresholdsNotAllowed
from memory_engine.models import Lineage, Provenance
from memory_engine.models.memories import MEMORY_KIND_MAX_CHARS, MEMORY_TITLE_MAX_CHARS
from memory_engine.services.memories import MemoryFields
from memory_engine.strict import JSONObjectField

__all__ = ["MEMORY_FIELDS", "AboutSerializer", "ForgetMemoryToolRequestSerializer", "HostPinsSerializer",
           "ListMemoriesToolRequestSerializer", "MemoryFieldsSerializer", "OpenMemoryToolRequestSerializer",
           "SearchToolRequestSerializer", "WriteMemoryToolSerializer", "validated"]


def validated(serializer_class: type[serializers.Serializer], arguments: Any) -> Any:
    """``arguments`` checked by ``serializer_class`` (DRF's ValidationError, or UNKNOWN_FIELD, when
    they do not pass; the REST and MCP doors answer both with the same error body)."""
    serializer = serializer_class(data=arguments)
    serializer.is_valid(raise_exception=True)
    return serializer


class AboutSerializer(strict.Serializer):
    kind = serializers.CharField(max_length=100)
    key = serializers.CharField(max_length=200)


class MemoryFieldsSerializer(strict.Serializer):
    """What every memory write may carry (POST /memories and the write_memory tool)."""

    tags = JSONObjectField(required=False)
    metadata = JSONObjectField(required=False)
    about = AboutSerializer(required=False, allow_null=True)
    kind = serializers.CharField(required=False, max_length=MEMORY_KIND_MAX_CHARS)
    title = serializers.CharField(required=False, allow_blank=True, max_length=MEMORY_TITLE_MAX_CHARS)
    summary = serializers.CharField(required=False, allow_blank=True)
    # range checked by the funnel (400 CONFIDENCE_INVALID); same for facet and expires_at
    confidence = serializers.FloatField(required=False, allow_null=True)
    facet = serializers.CharField(required=False, allow_null=True, allow_blank=True, trim_whitespace=False)
    expires_at = strict.AwareDateTimeField(required=False, allow_null=True)  # naive: refused by the funnel
    provenance = serializers.ChoiceField(
        choices=Provenance.choices, required=False, default=Provenance.UNKNOWN,
        help_text="stated (its writer says so) | inferred (a model read it out of something) | unknown.")
    lineage = serializers.ChoiceField(
        choices=Lineage.choices, required=False, default=Lineage.NATIVE,
        help_text="native (written here) | imported (brought from another system) | derived.")
    consent_category = serializers.ChoiceField(
        choices=ConsentCategory.choices, required=False, allow_null=True,
        help_text="What the memory holds about a person, as its writer sees it; the consent classifier may "
                  "raise it, never lower it (docs/memory.md, *Consent categories*).")

    def write_kwargs(self) -> dict[str, Any]:
        """The validated memory fields as ``memory_write`` keyword arguments."""
        data = self.validated_data
        return {name: data.get(name) for name in MEMORY_FIELDS}


#: The memory fields of a write, as memory_write names them (services.memories.MemoryFields).
MEMORY_FIELDS = tuple(MemoryFields.__annotations__)


class HostPinsSerializer(strict.Serializer):
    """What the host sets on a tool call beside the model's arguments; the model cannot change it."""

    subject = serializers.CharField(required=False, allow_null=True, allow_blank=True, trim_whitespace=False,
                                    help_text="Set by the host: the end user's external id (their store).")
    pinned_facet = serializers.CharField(required=False, allow_null=True, allow_blank=True, trim_whitespace=False,
                                         help_text="Set by the host: the facet the model cannot change.")

    def pins(self) -> tuple[str | None, str | None]:
        """(subject, pinned facet), None for each the host left out or blank."""
        data = self.validated_data
        return data.get("subject") or None, data.get("pinned_facet") or None


class SearchToolRequestSerializer(HostPinsSerializer):
    query = serializers.CharField(trim_whitespace=False)
    limit = serializers.IntegerField(required=False)
    facet = serializers.CharField(required=False, allow_null=True, allow_blank=True, trim_whitespace=False,
                                  help_text="The model's facet argument (a pinned_facet wins over it).")


class OpenMemoryToolRequestSerializer(HostPinsSerializer):
    id = serializers.CharField(max_length=40, help_text="The memory id (mem_…) from a search result.")


class ListMemoriesToolRequestSerializer(HostPinsSerializer):
    limit = serializers.IntegerField(required=False, help_text="How many memories to return, 1 to 50 (default 20).")
    kind = serializers.CharField(required=False, allow_blank=True, max_length=MEMORY_KIND_MAX_CHARS)
    facet = serializers.CharField(required=False, allow_null=True, allow_blank=True, trim_whitespace=False,
                                  help_text="The model's facet argument (a pinned_facet wins over it).")


class ForgetMemoryToolRequestSerializer(HostPinsSerializer):
    id = serializers.CharField(max_length=40, help_text="The memory id (mem_…) to forget.")


class WriteMemoryToolSerializer(MemoryFieldsSerializer, HostPinsSerializer):
    #: Refused with their own code below (the tool writes on the store's thresholds), not UNKNOWN_FIELD.
    also_known = frozenset({"duplicate_threshold", "supersede_threshold"})

    content = serializers.CharField(allow_blank=True, trim_whitespace=False)
    generation_id = serializers.CharField(required=False, allow_null=True, allow_blank=True, max_length=40)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        given = sorted({"duplicate_threshold", "supersede_threshold"} & set(self.initial_data or {}))
        if given:
            raise ThresholdsNotAllowed("The write_memory tool writes on the store's thresholds only.",
                                       details={"fields": given})
        return attrs
