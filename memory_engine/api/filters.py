"""List filters named after the wire fields (?memory_store_id=, ?outcome=, ...)."""

from __future__ import annotations

from datetime import datetime
from datetime import timezone as dt_timezone
from typing import Any

import django_filters
from django.db.models import Q, QuerySet

from memory_engine.exceptions import ValidationFailed
from memory_engine.models import Memory, MemoryAssertion

from .fields import parse_tags_param


class MemoryFilter(django_filters.FilterSet):
    memory_store_id = django_filters.CharFilter(field_name="store_id")
    tags = django_filters.CharFilter(method="filter_tags", help_text='JSON object, e.g. {"team": "a"}')
    include_invalidated = django_filters.BooleanFilter(method="filter_validity")
    source_type = django_filters.CharFilter()

    class Meta:
        model = Memory
        fields = ["memory_store_id", "tags", "include_invalidated", "source_type"]

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
            queryset = queryset.filter(invalidated_at__isnull=True)
        return queryset


class MemoryAssertionFilter(django_filters.FilterSet):
    memory_store_id = django_filters.CharFilter(field_name="store_id")
    memory_id = django_filters.CharFilter(method="filter_memory")
    outcome = django_filters.CharFilter()
    mechanism = django_filters.CharFilter()
    principal = django_filters.CharFilter()
    generation_id = django_filters.CharFilter(field_name="generation_id")
    rule_id = django_filters.CharFilter(field_name="rule_id")
    created_after = django_filters.IsoDateTimeFilter(method="filter_created")
    created_before = django_filters.IsoDateTimeFilter(method="filter_created")

    class Meta:
        model = MemoryAssertion
        fields: list[str] = []

    def filter_created(self, queryset: QuerySet, name: str, value: datetime | None) -> QuerySet:
        if value is None:
            return queryset
        try:  # PostgreSQL refuses UTC offsets over 15:59 that Python accepts
            value = value.astimezone(dt_timezone.utc)
        except OverflowError:
            raise ValidationFailed(f"`{name}` is out of range.", details={name: str(value)}) from None
        lookup = "created_at__gte" if name == "created_after" else "created_at__lt"
        return queryset.filter(**{lookup: value})

    def filter_memory(self, queryset: QuerySet, name: str, value: Any) -> QuerySet:
        return queryset.filter(Q(memory_id=value) | Q(replaced_memory_id=value))
