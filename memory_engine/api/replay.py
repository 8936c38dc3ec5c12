"""Transform configs (create, list, retrieve: immutable) and the replay runs they stage:
read them, promote or demote one (staff sessions only)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from memory_engine import strict
from memory_engine.exceptions import StagedGenerationNotFound, TransformConfigNotFound
from memory_engine.models import ReplayRun, TransformConfig
from memory_engine.policy import GENERATION_PERMISSION, require_generation_access
from memory_engine.services.documents.replay import generation_demote, generation_promote, transform_config_create

from .exceptions import ERRORS
from .scoping import ProjectScopedMixin


class TransformConfigSerializer(strict.ModelSerializer):
    # Plain fields: the service checks the values, with codes (TRANSFORM_CONFIG_INVALID, ...).
    name = serializers.CharField(max_length=200, allow_blank=True)
    chunk_strategy = serializers.CharField(required=False, allow_blank=True, max_length=20,
                                           help_text="page | whole | size | recursive; blank: each document "
                                                     "keeps its own.")
    search = serializers.JSONField(required=False, help_text="Ranking knobs (a JSON object).")

    class Meta:
        model = TransformConfig
        fields = ["id", "name", "version", "chunk_strategy", "chunk_size", "chunk_overlap",
                  "max_chunks_per_document", "embedding_provider", "embedding_model", "search",
                  "created_by", "created_at"]
        read_only_fields = ["id", "version", "created_by", "created_at"]
        extra_kwargs = {
            "embedding_provider": {"required": False, "help_text": "Blank: the deployment's (the only one "
                                                                   "accepted today)."},
            "embedding_model": {"required": False, "help_text": "Blank: the deployment's active model."},
        }
        # The service validates the values (TRANSFORM_CONFIG_INVALID, CHUNK_SETTINGS_INVALID, ...).
        validators: list[Any] = []


@extend_schema_view(
    list=extend_schema(responses={200: TransformConfigSerializer(many=True), **ERRORS}),
    create=extend_schema(responses={201: TransformConfigSerializer, **ERRORS}),
    retrieve=extend_schema(responses={200: TransformConfigSerializer, **ERRORS}),
)
class TransformConfigViewSet(ProjectScopedMixin, mixins.CreateModelMixin, mixins.ListModelMixin,
                             mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """How a replay derives a staged generation; immutable: posting the same name makes its next version."""

    project_wide_writes = True

    queryset = TransformConfig.objects.none()  # for the schema; get_queryset scopes by project
    serializer_class = TransformConfigSerializer
    not_found_error = TransformConfigNotFound
    filterset_fields = ["name"]

    def get_queryset(self) -> QuerySet[TransformConfig]:
        return TransformConfig.objects.filter(project=self.project).order_by("name", "-version")

    def perform_create(self, serializer: Any) -> None:
        data = serializer.validated_data
        serializer.instance = transform_config_create(
            project=self.project, name=data.get("name", ""), chunk_strategy=data.get("chunk_strategy") or "",
            chunk_size=data.get("chunk_size"), chunk_overlap=data.get("chunk_overlap"),
            max_chunks_per_document=data.get("max_chunks_per_document"),
            embedding_provider=data.get("embedding_provider") or "", embedding_model=data.get("embedding_model") or "",
            search=data.get("search"), created_by=self.principal,
        )


class ReplayRunSerializer(strict.ModelSerializer):
    config_id = serializers.CharField(read_only=True)

    class Meta:
        model = ReplayRun
        fields = ["id", "config_id", "status", "since", "until", "source", "started_by", "documents_total",
                  "documents_done", "chunks_total", "error", "started_at", "finished_at", "promoted_at",
                  "promoted_by", "demoted_at", "demoted_by", "keeps_replaced"]
        read_only_fields = fields


@extend_schema_view(
    list=extend_schema(responses={200: ReplayRunSerializer(many=True), **ERRORS}),
    retrieve=extend_schema(responses={200: ReplayRunSerializer, **ERRORS}),
    promote=extend_schema(request=None, responses={200: ReplayRunSerializer, **ERRORS}),
    demote=extend_schema(request=None, responses={200: ReplayRunSerializer, **ERRORS}),
)
class ReplayRunViewSet(ProjectScopedMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                       viewsets.GenericViewSet):
    """Staged generations (``manage.py memory_engine_replay`` starts them); promote and demote are
    staff-only (``change_replayrun``)."""

    project_wide_writes = True

    queryset = ReplayRun.objects.none()
    serializer_class = ReplayRunSerializer
    not_found_error = StagedGenerationNotFound
    filterset_fields = ["status"]

    def get_queryset(self) -> QuerySet[ReplayRun]:
        return ReplayRun.objects.filter(project=self.project).order_by("-started_at", "id")

    def _switch(self, request: Request, switch: Any) -> Response:
        run = self.get_object()  # another project's id: 404 first, like every id
        require_generation_access(self.caller, GENERATION_PERMISSION)
        run = switch(run=run, by=self.principal)
        return Response(ReplayRunSerializer(run).data, status=status.HTTP_200_OK)

    @action(detail=True, methods=["post"], session_permissions=["change_replayrun"])
    def promote(self, request: Request, pk: str) -> Response:
        """Make this completed (or demoted) generation live in one transaction."""
        return self._switch(request, generation_promote)

    @action(detail=True, methods=["post"], session_permissions=["change_replayrun"])
    def demote(self, request: Request, pk: str) -> Response:
        """Undo the newest promote: the previous live chunks and versions come back."""
        return self._switch(request, generation_demote)
