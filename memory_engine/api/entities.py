"""The entity graph over HTTP (docs/entities.md): list and find entities, read one with its
edges and the memories and chunks that mention it, merge entities. Thin views over
memory_engine.selectors.entities and memory_engine.services.entities."""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from memory_engine import strict
from memory_engine.exceptions import EntityNotFound
from memory_engine.models import Chunk, Entity, EntityEdge, Memory
from memory_engine.models.entities import EntityKind, Relation
from memory_engine.policy import ADD, SEARCH, reach, require
from memory_engine.selectors.entities import (
    entities_as_seen,
    entities_visible,
    entity_detail,
    entity_get,
    entity_search,
)
from memory_engine.services.entities import entity_merge
from memory_engine.text import text_preview

from .exceptions import ERRORS
from .scoping import ProjectScopedMixin, request_caller

#: A chunk's or memory's text in an entity's detail is cut to this many UTF-8 bytes.
PREVIEW_BYTES = 500


class EntitySerializer(serializers.ModelSerializer):
    kind = serializers.ChoiceField(choices=EntityKind.choices)
    aliases = serializers.ListField(child=serializers.CharField(),
                                    help_text="The keys of its other names (merged entities, similar names).")

    class Meta:
        model = Entity
        fields = ["id", "name", "kind", "key", "aliases", "created_at", "updated_at"]
        read_only_fields = fields


class EntityEdgeSerializer(serializers.ModelSerializer):
    relation = serializers.ChoiceField(choices=Relation.choices)
    entity_id = serializers.CharField(help_text="The edge's entity (the subject of `involves`).")
    entity_name = serializers.CharField(source="entity.name")
    other_id = serializers.CharField(allow_null=True, help_text="`involves`: the other entity.")
    other_name = serializers.CharField(source="other.name", allow_null=True, default=None)
    memory_id = serializers.CharField(allow_null=True)
    chunk_id = serializers.CharField(allow_null=True)

    class Meta:
        model = EntityEdge
        fields = ["id", "relation", "entity_id", "entity_name", "other_id", "other_name", "memory_id", "chunk_id",
                  "attribute", "value", "extractor", "valid_at", "invalid_at"]
        read_only_fields = fields


class EntityMemorySerializer(serializers.Serializer):
    id = serializers.CharField()
    memory_store_id = serializers.CharField(source="store_id")
    content_preview = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()

    def get_content_preview(self, memory: Memory) -> str:
        return text_preview(memory.content.text, PREVIEW_BYTES)[0]


class EntityChunkSerializer(serializers.Serializer):
    id = serializers.CharField()
    document_id = serializers.CharField()
    document_path = serializers.CharField(source="document.path")
    chunk_index = serializers.IntegerField()
    page = serializers.IntegerField(allow_null=True)
    text_preview = serializers.SerializerMethodField()

    def get_text_preview(self, chunk: Chunk) -> str:
        return text_preview(chunk.text, PREVIEW_BYTES)[0]


class EntityDetailSerializer(EntitySerializer):
    edges = EntityEdgeSerializer(many=True, help_text="Its edges both ways, valid and retired, newest first "
                                                      "(at most 100): only those of memories and chunks you may see.")
    memories = EntityMemorySerializer(many=True, help_text="Live memories you may see that mention it, newest first "
                                                           "(at most 100).")
    chunks = EntityChunkSerializer(many=True, help_text="Live chunks you may see that mention it (at most 100).")

    class Meta(EntitySerializer.Meta):
        fields = [*EntitySerializer.Meta.fields, "edges", "memories", "chunks"]
        read_only_fields = fields


class EntityMergeSerializer(strict.Serializer):
    entity_ids = serializers.ListField(child=serializers.CharField(max_length=40), min_length=1, max_length=100,
                                       help_text="The entities merged into this one (deleted; their names become "
                                                 "its aliases, their edges its edges).")


class EntityFilter(django_filters.FilterSet):
    q = django_filters.CharFilter(method="search", help_text="A name, or a part of one (case-insensitive); an "
                                                               "alias matches whole. With grants: as written in a "
                                                               "memory or chunk you may see that mentions it.")
    kind = django_filters.ChoiceFilter(choices=EntityKind.choices)

    class Meta:
        model = Entity
        fields = ["kind"]

    def search(self, queryset: QuerySet[Entity], name: str, value: str) -> QuerySet[Entity]:
        return entity_search(queryset, q=value, tags=reach(request_caller(self.request), SEARCH))


@extend_schema_view(
    list=extend_schema(responses={200: EntitySerializer(many=True), **ERRORS}),
    retrieve=extend_schema(responses={200: EntityDetailSerializer, **ERRORS}),
)
class EntityViewSet(ProjectScopedMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """The people, organisations, places, products, dates and other named things your memories
    and documents mention. You see an entity through the memories and chunks you may see that
    mention it; narrowed by grants, as they state it (its names and dates from them only)."""

    queryset = Entity.objects.none()  # for the schema and staff permissions; get_queryset scopes
    serializer_class = EntitySerializer
    filterset_class = EntityFilter
    not_found_error = EntityNotFound

    def get_queryset(self) -> QuerySet[Entity]:
        return entities_visible(caller=self.caller, project=self.project, action=self.detail_action)

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        queryset = self.filter_queryset(self.get_queryset())
        page = self.paginate_queryset(queryset)
        rows = entities_as_seen(caller=self.caller, entities=queryset if page is None else page)
        data = EntitySerializer(rows, many=True).data
        return self.get_paginated_response(data) if page is not None else Response(data)

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        entity = entity_get(caller=self.caller, project=self.project, entity_id=kwargs.get("pk"))
        detail = entity_detail(caller=self.caller, entity=entity)
        data = {**EntitySerializer(detail.entity).data, "edges": EntityEdgeSerializer(detail.edges, many=True).data,
                "memories": EntityMemorySerializer(detail.memories, many=True).data,
                "chunks": EntityChunkSerializer(detail.chunks, many=True).data}
        return Response(data)

    @extend_schema(request=EntityMergeSerializer, responses={200: EntitySerializer, **ERRORS})
    @action(detail=True, methods=["post"], session_permissions=["change_entity", "delete_entity"])
    def merge(self, request: Request, pk: str | None = None) -> Response:
        """Merge `entity_ids` into this entity. Every entity named must be one you see, and you need
        `add` on a store or document that mentions each (a key without grants may merge any)."""
        body = EntityMergeSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        target = entity_get(caller=self.caller, project=self.project, entity_id=pk, action=None)
        sources = [entity_get(caller=self.caller, project=self.project, entity_id=entity_id, action=None)
                   for entity_id in dict.fromkeys(body.validated_data["entity_ids"])]
        for entity in (target, *sources):
            require(self.caller, ADD, entity)
        merged = entity_merge(target=target, sources=sources)
        return Response(EntitySerializer(entities_as_seen(caller=self.caller, entities=[merged])[0]).data)
