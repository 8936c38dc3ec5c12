"""Documents and ingestion rules over HTTP: thin views over memory_engine.services.documents."""

from __future__ import annotations

from typing import Any

import django_filters
from django.core.validators import ProhibitNullCharactersValidator
from django.db.models import QuerySet
from django.http import FileResponse, Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
    inline_serializer,
)
from rest_framework import mixins, permissions, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory_engine.conf import engine_settings
from memory_engine.exceptions import (
    BatchTooLarge,
    DocumentNotForgotten,
    DocumentVersionNotFound,
    EmptyFile,
    ExternalRefInvalid,
    FileTooLarge,
    LegalHold,
    PathInvalid,
    PathTaken,
    QuotaExceeded,
    TitleTooLong,
    UnsupportedContentType,
    ValidationFailed,
)
from memory_engine.models import ApiKey, Chunk, Document, DocumentVersion, IngestionRule
from memory_engine.models.documents import ChunkStrategy
from memory_engine.models.retention import RetentionClass
from memory_engine.policy import (
    ADD,
    FORGET,
    PURGE,
    Share,
    access_tags_write,
    get_visible_or_404,
    require,
    share_resolve,
    visible,
)
from memory_engine.providers.converters.http import TOKEN_HEADER
from memory_engine.selectors.documents import version_text
from memory_engine.services.documents import (
    Capture,
    CaptureStatus,
    Lineage,
    NewDocument,
    Upload,
    converter_callback,
    document_capture,
    document_capture_or_enqueue,
    document_capture_text,
    document_delete,
    document_for_download,
    document_ingest_or_enqueue,
    document_reingest,
    documents_create_or_enqueue,
)
from memory_engine.services.ingestion_rules import FIELDS as RULE_FIELDS
from memory_engine.services.ingestion_rules import ingestion_rule_save
from memory_engine.services.retention import (
    document_deprecate,
    document_forget,
    document_purge,
    document_retention_set,
)

from . import strict
from .exceptions import ERRORS, ErrorSerializer, error_responses
from .fields import JSONObjectField, ShareSerializer, parse_tags_param
from .limits import SafeJSONParser
from .scoping import ProjectScopedMixin, project_object_or_404, request_caller, request_principal

# --- serializers ---------------------------------------------------------------------


