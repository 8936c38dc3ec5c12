"""The document library over HTTP: the document viewset (its capture and retention actions
are in capture and retention), ingestion rules, and the converter's signed URLs."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import FileResponse, Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, permissions, status, viewsets
from rest_framework.decorators import action
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory_engine.exceptions import DocumentVersionNotFound
from memory_engine.models import Chunk, Document, DocumentVersion, IngestionRule
from memory_engine.policy import ADD, PURGE, require, visible
from memory_engine.providers.converters.http import TOKEN_HEADER
from memory_engine.services.documents import (
    converter_callback,
    document_delete,
    document_for_download,
    document_ingest_or_enqueue,
    document_reingest,
)
from memory_engine.services.ingestion_rules import FIELDS as RULE_FIELDS
from memory_engine.services.ingestion_rules import ingestion_rule_save

from ..exceptions import ERRORS, ErrorSerializer, error_responses
from ..limits import FormBodyParser, SafeJSONParser
from ..scoping import ProjectScopedMixin, project_object_or_404
from .capture import DocumentCaptureActions, base_url, chunk_args, document_answer
from .filters import DocumentFilter
from .retention import DocumentRetentionActions
from .serializers import (
    CallbackAcceptedSerializer,
    ChunkSerializer,
    DocumentSerializer,
    DocumentStatusSerializer,
    DocumentVersionDetailSerializer,
    DocumentVersionSerializer,
    IngestionRuleSerializer,
    ReingestSerializer,
)


@extend_schema_view(
    list=extend_schema(responses={200: DocumentSerializer(many=True), **ERRORS}),
    retrieve=extend_schema(responses={200: DocumentSerializer, **ERRORS}),
    destroy=extend_schema(responses={204: None, **ERRORS},
                          description="Deletes the document, its chunks and its stored file."),
)
class DocumentViewSet(DocumentCaptureActions, DocumentRetentionActions, mixins.ListModelMixin,
                      mixins.RetrieveModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet):
    """The project's document library and the state of each ingestion."""

    queryset = Document.objects.none()  # for the schema; get_queryset scopes by project
    serializer_class = DocumentSerializer
    filterset_class = DocumentFilter
    parser_classes = [SafeJSONParser, MultiPartParser, FormBodyParser]

    def get_queryset(self) -> QuerySet[Document]:
        return visible(self.caller, Document.objects.filter(project=self.project),
                       self.detail_action).order_by("path", "id")

    def get_object(self) -> Any:
        if self.lookup_field not in self.kwargs:  # OPTIONS on the by-ref PUT: no document id in the path
            raise Http404()
        return super().get_object()

    @extend_schema(responses={200: DocumentVersionSerializer(many=True), **ERRORS}, filters=False)
    @action(detail=True, methods=["get"], url_path="versions", filterset_class=None)
    def versions(self, request: Request, pk: str | None = None) -> Response:
        """The document's versions, newest first."""
        document = self.get_object()
        queryset = DocumentVersion.objects.filter(document=document).order_by("-number")
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(DocumentVersionSerializer(page, many=True).data)

    @extend_schema(responses={200: DocumentVersionDetailSerializer,
                              **error_responses(DocumentVersionNotFound), **ERRORS},
                   parameters=[OpenApiParameter("version_id", str, OpenApiParameter.PATH)], filters=False)
    @action(detail=True, methods=["get"], url_path=r"versions/(?P<version_id>[^/.]+)", filterset_class=None,
            pagination_class=None)
    def version(self, request: Request, version_id: str, pk: str | None = None) -> Response:
        """One version by id, with its captured text when the content is text."""
        document = self.get_object()
        version = project_object_or_404(DocumentVersion.objects.filter(document=document).select_related(
            "raw_capture", "document"), version_id, error=DocumentVersionNotFound, field="version_id")
        return Response(DocumentVersionDetailSerializer(version).data)

    @extend_schema(request=ReingestSerializer, responses={202: DocumentSerializer, 201: DocumentSerializer,
                                                          **ERRORS}, operation_id="documents_reingest")
    @action(detail=True, methods=["post"], url_path="ingest", filterset_class=None, pagination_class=None,
            session_permissions=["change_document"])
    def reingest(self, request: Request, pk: str | None = None) -> Response:
        """Ingest the stored file again, optionally with new chunk settings or a password."""
        document = self.get_object()
        require(self.caller, ADD, document)
        serializer = ReingestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        document, inline = document_ingest_or_enqueue(
            document_reingest, wait=data["wait"], size_bytes=document.size_bytes, document=document,
            password=data.get("password") or None, base_url=base_url(request), **chunk_args(data),
        )
        return document_answer(document, ran_inline=inline)

    @extend_schema(responses={200: DocumentStatusSerializer, **ERRORS}, filters=False)
    @action(detail=True, methods=["get"], url_path="status", filterset_class=None, pagination_class=None)
    def ingestion_status(self, request: Request, pk: str | None = None) -> Response:
        """Progress: indexed_chunks of total_chunks, unembedded_chunks, attempts and the error."""
        return Response(DocumentStatusSerializer(self.get_object()).data)

    @extend_schema(responses={200: ChunkSerializer(many=True), **ERRORS}, filters=False)
    @action(detail=True, methods=["get"], filterset_class=None)
    def chunks(self, request: Request, pk: str | None = None) -> Response:
        """The document's chunks in order, with their page numbers."""
        document = self.get_object()
        queryset = Chunk.objects.filter(project_id=document.project_id, document=document,
                                        generation__isnull=True).order_by("chunk_index")
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(ChunkSerializer(page, many=True).data)

    def perform_destroy(self, instance: Document) -> None:
        require(self.caller, PURGE, instance)
        document_delete(document=instance)


