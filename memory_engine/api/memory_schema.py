"""``GET/PUT /api/v1/memory-schema``: the project's memory kinds and relation types."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory_engine import strict
from memory_engine.exceptions import SchemaInvalid
from memory_engine.models import MemorySchema
from memory_engine.services.memory_schema import memory_schema_of, memory_schema_save

from .exceptions import ERRORS, error_responses
from .scoping import ProjectScopedMixin


class SchemaEntrySerializer(strict.Serializer):
    name = serializers.CharField(help_text="1-100 lowercase ASCII letters, digits and _, starting with a letter.")
    display_name = serializers.CharField(required=False, help_text="At most 200 characters (default: the name).")
    description = serializers.CharField(required=False, allow_blank=True, help_text="At most 1000 characters.")


class MemorySchemaSerializer(strict.Serializer):
    # Documentation only: the service validates (SCHEMA_INVALID names the bad entry).
    kinds = SchemaEntrySerializer(many=True, required=False,
                                  help_text="The accepted memory kinds; empty: any kind is accepted.")
    relation_types = SchemaEntrySerializer(many=True, required=False)


class MemorySchemaView(ProjectScopedMixin, APIView):
    """The project's memory schema: which memory kinds writes may use, rendered into agents' tools."""

    project_wide_writes = True

    # Staff sessions need view_memoryschema to read it and change_memoryschema to replace it.
    queryset = MemorySchema.objects.none()

    @extend_schema(responses={200: MemorySchemaSerializer, **ERRORS})
    def get(self, request: Request) -> Response:
        """The schema; ``{"kinds": [], "relation_types": []}`` when the project has none."""
        return Response(memory_schema_of(self.project))

    @extend_schema(request=MemorySchemaSerializer,
                   responses={200: MemorySchemaSerializer, **ERRORS, **error_responses(SchemaInvalid)})
    def put(self, request: Request) -> Response:
        """Replace the schema (an omitted list is replaced by an empty one)."""
        data = request.data if isinstance(request.data, dict) else None
        if data is None:
            raise SchemaInvalid("The body must be an object {kinds, relation_types}.")
        strict.refuse_unknown(data, frozenset({"kinds", "relation_types", *strict.ALWAYS_KNOWN}))
        memory_schema_save(project=self.project, kinds=data.get("kinds"), relation_types=data.get("relation_types"))
        return Response(memory_schema_of(self.project))
