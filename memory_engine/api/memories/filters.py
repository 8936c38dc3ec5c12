"""The memory API's list filters: memories, stores and the assertion ledger."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import django_filters
from django.db.models import Q, QuerySet

from memory_engine.consent_categories import ConsentCategory
from memory_engine.exceptions import ValidationFailed
from memory_engine.facets import validate_facet
from memory_engine.models import Generation, Lineage, Memory, MemoryAssertion, MemoryRule, MemoryStore, Provenance
from memory_engine.models.memories import live_memory_q
from memory_engine.policy import visible
from memory_engine.selectors.memories import in_facet

from ..fields import parse_tags_param
from ..scoping import NonBlankFilter, ScopeIdFilter, request_caller, request_project


class MemoryFilter(django_filters.FilterSet):
    memory_store_id = ScopeIdFilter(param="memory_store_id", model=MemoryStore, field_name="store_id")
    tags = django_filters.CharFilter(method="filter_tags", help_text='JSON object, e.g. {"team": "a"}')
    include_invalidated = django_filters.BooleanFilter(
        method="filter_validity", help_text="Also superseded and trashed memories (never expired ones).")
    source_type = django_filters.CharFilter()
    provenance = django_filters.ChoiceFilter(choices=Provenance.choices)
    lineage = django_filters.ChoiceFilter(choices=Lineage.choices)
    consent_category = django_filters.ChoiceFilter(choices=ConsentCategory.choices)
    facet = django_filters.CharFilter(
        method="filter_facet", help_text="That facet's memories and the cross-cutting ones (no facet).")

    class Meta:
        model = Memory
        fields = ["memory_store_id", "tags", "include_invalidated", "source_type", "provenance", "lineage",
                  "consent_category", "facet"]

    def filter_facet(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return in_facet(queryset, validate_facet(value))

    def filter_tags(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        tags = parse_tags_param(value)
        if not tags:
            return queryset
        return queryset.filter(Q(tags__contains=tags) | Q(store__tags__contains=tags))

    def filter_validity(self, queryset: QuerySet, name: str, value: bool | None) -> QuerySet:
        return queryset  # applied in filter_queryset so the default (valid only) holds when absent

    def filter_queryset(self, queryset: QuerySet) -> QuerySet:
        queryset = super().filter_queryset(queryset)
        if not self.form.cleaned_data.get("include_invalidated"):
            queryset = queryset.filter(live_memory_q())
        return queryset


class LedgerMemoryFilter(ScopeIdFilter):
    """``?memory_id=``: a memory the caller may see, or one deleted since (a forgotten user-tier
    memory, an expired one) whose ledger rows it may see: the ledger outlives the row."""

    def known(self, request: Any, value: Any) -> bool:
        ledger = MemoryAssertion.objects.filter(Q(memory_id=value) | Q(replaced_memory_id=value),
                                                store__project=request_project(request))
        return super().known(request, value) or visible(request_caller(request), ledger).exists()


class MemoryStoreFilter(django_filters.FilterSet):
    name = NonBlankFilter(help_text="Only the store of this name (names are unique per project): find a store "
                                    "before creating it.")

    class Meta:
        model = MemoryStore
        fields = ["name"]


class MemoryAssertionFilter(django_filters.FilterSet):
    memory_store_id = ScopeIdFilter(param="memory_store_id", model=MemoryStore, field_name="store_id")
    memory_id = LedgerMemoryFilter(param="memory_id", model=Memory, project_path="store__project",
                              match=lambda rows, value: rows.filter(Q(memory_id=value) | Q(replaced_memory_id=value)))
    outcome = django_filters.CharFilter()
    mechanism = django_filters.CharFilter()
    principal = django_filters.CharFilter()
    generation_id = ScopeIdFilter(param="generation_id", model=Generation, field_name="generation_id")
    rule_id = ScopeIdFilter(param="rule_id", model=MemoryRule, project_path="store__project", field_name="rule_id")
    created_after = django_filters.IsoDateTimeFilter(method="filter_created")
    created_before = django_filters.IsoDateTimeFilter(method="filter_created")

    class Meta:
        model = MemoryAssertion
        fields: list[str] = []

    def filter_created(self, queryset: QuerySet, name: str, value: datetime | None) -> QuerySet:
        if value is None:
            return queryset
        try:  # PostgreSQL refuses UTC offsets over 15:59 that Python accepts
            value = value.astimezone(UTC)
        except OverflowError:
            raise ValidationFailed(f"`{name}` is out of range.", details={name: str(value)}) from None
        lookup = "created_at__gte" if name == "created_after" else "created_at__lt"
        return queryset.filter(**{lookup: value})
