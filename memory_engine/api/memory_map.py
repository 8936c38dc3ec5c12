"""``GET /api/v1/memory-map?memory_store_id=``: a store's memories as points in 2-D, clustered
and labelled, sensitive ones masked (thin view over memory_engine.services.memory_map and
memory_engine.selectors.memory_map; docs/memory.md, *The memory map*)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory_engine import strict
from memory_engine.consent_categories import ConsentCategory
from memory_engine.models import MemoryMapStatus, MemoryStore
from memory_engine.policy import SEARCH
from memory_engine.selectors.memory_map import memory_map_answer
from memory_engine.services.memory_map import memory_map_request, recomputing

from .exceptions import ERRORS
from .scoping import ProjectScopedMixin, referenced_store


class MemoryMapQuerySerializer(strict.Serializer):
    also_known = frozenset({"project_id", "format"})  # a staff session's project; DRF's renderer switch
    memory_store_id = serializers.CharField(max_length=40, help_text="The store whose map is drawn.")


class MemoryMapPointSerializer(serializers.Serializer):
    x = serializers.FloatField(help_text="In [-1, 1].")
    y = serializers.FloatField(help_text="In [-1, 1].")
    cluster = serializers.IntegerField()
    consent_category = serializers.ChoiceField(choices=ConsentCategory.choices)
    masked = serializers.BooleanField(help_text="A sensitive memory (location, identity, health): no id, title "
                                                "or text, whoever asks.")
    withheld = serializers.BooleanField(required=False, help_text="Its text reads as instructions to an AI: "
                                                                  "no title or text.")
    id = serializers.CharField(required=False, help_text="Absent on a masked point.")
    title = serializers.CharField(required=False, allow_blank=True, help_text="Absent on a masked point.")
    text_preview = serializers.CharField(required=False, help_text="The text's beginning; absent on a masked point.")


class MemoryMapClusterSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    # `label` is also DRF's Field.label attribute, which the stubs type as a string.
    label = serializers.CharField(  # type: ignore[assignment]
        allow_blank=True, help_text="Its most characteristic words (of unmasked points only); empty when it has none.")
    size = serializers.IntegerField(help_text="Its points on this map, masked ones included.")


class MemoryMapSerializer(serializers.Serializer):
    memory_store_id = serializers.CharField()
    status = serializers.ChoiceField(choices=MemoryMapStatus.choices,
                                     help_text="ready (200), or pending / failed (202: a worker computes it).")
    computed_at = serializers.DateTimeField(allow_null=True)
    requested_at = serializers.DateTimeField(allow_null=True)
    stale = serializers.BooleanField(required=False, help_text="A newer map is being computed.")
    truncated = serializers.BooleanField(required=False, help_text="More live memories than MEMORY_MAP_MAX_POINTS: "
                                                                   "the newest are placed.")
    unplaced = serializers.IntegerField(required=False, help_text="Live memories without a place (no vector, or "
                                                                  "left out of a truncated map).")
    method = serializers.DictField(required=False, help_text="How the map was computed (projection, clusters).")
    points = MemoryMapPointSerializer(many=True, required=False)
    clusters = MemoryMapClusterSerializer(many=True, required=False)


class MemoryMapView(ProjectScopedMixin, APIView):
    """A store's live memories as points in 2-D, in labelled clusters; points of sensitive consent
    categories masked for every caller."""

    queryset = MemoryStore.objects.none()  # staff sessions need view_memorystore
    session_permissions = ["view_memorystore", "view_memory"]
    replica_reads = False  # a first or stale map is computed, or enqueued, by this read

    @extend_schema(parameters=[MemoryMapQuerySerializer],
                   responses={200: MemoryMapSerializer,
                              202: OpenApiResponse(MemoryMapSerializer, description="Being computed by a worker"),
                              **ERRORS})
    def get(self, request: Request) -> Response:
        query = MemoryMapQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        store = referenced_store(self.caller, self.project, query.validated_data["memory_store_id"],
                                 action=SEARCH)
        found = memory_map_request(store=store)
        answer = memory_map_answer(found, stale=recomputing(found))
        ready = found.status == MemoryMapStatus.READY
        return Response(answer, status=status.HTTP_200_OK if ready else status.HTTP_202_ACCEPTED)


__all__ = ["MemoryMapView"]