class PathField(serializers.CharField):
    """A path checked by the service (PATH_INVALID names the problem), NUL characters included."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(trim_whitespace=False, max_length=4000, **kwargs)
        self.validators = [v for v in self.validators if not isinstance(v, ProhibitNullCharactersValidator)]


class DocumentErrorSerializer(strict.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    details = serializers.DictField(required=False)


STATUS_HELP = "pending | processing | ready | failed"


class DocumentSerializer(strict.ModelSerializer):
    error = DocumentErrorSerializer(read_only=True, allow_null=True)
    status = serializers.CharField(read_only=True, help_text=STATUS_HELP)
    ingestion_rule_id = serializers.CharField(read_only=True, allow_null=True)
    active_version_id = serializers.CharField(read_only=True, allow_null=True,
                                              help_text="The version whose chunks search sees.")

    class Meta:
        model = Document
        fields = [
            "id", "path", "title", "content_type", "status", "error", "total_chunks", "indexed_chunks",
            "unembedded_chunks", "attempts", "chunk_strategy", "chunk_size", "chunk_overlap", "tags", "metadata",
            "size_bytes", "sha256", "original_filename", "ingestion_rule_id", "heartbeat_at", "ingested_at",
            "source", "external_ref", "last_seen_at", "active_version_id", "deprecated_at", "forgotten_at",
            "forget_reason", "created_at", "updated_at",
        ]
        read_only_fields = fields


class DocumentStatusSerializer(strict.ModelSerializer):
    error = DocumentErrorSerializer(read_only=True, allow_null=True)
    status = serializers.CharField(read_only=True, help_text=STATUS_HELP)

    class Meta:
        model = Document
        fields = ["id", "status", "indexed_chunks", "total_chunks", "unembedded_chunks", "error", "attempts",
                  "heartbeat_at", "ingested_at"]
        read_only_fields = fields


class ChunkSettingsSerializer(strict.Serializer):
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


class LineageSerializer(ChunkSettingsSerializer):
    """What a capture says about its content, recorded on the version it makes."""

    provenance = serializers.ChoiceField(choices=DocumentVersion.Provenance.choices, required=False,
                                         default=DocumentVersion.Provenance.UNKNOWN)
    source_class = serializers.ChoiceField(choices=DocumentVersion.SourceClass.choices, required=False,
                                           default=DocumentVersion.SourceClass.NATIVE)
    occurred_at = serializers.DateTimeField(required=False, allow_null=True,
                                            help_text="When the content was true at the source.")
    valid_from = serializers.DateTimeField(required=False, allow_null=True)
    valid_until = serializers.DateTimeField(required=False, allow_null=True)
    captured_by_kind = serializers.ChoiceField(
        choices=DocumentVersion.CapturedByKind.choices, required=False,
        help_text="Default: human for a staff session, agent for an API key.")
    derived_from = serializers.CharField(required=False, allow_null=True, max_length=40,
                                         help_text="The id of the version this content was derived from.")
    title = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False,
                                  help_text="At most MAX_TITLE_CHARS (400 TITLE_TOO_LONG).")
    tags = JSONObjectField(required=False)
    metadata = JSONObjectField(required=False)
    retention_class = serializers.ChoiceField(
        choices=RetentionClass.choices, required=False, default=RetentionClass.DURABLE,
        help_text="durable | ephemeral (tombstoned after DOCUMENT_EPHEMERAL_TTL_SECONDS) | legal_hold.")


class IdentitySerializer(LineageSerializer):
    source = serializers.CharField(  # type: ignore[assignment]  # a field, not Field.source
                                   required=False, default="upload", trim_whitespace=False,
                                   help_text="Where the content comes from: upload, http, gdrive, crm, ...")
    external_ref = serializers.CharField(
        required=False, allow_null=True, trim_whitespace=False,
        help_text="The source's id of the content; with it, (source, external_ref) names the document "
                  "and a new capture is a noop or a new version.")


class DocumentUploadSerializer(IdentitySerializer):
    file = serializers.FileField(allow_empty_file=True)
    path = PathField(required=False, help_text="Default: /<original filename>.")
    password = serializers.CharField(required=False, allow_blank=True, write_only=True, max_length=1000,
                                     help_text="Opens an encrypted PDF; stored encrypted for re-ingestion.")


class DocumentTextSerializer(IdentitySerializer):
    content = serializers.CharField(allow_blank=True, trim_whitespace=False)
    content_type = serializers.ChoiceField(choices=["text/plain", "text/markdown"], required=False)
    path = PathField(required=False)
    share = ShareSerializer(required=False, help_text="A new document: keys of your project that get access "
                                                      "(docs/security.md).")


class BatchTextSerializer(strict.Serializer):
    """One text document of a batch."""

    content = serializers.CharField(allow_blank=True, trim_whitespace=False)
    content_type = serializers.ChoiceField(choices=["text/plain", "text/markdown"], required=False)
    path = PathField(required=False, help_text="Default: /<slug of the title>-<random>.txt.")
    title = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False,
                                  help_text="At most MAX_TITLE_CHARS (400 TITLE_TOO_LONG).")
    tags = JSONObjectField(required=False)
    metadata = JSONObjectField(required=False)


class DocumentBatchSerializer(LineageSerializer):
    """Many text documents (JSON); the chunk settings, lineage and ``wait`` apply to all."""

    title = None  # type: ignore[assignment]  # per document
    tags = None  # type: ignore[assignment]
    metadata = None  # type: ignore[assignment]
    documents = BatchTextSerializer(many=True, allow_empty=False,
                                    help_text="At most MAX_BATCH_DOCUMENTS (413 BATCH_TOO_LARGE).")


class DocumentBatchUploadSerializer(LineageSerializer):
    """Many files (multipart: one ``file`` part each); ``tags``, ``metadata``, the chunk settings,
    lineage and ``wait`` apply to all."""

    title = None  # type: ignore[assignment]  # from the file name
    file = serializers.ListField(child=serializers.FileField(allow_empty_file=True), allow_empty=False,
                                 help_text="One part per document; at most MAX_BATCH_DOCUMENTS.")
    path = serializers.ListField(child=PathField(), required=False,
                                 help_text="One per file, in the same order. Default: /<original filename>.")


class ByRefCaptureSerializer(LineageSerializer):
    content = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False,
                                    help_text="Text content (JSON); or send `file` (multipart).")
    content_type = serializers.ChoiceField(choices=["text/plain", "text/markdown"], required=False)
    file = serializers.FileField(required=False, allow_empty_file=True)
    path = PathField(required=False, help_text="Default: /<source>/<external_ref>.")
    password = serializers.CharField(required=False, allow_blank=True, write_only=True, max_length=1000)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("content" in attrs) == ("file" in attrs):
            raise serializers.ValidationError("Send either `content` (text) or `file` (multipart upload).")
        return attrs


class DocumentVersionSerializer(strict.ModelSerializer):
    document_id = serializers.CharField(read_only=True)
    derived_from_id = serializers.CharField(read_only=True, allow_null=True)
    raw_capture_id = serializers.CharField(read_only=True, allow_null=True)
    status = serializers.CharField(read_only=True, help_text="pending | active | superseded | failed | staged")
    generation_id = serializers.CharField(read_only=True, allow_null=True,
                                          help_text="The replay run (staged generation) that derived it.")
    error = DocumentErrorSerializer(read_only=True, allow_null=True)

    class Meta:
        model = DocumentVersion
        fields = [
            "id", "document_id", "number", "status", "sha256", "size_bytes", "content_type", "title",
            "provenance", "source_class", "occurred_at", "valid_from", "valid_until", "captured_by",
            "captured_by_kind", "derived_from_id", "raw_capture_id", "generation_id", "error", "created_at",
            "activated_at", "retention_class", "tombstoned_at",
        ]
        read_only_fields = fields


class DocumentVersionDetailSerializer(DocumentVersionSerializer):
    text = serializers.SerializerMethodField(help_text="The captured text; null for binary content.")

    class Meta(DocumentVersionSerializer.Meta):
        fields = [*DocumentVersionSerializer.Meta.fields, "text"]
        read_only_fields = fields

    def get_text(self, obj: DocumentVersion) -> str | None:
        return version_text(obj)


class CaptureSerializer(strict.Serializer):
    """The answer to a capture: what it did, the version it made (or matched) and the document."""

    id = serializers.CharField(help_text="The document's id.")
    status = serializers.CharField(help_text="created | noop | updated")
    version = DocumentVersionSerializer()
    document = DocumentSerializer()


class DocumentForgetSerializer(strict.Serializer):
    reason = serializers.CharField(max_length=400, help_text="Why it is forgotten; kept on the tombstone.")


class DocumentRetentionSerializer(strict.Serializer):
    retention_class = serializers.ChoiceField(choices=RetentionClass.choices)
    version_ids = serializers.ListField(child=serializers.CharField(max_length=40), required=False,
                                        max_length=1000, help_text="Default: every version of the document.")


class ReingestSerializer(ChunkSettingsSerializer):
    password = serializers.CharField(required=False, allow_blank=True, write_only=True, max_length=1000)


class ChunkSerializer(strict.ModelSerializer):
    document_id = serializers.CharField(read_only=True)
    has_embedding = serializers.SerializerMethodField()

    class Meta:
        model = Chunk
        fields = ["id", "document_id", "chunk_index", "page", "text", "has_embedding", "embedding_model"]
        read_only_fields = fields

    def get_has_embedding(self, obj: Chunk) -> bool:
        return obj.embedding is not None


class IngestionRuleSerializer(strict.ModelSerializer):
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


class CallbackAcceptedSerializer(strict.Serializer):
    document_id = serializers.CharField()
    status = serializers.CharField()


# --- filters --------------------------------------------------------------------------


class DocumentFilter(django_filters.FilterSet):
    path_prefix = django_filters.CharFilter(field_name="path", lookup_expr="startswith")
    status = django_filters.CharFilter(help_text=STATUS_HELP)
    content_type = django_filters.CharFilter()
    tags = django_filters.CharFilter(method="filter_tags", help_text='JSON object, e.g. {"team": "a"}')
    source = django_filters.CharFilter()
    external_ref = django_filters.CharFilter()

    class Meta:
        model = Document
        fields = ["path_prefix", "status", "content_type", "tags", "source", "external_ref"]

    def filter_tags(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        tags = parse_tags_param(value)
        return queryset.filter(tags__contains=tags) if tags else queryset


# --- views ----------------------------------------------------------------------------


def _check_upload_size(request: Request) -> None:
    upload = request.FILES.get("file")
    if upload is not None and upload.size > engine_settings.MAX_UPLOAD_BYTES:
        raise FileTooLarge(details={"bytes": upload.size, "max_bytes": engine_settings.MAX_UPLOAD_BYTES})


def _base_url(request: Request) -> str:
    return f"{request.scheme}://{request.get_host()}"


def _chunk_args(data: dict[str, Any]) -> dict[str, Any]:
    return {key: data.get(key) for key in ("chunk_strategy", "chunk_size", "chunk_overlap")}


def _answer(document: Document, *, ran_inline: bool) -> Response:
    code = status.HTTP_201_CREATED if ran_inline else status.HTTP_202_ACCEPTED
    return Response(DocumentSerializer(document).data, status=code)


def _capture_status(capture: Capture, ran_inline: bool) -> int:
    if capture.status == CaptureStatus.NOOP:
        return status.HTTP_200_OK
    return status.HTTP_201_CREATED if ran_inline else status.HTTP_202_ACCEPTED


def _captured_document(capture: Capture, *, ran_inline: bool, request: Request, share: Share | None = None
                       ) -> Response:
    """POST answers: the document, plus what the capture did (``capture.status``, ``capture.version``)."""
    _owner_tag(request, capture, share)
    data = {**DocumentSerializer(capture.document).data,
            "capture": {"status": capture.status.value, "version": DocumentVersionSerializer(capture.version).data}}
    return Response(data, status=_capture_status(capture, ran_inline))


def _owner_tag(request: Request, capture: Capture, share: Share | None = None) -> None:
    """A new document gets the creating key's owner tag and its ``share`` (docs/security.md,
    *Access inside a project*)."""
    if capture.status == CaptureStatus.CREATED:
        access_tags_write(obj=capture.document, owner=request_caller(request).owner, share=share)


def _require_add_on_existing(request: Request, project: Any, source: str, external_ref: str) -> None:
    """A capture that updates an existing document needs ``add`` on it (403 GRANT_REQUIRED)."""
    existing = Document.objects.filter(project=project, source=source, external_ref=external_ref).first()
    if existing is not None:
        require(request_caller(request), ADD, existing)


def _lineage(request: Request, project: Any, data: dict[str, Any]) -> Lineage:
    derived_from = None
    if data.get("derived_from"):
        derived_from = get_visible_or_404(
            request_caller(request), DocumentVersion.objects.filter(document__project=project), data["derived_from"],
            error=DocumentVersionNotFound, field="derived_from")
    kinds = DocumentVersion.CapturedByKind
    kind = data.get("captured_by_kind") or (kinds.AGENT if isinstance(request.auth, ApiKey) else kinds.HUMAN)
    return Lineage(
        provenance=data["provenance"], source_class=data["source_class"], occurred_at=data.get("occurred_at"),
        valid_from=data.get("valid_from"), valid_until=data.get("valid_until"),
        captured_by=request_principal(request), captured_by_kind=kind, derived_from=derived_from,
        retention_class=data["retention_class"],
    )


def _capture_args(request: Request, project: Any, data: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments every capture view passes to the services."""
    return {"project": project, "path": data.get("path"), "title": data.get("title", ""), "tags": data.get("tags"),
            "metadata": data.get("metadata"), "base_url": _base_url(request),
            "lineage": _lineage(request, project, data), **_chunk_args(data)}


