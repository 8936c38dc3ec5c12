"""Documents and ingestion rules over HTTP: thin views over memory_engine.services.documents."""

from __future__ import annotations

from typing import Any

import django_filters
from django.core.validators import ProhibitNullCharactersValidator
from django.db.models import QuerySet
from django.http import FileResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, permissions, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory_engine.conf import engine_settings
from memory_engine.exceptions import FileTooLarge, PathTaken, QuotaExceeded, UnsupportedContentType
from memory_engine.models import Chunk, Document, IngestionRule
from memory_engine.models.documents import ChunkStrategy
from memory_engine.providers.converters.http import TOKEN_HEADER
from memory_engine.services.documents import (
    Upload,
    converter_callback,
    document_create,
    document_create_text,
    document_delete,
    document_for_download,
    document_ingest_or_enqueue,
    document_reingest,
)
from memory_engine.services.ingestion_rules import FIELDS as RULE_FIELDS
from memory_engine.services.ingestion_rules import ingestion_rule_save

from .exceptions import ERRORS, ErrorSerializer, error_responses
from .fields import JSONObjectField, parse_tags_param
from .limits import SafeJSONParser
from .scoping import ProjectScopedMixin

# --- serializers ---------------------------------------------------------------------


class PathField(serializers.CharField):
    """A path checked by the service (PATH_INVALID names the problem), NUL characters included."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(trim_whitespace=False, max_length=4000, **kwargs)
        self.validators = [v for v in self.validators if not isinstance(v, ProhibitNullCharactersValidator)]


class DocumentErrorSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    details = serializers.DictField(required=False)


STATUS_HELP = "pending | processing | ready | failed"


class DocumentSerializer(serializers.ModelSerializer):
    error = DocumentErrorSerializer(read_only=True, allow_null=True)
    status = serializers.CharField(read_only=True, help_text=STATUS_HELP)
    ingestion_rule_id = serializers.CharField(read_only=True, allow_null=True)

    class Meta:
        model = Document
        fields = [
            "id", "path", "title", "content_type", "status", "error", "total_chunks", "indexed_chunks",
            "unembedded_chunks", "attempts", "chunk_strategy", "chunk_size", "chunk_overlap", "tags", "metadata",
            "size_bytes", "sha256", "original_filename", "ingestion_rule_id", "heartbeat_at", "ingested_at",
            "created_at", "updated_at",
        ]
        read_only_fields = fields


class DocumentStatusSerializer(serializers.ModelSerializer):
    error = DocumentErrorSerializer(read_only=True, allow_null=True)
    status = serializers.CharField(read_only=True, help_text=STATUS_HELP)

    class Meta:
        model = Document
        fields = ["id", "status", "indexed_chunks", "total_chunks", "unembedded_chunks", "error", "attempts",
                  "heartbeat_at", "ingested_at"]
        read_only_fields = fields


class ChunkSettingsSerializer(serializers.Serializer):
    chunk_strategy = serializers.ChoiceField(
        choices=ChunkStrategy.choices, required=False,
        help_text="Default: recursive for text/plain and text/markdown, page (long pages cut recursively) "
                  "for everything else; an ingestion rule may set another.")
    chunk_size = serializers.IntegerField(
        min_value=1, max_value=1_000_000, required=False,
        help_text="Tokens of the embedder for recursive and page, characters for size; unused by whole.")
    chunk_overlap = serializers.IntegerField(min_value=0, max_value=999_999, required=False,
                                             help_text="In the unit of chunk_size; less than chunk_size.")
    wait = serializers.BooleanField(required=False, default=False,
                                    help_text="Ingest inline and answer 201 when the file is at most "
                                              "SYNC_INGESTION_MAX_BYTES; otherwise 202.")


class DocumentUploadSerializer(ChunkSettingsSerializer):
    file = serializers.FileField(allow_empty_file=True)
    path = PathField(required=False, help_text="Default: /<original filename>.")
    title = serializers.CharField(required=False, allow_blank=True, max_length=500)
    tags = JSONObjectField(required=False)
    metadata = JSONObjectField(required=False)
    password = serializers.CharField(required=False, allow_blank=True, write_only=True, max_length=1000,
                                     help_text="Opens an encrypted PDF; stored encrypted for re-ingestion.")


class DocumentTextSerializer(ChunkSettingsSerializer):
    content = serializers.CharField(allow_blank=True, trim_whitespace=False)
    content_type = serializers.ChoiceField(choices=["text/plain", "text/markdown"], required=False)
    path = PathField(required=False)
    title = serializers.CharField(required=False, allow_blank=True, max_length=500)
    tags = JSONObjectField(required=False)
    metadata = JSONObjectField(required=False)


class ReingestSerializer(ChunkSettingsSerializer):
    password = serializers.CharField(required=False, allow_blank=True, write_only=True, max_length=1000)


class ChunkSerializer(serializers.ModelSerializer):
    document_id = serializers.CharField(read_only=True)
    has_embedding = serializers.SerializerMethodField()

    class Meta:
        model = Chunk
        fields = ["id", "document_id", "chunk_index", "page", "text", "has_embedding", "embedding_model"]
        read_only_fields = fields

    def get_has_embedding(self, obj: Chunk) -> bool:
        return obj.embedding is not None


class IngestionRuleSerializer(serializers.ModelSerializer):
    converter_secret = serializers.CharField(write_only=True, required=False, allow_blank=True, max_length=200)
    has_secret = serializers.SerializerMethodField()

    class Meta:
        model = IngestionRule
        fields = [
            "id", "name", "content_type_glob", "converter_type", "converter_path", "converter_url",
            "converter_secret", "has_secret", "converter_timeout", "native_extraction", "file_delivery",
            "chunk_strategy", "chunk_size", "chunk_overlap", "enabled", "created_at",
        ]
        read_only_fields = ["id", "has_secret", "created_at"]
        # Uniqueness and ambiguity are checked by the service with clearer messages.
        validators: list[Any] = []

    def get_has_secret(self, obj: IngestionRule) -> bool:
        return bool(obj.converter_secret)


class CallbackAcceptedSerializer(serializers.Serializer):
    document_id = serializers.CharField()
    status = serializers.CharField()


# --- filters --------------------------------------------------------------------------


class DocumentFilter(django_filters.FilterSet):
    path_prefix = django_filters.CharFilter(field_name="path", lookup_expr="startswith")
    status = django_filters.CharFilter(help_text=STATUS_HELP)
    content_type = django_filters.CharFilter()
    tags = django_filters.CharFilter(method="filter_tags", help_text='JSON object, e.g. {"team": "a"}')

    class Meta:
        model = Document
        fields = ["path_prefix", "status", "content_type", "tags"]

    def filter_tags(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        tags = parse_tags_param(value)
        return queryset.filter(tags__contains=tags) if tags else queryset


# --- views ----------------------------------------------------------------------------


def _base_url(request: Request) -> str:
    return f"{request.scheme}://{request.get_host()}"


def _chunk_args(data: dict[str, Any]) -> dict[str, Any]:
    return {key: data.get(key) for key in ("chunk_strategy", "chunk_size", "chunk_overlap")}


def _answer(document: Document, *, ran_inline: bool) -> Response:
    code = status.HTTP_201_CREATED if ran_inline else status.HTTP_202_ACCEPTED
    return Response(DocumentSerializer(document).data, status=code)


CREATED = {
    202: OpenApiResponse(DocumentSerializer, description="Accepted; ingestion runs in a worker"),
    201: OpenApiResponse(DocumentSerializer, description="wait=true: ingested inline (ready or failed)"),
    **error_responses(PathTaken, FileTooLarge, UnsupportedContentType, QuotaExceeded),
    **ERRORS,
}


@extend_schema_view(
    list=extend_schema(responses={200: DocumentSerializer(many=True), **ERRORS}),
    retrieve=extend_schema(responses={200: DocumentSerializer, **ERRORS}),
    destroy=extend_schema(responses={204: None, **ERRORS},
                          description="Deletes the document, its chunks and its stored file."),
)
class DocumentViewSet(ProjectScopedMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                      mixins.DestroyModelMixin, viewsets.GenericViewSet):
    """The project's document library and the state of each ingestion."""

    queryset = Document.objects.none()  # for the schema; get_queryset scopes by project
    serializer_class = DocumentSerializer
    filterset_class = DocumentFilter
    parser_classes = [SafeJSONParser, MultiPartParser, FormParser]

    def get_queryset(self) -> QuerySet[Document]:
        return Document.objects.filter(project=self.project).order_by("path", "id")

    @extend_schema(request=DocumentTextSerializer, responses=CREATED,
                   description="A text or Markdown document (`recursive` strategy unless overridden).")
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        serializer = DocumentTextSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        document, inline = document_ingest_or_enqueue(
            document_create_text, wait=data["wait"], size_bytes=len(data["content"].encode()),
            project=self.project, content=data["content"], content_type=data.get("content_type"),
            path=data.get("path"), title=data.get("title", ""), tags=data.get("tags"),
            metadata=data.get("metadata"), base_url=_base_url(request), **_chunk_args(data),
        )
        return _answer(document, ran_inline=inline)

    @extend_schema(request={"multipart/form-data": DocumentUploadSerializer}, responses=CREATED,
                   operation_id="documents_upload",
                   description="Upload a file (field `file`); the content type is sniffed from the bytes.")
    @action(detail=False, methods=["post"], url_path="ingest", parser_classes=[MultiPartParser, FormParser],
            filterset_class=None, pagination_class=None)
    def upload(self, request: Request) -> Response:
        self.project  # noqa: B018  (resolve the project before reading the upload)
        upload = request.FILES.get("file")
        if upload is not None and upload.size > engine_settings.MAX_UPLOAD_BYTES:
            raise FileTooLarge(details={"bytes": upload.size, "max_bytes": engine_settings.MAX_UPLOAD_BYTES})
        serializer = DocumentUploadSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        file = data["file"]
        document, inline = document_ingest_or_enqueue(
            document_create, wait=data["wait"], size_bytes=file.size,
            project=self.project,
            upload=Upload(file.read(), filename=file.name or "", declared_content_type=file.content_type),
            path=data.get("path"), title=data.get("title", ""), tags=data.get("tags"),
            metadata=data.get("metadata"), password=data.get("password") or None, base_url=_base_url(request),
            **_chunk_args(data),
        )
        return _answer(document, ran_inline=inline)

    @extend_schema(request=ReingestSerializer, responses={202: DocumentSerializer, 201: DocumentSerializer,
                                                          **ERRORS}, operation_id="documents_reingest")
    @action(detail=True, methods=["post"], url_path="ingest", filterset_class=None, pagination_class=None,
            session_permissions=["change_document"])
    def reingest(self, request: Request, pk: str | None = None) -> Response:
        """Ingest the stored file again, optionally with new chunk settings or a password."""
        document = self.get_object()
        serializer = ReingestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        document, inline = document_ingest_or_enqueue(
            document_reingest, wait=data["wait"], size_bytes=document.size_bytes, document=document,
            password=data.get("password") or None, base_url=_base_url(request), **_chunk_args(data),
        )
        return _answer(document, ran_inline=inline)

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
        queryset = Chunk.objects.filter(document=document).order_by("chunk_index")
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(ChunkSerializer(page, many=True).data)

    def perform_destroy(self, instance: Document) -> None:
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


