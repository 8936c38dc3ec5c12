"""``POST /api/v1/embeddings``: the deployment's embedding model, OpenAI-style.

It takes the request an OpenAI client sends: ``input``; ``model``, accepted and ignored (a
deployment has one model, which the answer's ``model`` names); ``encoding_format`` ``float`` (the
default) or ``base64`` (each vector as the base64 of its little-endian float32 values, what the
official Python client asks for); ``dimensions``, accepted only when it is the model's own; ``user``,
accepted and ignored.
"""

from __future__ import annotations

import base64
from typing import Any

import numpy as np
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
    model = serializers.CharField(
        required=False, allow_blank=True, max_length=200,
        help_text="Accepted and ignored: the deployment has one model (the answer's `model`).")
    encoding_format = serializers.ChoiceField(
        choices=["float", "base64"], default="float",
        help_text="float: lists of numbers; base64: each vector as the base64 of its little-endian float32 values.")
    dimensions = serializers.IntegerField(
        required=False, min_value=1, help_text="Accepted only when it is the model's own dimension (no truncation).")
    user = serializers.CharField(required=False, allow_blank=True, max_length=256, help_text="Accepted and ignored.")

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
    embedding = serializers.JSONField(
        help_text="A list of numbers; with encoding_format base64, a string: the base64 of little-endian float32s.")
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
        data = serializer.validated_data
        dimensions = data.get("dimensions")
        if dimensions is not None and dimensions != provider.dimensions:
            raise serializers.ValidationError({"dimensions": [
                f"The deployment's model ({provider.model_name}) gives {provider.dimensions} dimensions; "
                f"leave `dimensions` out or send {provider.dimensions}."]})
        try:
            vectors = provider.embed_documents(data["input"])
        except EmbeddingError as exc:
            raise EmbeddingFailed(f"The embedding provider failed: {exc}") from exc
        encode = _base64 if data["encoding_format"] == "base64" else list
        return Response({
            "object": "list",
            "data": [{"object": "embedding", "embedding": encode(v), "index": i} for i, v in enumerate(vectors)],
            "model": provider.model_name,
        })


def _base64(vector: Any) -> str:
    """A vector as the base64 of its little-endian float32 values (OpenAI's ``encoding_format``)."""
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")