class CapturedDocumentSerializer(DocumentSerializer):
    capture = inline_serializer("CaptureOutcome", fields={
        "status": serializers.CharField(help_text="created | noop | updated"),
        "version": DocumentVersionSerializer(),
    })

    class Meta(DocumentSerializer.Meta):
        fields = [*DocumentSerializer.Meta.fields, "capture"]
        read_only_fields = fields


CAPTURE_ERRORS = error_responses(PathTaken, FileTooLarge, UnsupportedContentType, QuotaExceeded, TitleTooLong,
                                 ExternalRefInvalid)
CREATED = {
    202: OpenApiResponse(CapturedDocumentSerializer, description="Accepted; ingestion runs in a worker"),
    201: OpenApiResponse(CapturedDocumentSerializer, description="wait=true: ingested inline (ready or failed)"),
    200: OpenApiResponse(CapturedDocumentSerializer,
                         description="noop: this source's document already has this content"),
    **CAPTURE_ERRORS,
    **ERRORS,
}
class DocumentBatchCreatedSerializer(strict.Serializer):
    documents = DocumentSerializer(many=True, help_text="In the order sent.")


BATCH_CREATED = {
    202: OpenApiResponse(DocumentBatchCreatedSerializer, description="Created; their ingestion runs in a worker"),
    201: OpenApiResponse(DocumentBatchCreatedSerializer,
                         description="wait=true: created and ingested inline (each ready or failed)"),
    **error_responses(PathTaken, FileTooLarge, BatchTooLarge, UnsupportedContentType, QuotaExceeded, TitleTooLong,
                      EmptyFile, PathInvalid),
    **ERRORS,
}
CAPTURED = {
    202: OpenApiResponse(CaptureSerializer, description="created or updated; ingestion runs in a worker"),
    201: OpenApiResponse(CaptureSerializer, description="wait=true: created or updated, ingested inline"),
    200: OpenApiResponse(CaptureSerializer, description="noop: the same content as the current version"),
    **CAPTURE_ERRORS,
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
        return visible(self.caller, Document.objects.filter(project=self.project),
                       self.detail_action).order_by("path", "id")

    def get_object(self) -> Any:
        if self.lookup_field not in self.kwargs:  # OPTIONS on the by-ref PUT: no document id in the path
            raise Http404()
        return super().get_object()

    @extend_schema(request=DocumentTextSerializer, responses=CREATED,
                   description="A text or Markdown document (`recursive` strategy unless overridden); with "
                               "`external_ref`, a capture of that source's document (see by-ref).")
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        serializer = DocumentTextSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        share = share_resolve(project=self.project, key_ids=data["share"]["keys"],
                              actions=data["share"]["actions"]) if "share" in data else None
        if data.get("external_ref"):
            _require_add_on_existing(request, self.project, data["source"], data["external_ref"])
        capture, inline = document_capture_or_enqueue(
            document_capture_text, wait=data["wait"], size_bytes=len(data["content"].encode()),
            content=data["content"], content_type=data.get("content_type"), source=data["source"],
            external_ref=data.get("external_ref"), **_capture_args(request, self.project, data),
        )
        return _captured_document(capture, ran_inline=inline, request=request, share=share)

    @extend_schema(request={"multipart/form-data": DocumentUploadSerializer}, responses=CREATED,
                   operation_id="documents_upload",
                   description="Upload a file (field `file`); the content type is sniffed from the bytes.")
    @action(detail=False, methods=["post"], url_path="ingest", parser_classes=[MultiPartParser, FormParser],
            filterset_class=None, pagination_class=None)
    def upload(self, request: Request) -> Response:
        self.project  # noqa: B018  (resolve the project before reading the upload)
        _check_upload_size(request)
        serializer = DocumentUploadSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        file = data["file"]
        if data.get("external_ref"):
            _require_add_on_existing(request, self.project, data["source"], data["external_ref"])
        capture, inline = document_capture_or_enqueue(
            document_capture, wait=data["wait"], size_bytes=file.size,
            upload=Upload(file.read(), filename=file.name or "", declared_content_type=file.content_type),
            password=data.get("password") or None, source=data["source"], external_ref=data.get("external_ref"),
            **_capture_args(request, self.project, data),
        )
        return _captured_document(capture, ran_inline=inline, request=request)

    @extend_schema(
        request={"application/json": DocumentBatchSerializer, "multipart/form-data": DocumentBatchUploadSerializer},
        responses=BATCH_CREATED, operation_id="documents_batch",
        description="Many small documents in one request, all or none: JSON `documents` (texts) or multipart "
                    "`file` parts (files). An error names the refused document in `details.index`; nothing is "
                    "created then. With `wait=true` (and the batch at most SYNC_INGESTION_MAX_BYTES) they are "
                    "ingested together before the answer.")
    @action(detail=False, methods=["post"], url_path="batch", filterset_class=None, pagination_class=None,
            parser_classes=[SafeJSONParser, MultiPartParser, FormParser])
    def batch(self, request: Request) -> Response:
        self.project  # noqa: B018  (resolve the project before reading the uploads)
        multipart = request.content_type.startswith("multipart/")
        if multipart:
            items = request.FILES.getlist("file")
        else:  # a body that is no object is the serializer's 400
            items = request.data.get("documents") if isinstance(request.data, dict) else None
        limit = engine_settings.MAX_BATCH_DOCUMENTS
        if isinstance(items, list) and len(items) > limit:
            raise BatchTooLarge(f"The batch holds {len(items)} documents; the limit is {limit} "
                                "(MAX_BATCH_DOCUMENTS).", details={"documents": len(items), "max_documents": limit})
        serializer = (DocumentBatchUploadSerializer if multipart else DocumentBatchSerializer)(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        if multipart:
            files, paths = data["file"], data.get("path")
            if paths is not None and len(paths) != len(files):
                raise ValidationFailed("Send one `path` per `file`, in the same order (or none).",
                                       details={"files": len(files), "paths": len(paths)})
            documents = [NewDocument(upload=Upload(file.read(), filename=file.name or "",
                                                   declared_content_type=file.content_type),
                                     path=paths[index] if paths else None, tags=data.get("tags"),
                                     metadata=data.get("metadata"), **_chunk_args(data))
                         for index, file in enumerate(files)]
            size = sum(len(document.upload.data) for document in documents if document.upload is not None)
        else:
            documents = [NewDocument(content=item["content"], content_type=item.get("content_type"),
                                     path=item.get("path"), title=item.get("title", ""), tags=item.get("tags"),
                                     metadata=item.get("metadata"), **_chunk_args(data))
                         for item in data["documents"]]
            size = sum(len(item["content"].encode()) for item in data["documents"])
        created, inline = documents_create_or_enqueue(
            wait=data["wait"], size_bytes=size, project=self.project, documents=documents,
            lineage=_lineage(request, self.project, data), base_url=_base_url(request), owner=self.caller.owner)
        code = status.HTTP_201_CREATED if inline else status.HTTP_202_ACCEPTED
        return Response({"documents": DocumentSerializer(created, many=True).data}, status=code)

    @extend_schema(
        request={"application/json": ByRefCaptureSerializer, "multipart/form-data": ByRefCaptureSerializer},
        responses=CAPTURED, operation_id="documents_capture_by_ref",
        parameters=[OpenApiParameter("source", str, OpenApiParameter.PATH),
                    OpenApiParameter("external_ref", str, OpenApiParameter.PATH)],
        description="Capture the document named by (source, external_ref): `created`, `noop` (same "
                    "content; only last_seen_at moves) or `updated` (a new version replaces the active one "
                    "when its ingestion is ready).")
    @action(detail=False, methods=["put"], url_path=r"by-ref/(?P<source>[^/]+)/(?P<external_ref>.+)",
            filterset_class=None, pagination_class=None, session_permissions=["add_document", "change_document"])
    def capture(self, request: Request, source: str, external_ref: str) -> Response:
        self.project  # noqa: B018  (resolve the project before reading an upload)
        _check_upload_size(request)
        serializer = ByRefCaptureSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        _require_add_on_existing(request, self.project, source, external_ref)
        arguments = {"source": source, "external_ref": external_ref, **_capture_args(request, self.project, data)}
        if "file" in data:
            file = data["file"]
            capture, inline = document_capture_or_enqueue(
                document_capture, wait=data["wait"], size_bytes=file.size,
                upload=Upload(file.read(), filename=file.name or "", declared_content_type=file.content_type),
                password=data.get("password") or None, **arguments)
        else:
            capture, inline = document_capture_or_enqueue(
                document_capture_text, wait=data["wait"], size_bytes=len(data["content"].encode()),
                content=data["content"], content_type=data.get("content_type"), **arguments)
        _owner_tag(request, capture)
        answer = {"id": capture.document.pk, "status": capture.status.value,
                  "version": DocumentVersionSerializer(capture.version).data,
                  "document": DocumentSerializer(capture.document).data}
        return Response(answer, status=_capture_status(capture, inline))

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
        queryset = Chunk.objects.filter(document=document, generation__isnull=True).order_by("chunk_index")
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(ChunkSerializer(page, many=True).data)

    def perform_destroy(self, instance: Document) -> None:
        require(self.caller, PURGE, instance)
        document_delete(document=instance)

    @extend_schema(request=None, responses={200: DocumentSerializer, **ERRORS}, filters=False)
    @action(detail=True, methods=["post", "delete"], filterset_class=None, pagination_class=None,
            session_permissions=["change_document"])
    def deprecate(self, request: Request, pk: str | None = None) -> Response:
        """POST: keep the document but leave it out of search unless the search sends
        ``include_deprecated``; DELETE: undo it."""
        document = self.get_object()
        require(self.caller, FORGET, document)
        document = document_deprecate(document=document, deprecated=request.method == "POST")
        return Response(DocumentSerializer(document).data)

    @extend_schema(request=DocumentForgetSerializer, responses={200: DocumentSerializer,
                                                                **error_responses(LegalHold), **ERRORS},
                   filters=False)
    @action(detail=True, methods=["post"], filterset_class=None, pagination_class=None,
            session_permissions=["delete_document"])
    def forget(self, request: Request, pk: str | None = None) -> Response:
        """Tombstone: chunks (text and vectors), raw captures and the stored file are erased; the
        row, its versions' metadata and the reason stay. 409 LEGAL_HOLD for a held version."""
        serializer = DocumentForgetSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        document = self.get_object()
        require(self.caller, FORGET, document)
        document_forget(document=document, reason=serializer.validated_data["reason"],
                        principal=request_principal(request))
        document.refresh_from_db()
        return Response(DocumentSerializer(document).data)

    @extend_schema(request=None, responses={204: None, **error_responses(LegalHold, DocumentNotForgotten),
                                            **ERRORS}, filters=False)
    @action(detail=True, methods=["post"], filterset_class=None, pagination_class=None,
            session_permissions=["delete_document"])
    def purge(self, request: Request, pk: str | None = None) -> Response:
        """Hard-delete a forgotten document; 409 DOCUMENT_NOT_FORGOTTEN while a durable version is
        not tombstoned, 409 LEGAL_HOLD for a held version."""
        document = self.get_object()
        require(self.caller, PURGE, document)
        document_purge(document=document)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=DocumentRetentionSerializer, responses={200: DocumentVersionSerializer(many=True),
                                                                   **error_responses(DocumentVersionNotFound),
                                                                   **ERRORS}, filters=False)
    @action(detail=True, methods=["post"], filterset_class=None, pagination_class=None,
            session_permissions=["change_document"])
    def retention(self, request: Request, pk: str | None = None) -> Response:
        """Change the retention class of the document's versions (all, or ``version_ids``)."""
        serializer = DocumentRetentionSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        document = self.get_object()
        require(self.caller, FORGET, document)  # a retention class decides deletion
        data = serializer.validated_data
        for version_id in data.get("version_ids") or []:  # 404 for an id that is not this document's
            project_object_or_404(DocumentVersion.objects.filter(document=document), version_id,
                                  error=DocumentVersionNotFound, field="version_ids")
        document_retention_set(document=document, retention_class=data["retention_class"],
                               version_ids=data.get("version_ids"), caller=self.caller)
        versions = DocumentVersion.objects.filter(document=document).order_by("-number")
        return Response(DocumentVersionSerializer(versions, many=True).data)


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
