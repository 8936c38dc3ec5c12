"""``GET /api/v1/timeline``: what came in lately (thin view over memory_engine.selectors.timeline)."""

from __future__ import annotations

from dataclasses import asdict

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory_engine import strict
from memory_engine.models import Document
from memory_engine.selectors.timeline import timeline

from .exceptions import ERRORS
from .scoping import ProjectScopedMixin

TIMELINE_MAX_LIMIT = 200


class TimelineQuerySerializer(strict.Serializer):
    also_known = frozenset({"project_id", "format"})  # a staff session's project; DRF's renderer switch
    limit = serializers.IntegerField(required=False, default=50, min_value=1, max_value=TIMELINE_MAX_LIMIT)
    before = serializers.DateTimeField(required=False, help_text="The `at` of the last event of the page before: "
                                                                 "the events captured earlier.")


class TimelineEventSerializer(serializers.Serializer):
    at = serializers.DateTimeField(help_text="When the document's active version was captured.")
    title = serializers.CharField()
    path = serializers.CharField()
    # `source` is also DRF's Field.source attribute, which the stubs type as a string.
    source = serializers.CharField(help_text="The capture's source: upload, or the by-ref source.")  # type: ignore[assignment]
    document_id = serializers.CharField()
    version_id = serializers.CharField(help_text="The active version.")
    principal_id = serializers.CharField(help_text="Who captured it.")


class TimelineSerializer(serializers.Serializer):
    events = TimelineEventSerializer(many=True)


class TimelineView(ProjectScopedMixin, APIView):
    """What came in lately: one event per document the caller may see, newest capture first."""

    queryset = Document.objects.none()  # staff sessions need view_document
    read_only_key_allowed = True

    @extend_schema(parameters=[TimelineQuerySerializer], responses={200: TimelineSerializer, **ERRORS})
    def get(self, request: Request) -> Response:
        query = TimelineQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        events = timeline(project=self.project, caller=self.caller, limit=query.validated_data["limit"],
                          before=query.validated_data.get("before"))
        return Response(TimelineSerializer({"events": [asdict(event) for event in events]}).data)


__all__ = ["TimelineView"]