class _SignedURLView(APIView):
    """Authenticated by the signed token in the X-Memory-Engine-Token header, not by an API key."""

    authentication_classes: list[Any] = []
    permission_classes = [permissions.AllowAny]
    throttle_classes: list[Any] = []


TOKEN_PARAMETER = OpenApiParameter(TOKEN_HEADER, str, OpenApiParameter.HEADER, required=True,
                                   description="The token the converter request carried with this URL.")


class ConverterCallbackView(_SignedURLView):
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


class DocumentFileView(_SignedURLView):
    """The stored file, for converters with file_delivery=download_url (signed, expiring)."""

    @extend_schema(parameters=[TOKEN_PARAMETER],
                   responses={(200, "application/octet-stream"): OpenApiTypes.BINARY, 403: ErrorSerializer,
                              404: ErrorSerializer, 410: ErrorSerializer})
    def get(self, request: Request, pk: str) -> FileResponse:
        document = document_for_download(document_id=pk, token=request.headers.get(TOKEN_HEADER, ""))
        return FileResponse(document.file.open("rb"), content_type=document.content_type, as_attachment=True,
                            filename=document.original_filename or document.path.rsplit("/", 1)[-1])


__all__ = ["ConverterCallbackView", "DocumentFileView", "DocumentViewSet", "IngestionRuleViewSet"]
