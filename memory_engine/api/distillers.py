"""Resident distillers over HTTP (docs/distillers.md): thin views over memory_engine.services.distillers."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Q, QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from memory_engine import strict
from memory_engine.exceptions import DistillerBusy, DistillerDisabled, DistillerNotFound, UnknownScope
from memory_engine.models import Distiller, DistillerRun, DistillerVersion
from memory_engine.policy import ADD, Principal, require, visible
from memory_engine.selectors.distillers import run_errors_in_reach
from memory_engine.services.distillers import distiller_create, distiller_delete, distiller_tick, distiller_update

from .exceptions import ERRORS, error_responses
from .fields import FeedCursorField
from .scoping import ProjectScopedMixin, referenced_store

#: How many of its latest runs a distiller's answer shows.
RECENT_RUNS = 5


class DistillerRunSerializer(strict.ModelSerializer):
    class Meta:
        model = DistillerRun
        fields = ["id", "started_at", "finished_at", "counts", "errors"]
        read_only_fields = fields


class DistillerSerializer(strict.ModelSerializer):
    memory_store_id = serializers.CharField(source="store_id", max_length=40,
                                            help_text="The store its claims are written into.")
    document_paths = serializers.ListField(child=serializers.CharField(max_length=1000), required=False,
                                           max_length=100, help_text="Path prefixes it reads; empty: every document.")
    tags = serializers.DictField(required=False, help_text="Only documents whose tags contain these.")
    prompt = serializers.CharField(required=False, allow_blank=True, max_length=20000,
                                   help_text="The LLM's instructions; empty: the built-in prompt.")
    cursor = FeedCursorField(help_text="Where it has read the feed to (a feed cursor); empty: nothing read yet.")
    versions = serializers.SerializerMethodField(help_text="Document versions read: {done, failed}.")
    recent_runs = serializers.SerializerMethodField(help_text=f"Its latest {RECENT_RUNS} ticks, newest first.")

    class Meta:
        model = Distiller
        fields = ["id", "memory_store_id", "document_paths", "tags", "prompt", "enabled", "cursor", "versions",
                  "recent_runs", "created_by", "created_at"]
        read_only_fields = ["id", "cursor", "versions", "recent_runs", "created_by", "created_at"]

    @extend_schema_field(serializers.DictField(child=serializers.IntegerField()))
    def get_versions(self, distiller: Distiller) -> dict[str, int]:
        counts = DistillerVersion.objects.filter(project_id=distiller.project_id, distiller=distiller).aggregate(
            done=Count("pk", filter=Q(status=DistillerVersion.Status.DONE)),
            failed=Count("pk", filter=Q(status=DistillerVersion.Status.FAILED)))
        return {"done": counts["done"], "failed": counts["failed"]}

    @extend_schema_field(DistillerRunSerializer(many=True))
    def get_recent_runs(self, distiller: Distiller) -> list[dict[str, Any]]:
        recent = DistillerRun.objects.filter(project_id=distiller.project_id, distiller=distiller)[:RECENT_RUNS]
        runs = list(DistillerRunSerializer(recent, many=True).data)
        caller = getattr(self.context.get("view"), "caller", None)
        return runs_in_reach(caller, distiller.project_id, runs) if caller is not None else runs


class DistillerUpdateSerializer(DistillerSerializer):
    memory_store_id = serializers.CharField(source="store_id", read_only=True)


@extend_schema_view(
    list=extend_schema(responses={200: DistillerSerializer(many=True), **ERRORS}),
    create=extend_schema(responses={201: DistillerSerializer, **error_responses(UnknownScope), **ERRORS}),
    retrieve=extend_schema(responses={200: DistillerSerializer, **error_responses(DistillerNotFound), **ERRORS}),
    partial_update=extend_schema(request=DistillerUpdateSerializer,
                                 responses={200: DistillerSerializer, **error_responses(DistillerNotFound), **ERRORS}),
    destroy=extend_schema(responses={204: None, **error_responses(DistillerNotFound), **ERRORS}),
)
class DistillerViewSet(ProjectScopedMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                       mixins.DestroyModelMixin, viewsets.GenericViewSet):
    """Resident distillers: each follows the change feed and writes the claims the configured LLM
    reads out of new live documents in its scope into its store, as inferred, derived memories. A
    distiller acts as the principal that created or last changed it: it reads the documents that
    principal may search and writes while it may ``add`` to the store, checked at every tick."""

    queryset = Distiller.objects.none()  # for the schema; get_queryset scopes by project
    serializer_class = DistillerSerializer
    not_found_error = DistillerNotFound
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_queryset(self) -> QuerySet[Distiller]:
        distillers = (Distiller.objects.filter(project=self.project, store__project=self.project)
                      .select_related("store").order_by("created_at", "id"))
        return visible(self.caller, distillers, self.detail_action)  # they go with their store

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        store = referenced_store(self.caller, self.project, data["store_id"])
        distiller = distiller_create(store=store, caller=self.caller, document_paths=data.get("document_paths"),
                                     tags=data.get("tags"), prompt=data.get("prompt", ""),
                                     enabled=data.get("enabled", True))
        return Response(self.get_serializer(distiller).data, status=status.HTTP_201_CREATED)

    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        distiller = self.get_object()
        serializer = DistillerUpdateSerializer(distiller, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        distiller = distiller_update(distiller=distiller, caller=self.caller, **serializer.validated_data)
        return Response(self.get_serializer(distiller).data)

    def perform_destroy(self, instance: Distiller) -> None:
        distiller_delete(distiller=instance, caller=self.caller)

    @extend_schema(request=None, responses={200: DistillerRunSerializer, **error_responses(DistillerNotFound),
                                            **error_responses(DistillerBusy), **ERRORS})
    @action(detail=True, methods=["post"], session_permissions=["change_distiller"])
    def tick(self, request: Request, pk: str | None = None) -> Response:
        """Tick now: read what is new (at most DISTILLER_BATCH_VERSIONS versions) and answer the run."""
        distiller = self.get_object()
        require(self.caller, ADD, distiller.store)
        if not distiller.enabled:
            raise DistillerDisabled(details={"id": distiller.pk})
        run = distiller_tick(distiller_id=distiller.pk, project_id=distiller.project_id)
        if run is None:
            raise DistillerBusy(details={"id": distiller.pk})
        return Response(runs_in_reach(self.caller, distiller.project_id, [DistillerRunSerializer(run).data])[0])

    @extend_schema(responses={200: DistillerRunSerializer(many=True), **error_responses(DistillerNotFound), **ERRORS},
                   filters=False)
    @action(detail=True, methods=["get"], session_permissions=["view_distiller"])
    def runs(self, request: Request, pk: str | None = None) -> Response:
        """The distiller's ticks, newest first."""
        distiller = self.get_object()
        page = self.paginate_queryset(DistillerRun.objects.filter(project_id=distiller.project_id, distiller=distiller)
                                      .order_by("-started_at", "-id"))
        return self.get_paginated_response(runs_in_reach(self.caller, distiller.project_id,
                                                           DistillerRunSerializer(page, many=True).data))


def runs_in_reach(caller: Principal, project_id: str, runs: Any) -> Any:
    """``runs`` (serialized) without the errors that name a document version or a memory outside
    ``caller``'s reach (memory_engine.selectors.distillers)."""
    for run, errors in zip(runs, run_errors_in_reach(caller, project_id, (run["errors"] for run in runs)), strict=True):
        run["errors"] = errors
    return runs


__all__ = ["DistillerViewSet"]
