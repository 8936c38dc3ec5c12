"""The document list's filters (``?path_prefix=``, ``?status=``, ``?tags=`` ...)."""

from __future__ import annotations

import django_filters
from django.db.models import QuerySet

from memory_engine.models import Document

from ..fields import parse_tags_param
from .serializers import STATUS_HELP


class DocumentFilter(django_filters.FilterSet):
    path_prefix = django_filters.CharFilter(field_name="path", lookup_expr="startswith")
    status = django_filters.CharFilter(help_text=STATUS_HELP)
    content_type = django_filters.CharFilter()
    tags = django_filters.CharFilter(method="filter_tags", help_text='JSON object, e.g. {"team": "a"}')
    source = django_filters.CharFilter()
    external_ref = django_filters.CharFilter()

    class Meta:
        model = Document
        fields = ["path_prefix", "status", "content_type", "tags", "source", "external_ref"]

    def filter_tags(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        tags = parse_tags_param(value)
        return queryset.filter(tags__contains=tags) if tags else queryset
