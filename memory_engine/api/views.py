"""Thin DRF views: validate, call a service or selector, serialize."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Q, QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from drf_spectacular.views import SpectacularAPIView
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory_engine.exceptions import Conflict, EmbeddingFailed, UnknownMemoryStore
from memory_engine.models import Memory, MemoryAssertion, MemoryStore
from memory_engine.models.memories import Mechanism, SourceType
from memory_engine.providers.embeddings import EmbeddingError, require_embedding_provider
from memory_engine.services.memory_write import memory_forget, memory_write
from memory_engine.services.stores import memory_store_delete

from . import serializers as s
from .filters import MemoryAssertionFilter, MemoryFilter
from .schema import SCHEMA_SETTINGS
from .scoping import ProjectScopedMixin

ERRORS = {
    400: OpenApiResponse(s.ErrorSerializer, description="Invalid input"),
    401: OpenApiResponse(s.ErrorSerializer, description="Missing or invalid key"),
    403: OpenApiResponse(s.ErrorSerializer, description="Read-only key"),
    404: OpenApiResponse(s.ErrorSerializer, description="Not found in your project"),
}


@extend_schema_view(
    list=extend_schema(responses={200: s.MemoryStoreSerializer(many=True), **ERRORS}),
    create=extend_schema(responses={201: s.MemoryStoreSerializer, **ERRORS}),
    retrieve=extend_schema(responses={200: s.MemoryStoreSerializer, **ERRORS}),
    update=extend_schema(responses={200: s.MemoryStoreSerializer, **ERRORS}),
    partial_update=extend_schema(responses={200: s.MemoryStoreSerializer, **ERRORS}),
    destroy=extend_schema(responses={204: None, **ERRORS}),
)
class MemoryStoreViewSet(ProjectScopedMixin, viewsets.ModelViewSet):
    """Memory stores of your project, with their dedup thresholds."""

    queryset = MemoryStore.objects.none()  # for the schema generator; requests use get_queryset
    serializer_class = s.MemoryStoreSerializer
    filterset_fields: list[str] = []

    def get_queryset(self) -> QuerySet[MemoryStore]:
        return (
            MemoryStore.objects.filter(project=self.project)
            .annotate(valid_memories=Count("memories", filter=Q(memories__invalidated_at__isnull=True)))
            .order_by("created_at", "id")
        )

    def _check_name(self, name: str | None, exclude: str | None = None) -> None:
        if name and MemoryStore.objects.filter(project=self.project, name=name).exclude(pk=exclude).exists():
            raise Conflict(f"A memory store named {name!r} already exists.", code="NAME_TAKEN",
                           details={"name": name})

    def perform_create(self, serializer: Any) -> None:
        self._check_name(serializer.validated_data.get("name"))
        store = serializer.save(project=self.project)
        store.valid_memories = 0  # the list/retrieve annotation, for the 201 answer

    def perform_update(self, serializer: Any) -> None:
        self._check_name(serializer.validated_data.get("name"), exclude=serializer.instance.pk)
        serializer.save()

    def perform_destroy(self, instance: MemoryStore) -> None:
        memory_store_delete(store=instance)


@extend_schema_view(
    list=extend_schema(responses={200: s.MemorySerializer(many=True), **ERRORS}),
    retrieve=extend_schema(
        responses={200: s.MemorySerializer, **ERRORS},
        description="Any memory of your project, invalidated ones included.",
    ),
    destroy=extend_schema(
        responses={204: None, **ERRORS},
        description="Forget: invalidates the memory and records an assertion with outcome `forgotten`.",
    ),
)
class MemoryViewSet(ProjectScopedMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                    mixins.DestroyModelMixin, viewsets.GenericViewSet):
    """Write facts through the funnel; list valid memories; read any memory by id."""

    queryset = Memory.objects.none()
    serializer_class = s.MemorySerializer
    filterset_class = MemoryFilter

    def get_queryset(self) -> QuerySet[Memory]:
        return Memory.objects.filter(store__project=self.project).select_related("content").order_by(
            "created_at", "id"
        )

    def filter_queryset(self, queryset: QuerySet[Memory]) -> QuerySet[Memory]:
        # List filters (valid-only by default) never hide a memory read or forgotten by id.
        return super().filter_queryset(queryset) if self.action == "list" else queryset

    @extend_schema(
        request=s.MemoryWriteSerializer,
        responses={
            201: OpenApiResponse(s.MemoryWriteResultSerializer, description="created or superseded"),
            200: OpenApiResponse(s.MemoryWriteResultSerializer, description="skipped (a duplicate)"),
            429: OpenApiResponse(s.ErrorSerializer, description="Quota exceeded"),
            **ERRORS,
        },
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        serializer = s.MemoryWriteSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        store = MemoryStore.objects.filter(project=self.project, pk=data["memory_store_id"]).first()
        if store is None:
            raise UnknownMemoryStore(details={"memory_store_id": data["memory_store_id"]})
        metadata = dict(data.get("metadata") or {})
        source_type = SourceType.MANUAL
        if data.get("conversation_id"):
            metadata["conversation_id"] = data["conversation_id"]
            source_type = SourceType.CONVERSATION
        result = memory_write(
            store=store,
            content=data["content"],
            tags=data.get("tags"),
            metadata=metadata,
            source_type=source_type,
            duplicate_threshold=data.get("duplicate_threshold"),
            supersede_threshold=data.get("supersede_threshold"),
            about=data.get("about"),
            principal=self.principal,
            mechanism=Mechanism.API,
        )
        code = status.HTTP_200_OK if result.action == "skipped" else status.HTTP_201_CREATED
        return Response(s.write_result_data(result), status=code)

    def perform_destroy(self, instance: Memory) -> None:
        memory_forget(memory=instance, principal=self.principal, mechanism=Mechanism.API)

    @extend_schema(responses={200: s.MemoryAssertionSerializer(many=True), **ERRORS}, filters=False)
    @action(detail=True, methods=["get"], filterset_class=None)
    def assertions(self, request: Request, pk: str | None = None) -> Response:
        """The ledger rows that created, kept or retired this memory."""
        memory = self.get_object()
        queryset = MemoryAssertion.objects.filter(
            Q(memory=memory) | Q(replaced_memory=memory), store__project=self.project
        ).order_by("created_at", "id")
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(s.MemoryAssertionSerializer(page, many=True).data)


@extend_schema_view(
    list=extend_schema(responses={200: s.MemoryAssertionSerializer(many=True), **ERRORS}),
    retrieve=extend_schema(responses={200: s.MemoryAssertionSerializer, **ERRORS}),
)
class MemoryAssertionViewSet(ProjectScopedMixin, viewsets.ReadOnlyModelViewSet):
    """The append-only ledger: one row per write attempt, skips included."""

    queryset = MemoryAssertion.objects.none()
    serializer_class = s.MemoryAssertionSerializer
    filterset_class = MemoryAssertionFilter

    def get_queryset(self) -> QuerySet[MemoryAssertion]:
        return MemoryAssertion.objects.filter(store__project=self.project).order_by("created_at", "id")


class EmbeddingsView(ProjectScopedMixin, APIView):
    """The deployment's embedding model, OpenAI-style."""

    read_only_key_allowed = True
    session_permissions: list[str] | None = []  # reads no rows

    @extend_schema(
        request=s.EmbeddingRequestSerializer,
        responses={200: s.EmbeddingResponseSerializer, 503: s.ErrorSerializer, **ERRORS},
    )
    def post(self, request: Request) -> Response:
        self.project  # noqa: B018  (resolves and checks the project for staff sessions)
        serializer = s.EmbeddingRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        provider = require_embedding_provider()
        texts = serializer.validated_data["input"]
        try:
            vectors = provider.embed_documents(texts)
        except EmbeddingError as exc:
            raise EmbeddingFailed(f"The embedding provider failed: {exc}") from exc
        return Response({
            "object": "list",
            "data": [{"object": "embedding", "embedding": v, "index": i} for i, v in enumerate(vectors)],
            "model": provider.model_name,
        })


__all__ = ["EmbeddingsView", "MemoryAssertionViewSet", "MemoryStoreViewSet", "MemoryViewSet"]


class SchemaView(SpectacularAPIView):
    """/api/schema/: the app's OpenAPI schema with its own title, version and split request
    components, whatever the host's SPECTACULAR_SETTINGS; not listed in itself."""

    custom_settings = SCHEMA_SETTINGS

    @extend_schema(exclude=True)
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)
