"""``POST /api/v1/embeddings``: the deployment's embedding model, OpenAI-style."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory_engine import strict
from memory_engine.exceptions import EmbeddingFailed
from memory_engine.providers.embeddings import EmbeddingError, require_embedding_provider

from .exceptions import ERRORS, ErrorSerializer
from .scoping import ProjectScopedMixin


class EmbeddingRequestSerializer(strict.Serializer):
    input = serializers.JSONField(help_text="A string or a list of up to 256 strings.")

    def validate_input(self, value: Any) -> list[str]:
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not items or not all(isinstance(v, str) for v in items):
            raise serializers.ValidationError("Must be a non-empty string or a list of strings.")
        if len(items) > 256:
            raise serializers.ValidationError("At most 256 inputs per request.")
        if any(len(v) > 32768 for v in items):
            raise serializers.ValidationError("Each input must be at most 32768 characters.")
        return items


class EmbeddingDataSerializer(strict.Serializer):
    object = serializers.CharField(default="embedding")
    embedding = serializers.ListField(child=serializers.FloatField())
    index = serializers.IntegerField()


class EmbeddingResponseSerializer(strict.Serializer):
    object = serializers.CharField(default="list")
    # A declared field named like Serializer.data is fine at runtime (the metaclass takes declared
    # fields off the class); the stubs cannot tell.
    data = EmbeddingDataSerializer(many=True)  # type: ignore[assignment]
    model = serializers.CharField()


class EmbeddingsView(ProjectScopedMixin, APIView):
    """The deployment's embedding model, OpenAI-style."""

    read_only_key_allowed = True
    session_permissions: list[str] | None = []  # reads no rows

    @extend_schema(
        request=EmbeddingRequestSerializer,
        responses={200: EmbeddingResponseSerializer, 503: ErrorSerializer, **ERRORS},
    )
    def post(self, request: Request) -> Response:
        self.project  # noqa: B018  (resolves and checks the project for staff sessions)
        serializer = EmbeddingRequestSerializer(data=request.data)
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