@extend_schema_view(
    list=extend_schema(responses={200: IngestionRuleSerializer(many=True), **ERRORS}),
    create=extend_schema(responses={201: IngestionRuleSerializer, **ERRORS}),
    retrieve=extend_schema(responses={200: IngestionRuleSerializer, **ERRORS}),
    update=extend_schema(responses={200: IngestionRuleSerializer, **ERRORS}),
    partial_update=extend_schema(responses={200: IngestionRuleSerializer, **ERRORS}),
    destroy=extend_schema(responses={204: None, **ERRORS}),
)
class IngestionRuleViewSet(ProjectScopedMixin, viewsets.ModelViewSet):
    """Which converter handles which content type (the most specific glob wins)."""

    project_wide_writes = True

    queryset = IngestionRule.objects.none()  # for the schema; get_queryset scopes by project
    serializer_class = IngestionRuleSerializer
    filterset_fields: list[str] = []

    def get_queryset(self) -> QuerySet[IngestionRule]:
        return IngestionRule.objects.filter(project=self.project).order_by("created_at", "id")

    def _fields(self, serializer: Any) -> dict[str, Any]:
        return {key: value for key, value in serializer.validated_data.items() if key in RULE_FIELDS}

    def perform_create(self, serializer: Any) -> None:
        serializer.instance = ingestion_rule_save(project=self.project, **self._fields(serializer))

    def perform_update(self, serializer: Any) -> None:
        serializer.instance = ingestion_rule_save(project=self.project, rule=serializer.instance,
                                                  **self._fields(serializer))


class SignedURLView(APIView):
    """Authenticated by the signed token in the X-Memory-Engine-Token header, not by an API key."""

    authentication_classes: list[Any] = []
    permission_classes = [permissions.AllowAny]
    throttle_classes: list[Any] = []


TOKEN_PARAMETER = OpenApiParameter(TOKEN_HEADER, str, OpenApiParameter.HEADER, required=True,
                                   description="The token the converter request carried with this URL.")


class ConverterCallbackView(SignedURLView):
    """Where a pending converter delivers its pages: signed, single use, expiring."""

    parser_classes: list[Any] = []  # the raw body is verified against the signature header

    @extend_schema(
        request={"application/json": OpenApiTypes.OBJECT},
        parameters=[TOKEN_PARAMETER],
        responses={202: CallbackAcceptedSerializer, 400: ErrorSerializer, 403: ErrorSerializer,
                   404: ErrorSerializer, 409: ErrorSerializer, 410: ErrorSerializer},
    )
    def post(self, request: Request, pk: str) -> Response:
        document = converter_callback(
            document_id=pk, token=request.headers.get(TOKEN_HEADER, ""), body=request.body,
            signature=request.headers.get("X-Memory-Engine-Signature"),
        )
        return Response({"document_id": document.pk, "status": document.status}, status=status.HTTP_202_ACCEPTED)


class DocumentFileView(SignedURLView):
    """The stored file, for converters with file_delivery=download_url (signed, expiring)."""

    @extend_schema(parameters=[TOKEN_PARAMETER],
                   responses={(200, "application/octet-stream"): OpenApiTypes.BINARY, 403: ErrorSerializer,
                              404: ErrorSerializer, 410: ErrorSerializer})
    def get(self, request: Request, pk: str) -> FileResponse:
        document = document_for_download(document_id=pk, token=request.headers.get(TOKEN_HEADER, ""))
        return FileResponse(document.file.open("rb"), content_type=document.content_type, as_attachment=True,
                            filename=document.original_filename or document.path.rsplit("/", 1)[-1])

