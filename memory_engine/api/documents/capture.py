"""Capturing documents over HTTP: a text (``POST /documents``), an upload
(``POST /documents/ingest``), a batch (``POST /documents/batch``) and a capture by the source's
id (``PUT /documents/by-ref/{source}/{external_ref}``), and what their answers share."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from memory_engine.conf import engine_settings
from memory_engine.exceptions import (
    BatchTooLarge,
    DocumentVersionNotFound,
    EmptyFile,
    ExternalRefInvalid,
    FileTooLarge,
    PathInvalid,
    PathTaken,
    QuotaExceeded,
    TitleTooLong,
    UnsupportedContentType,
    ValidationFailed,
)
from memory_engine.models import ApiKey, Document, DocumentVersion
from memory_engine.policy import ADD, Share, access_tags_write, get_visible_or_404, require, share_resolve
from memory_engine.services.documents import (
    Capture,
    CaptureStatus,
    Lineage,
    NewDocument,
    Upload,
    document_capture,
    document_capture_or_enqueue,
    document_capture_text,
    documents_create_or_enqueue,
)

from ..exceptions import ERRORS, error_responses
from ..limits import FormBodyParser, SafeJSONParser
from ..scoping import ProjectScopedMixin, request_caller, request_principal
from .serializers import (
    ByRefCaptureSerializer,
    CapturedDocumentSerializer,
    CaptureSerializer,
    DocumentBatchCreatedSerializer,
    DocumentBatchSerializer,
    DocumentBatchUploadSerializer,
    DocumentSerializer,
    DocumentTextSerializer,
    DocumentUploadSerializer,
    DocumentVersionSerializer,
)


def check_upload_size(request: Request) -> None:
    upload = request.FILES.get("file")
    if upload is not None and upload.size > engine_settings.MAX_UPLOAD_BYTES:
        raise FileTooLarge.sized(upload.size, engine_settings.MAX_UPLOAD_BYTES)


def base_url(request: Request) -> str:
    return f"{request.scheme}://{request.get_host()}"


def chunk_args(data: dict[str, Any]) -> dict[str, Any]:
    return {key: data.get(key) for key in ("chunk_strategy", "chunk_size", "chunk_overlap")}


def document_answer(document: Document, *, ran_inline: bool) -> Response:
    code = status.HTTP_201_CREATED if ran_inline else status.HTTP_202_ACCEPTED
    return Response(DocumentSerializer(document).data, status=code)


def capture_status(capture: Capture, ran_inline: bool) -> int:
    if capture.status == CaptureStatus.NOOP:
        return status.HTTP_200_OK
    return status.HTTP_201_CREATED if ran_inline else status.HTTP_202_ACCEPTED


def captured_document(capture: Capture, *, ran_inline: bool, request: Request, share: Share | None = None
                       ) -> Response:
    """POST answers: the document, plus what the capture did (``capture.status``, ``capture.version``)."""
    owner_tag(request, capture, share)
    data = {**DocumentSerializer(capture.document).data,
            "capture": {"status": capture.status.value, "version": DocumentVersionSerializer(capture.version).data}}
    return Response(data, status=capture_status(capture, ran_inline))


def owner_tag(request: Request, capture: Capture, share: Share | None = None) -> None:
    """A new document gets the creating key's owner tag and its ``share`` (docs/security.md,
    *Access inside a project*)."""
    if capture.status == CaptureStatus.CREATED:
        access_tags_write(obj=capture.document, owner=request_caller(request).owner, share=share)


def require_add_on_existing(request: Request, project: Any, source: str, external_ref: str) -> None:
    """A capture that updates an existing document needs ``add`` on it (403 GRANT_REQUIRED)."""
    existing = Document.objects.filter(project=project, source=source, external_ref=external_ref).first()
    if existing is not None:
        require(request_caller(request), ADD, existing)


def lineage(request: Request, project: Any, data: dict[str, Any]) -> Lineage:
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


def capture_args(request: Request, project: Any, data: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments every capture view passes to the services."""
    return {"project": project, "path": data.get("path"), "title": data.get("title", ""), "tags": data.get("tags"),
            "metadata": data.get("metadata"), "base_url": base_url(request),
            "lineage": lineage(request, project, data), **chunk_args(data)}


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


class DocumentCaptureActions(ProjectScopedMixin, viewsets.GenericViewSet):
    """The document viewset's actions that capture content (memory_engine.api.documents.views)."""

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
            require_add_on_existing(request, self.project, data["source"], data["external_ref"])
        capture, inline = document_capture_or_enqueue(
            document_capture_text, wait=data["wait"], size_bytes=len(data["content"].encode()),
            content=data["content"], content_type=data.get("content_type"), source=data["source"],
            external_ref=data.get("external_ref"), **capture_args(request, self.project, data),
        )
        return captured_document(capture, ran_inline=inline, request=request, share=share)

    @extend_schema(request={"multipart/form-data": DocumentUploadSerializer}, responses=CREATED,
                   operation_id="documents_upload",
                   description="Upload a file (field `file`); the content type is sniffed from the bytes.")
    @action(detail=False, methods=["post"], url_path="ingest", parser_classes=[MultiPartParser, FormBodyParser],
            filterset_class=None, pagination_class=None)
    def upload(self, request: Request) -> Response:
        self.project  # noqa: B018  (resolve the project before reading the upload)
        check_upload_size(request)
        serializer = DocumentUploadSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        file = data["file"]
        if data.get("external_ref"):
            require_add_on_existing(request, self.project, data["source"], data["external_ref"])
        capture, inline = document_capture_or_enqueue(
            document_capture, wait=data["wait"], size_bytes=file.size,
            upload=Upload(file.read(), filename=file.name or "", declared_content_type=file.content_type),
            password=data.get("password") or None, source=data["source"], external_ref=data.get("external_ref"),
            **capture_args(request, self.project, data),
        )
        return captured_document(capture, ran_inline=inline, request=request)

    @extend_schema(
        request={"application/json": DocumentBatchSerializer, "multipart/form-data": DocumentBatchUploadSerializer},
        responses=BATCH_CREATED, operation_id="documents_batch",
        description="Many small documents in one request, all or none: JSON `documents` (texts) or multipart "
                    "`file` parts (files). An error names the refused document in `details.index`; nothing is "
                    "created then. With `wait=true` (and the batch at most SYNC_INGESTION_MAX_BYTES) they are "
                    "ingested together before the answer.")
    @action(detail=False, methods=["post"], url_path="batch", filterset_class=None, pagination_class=None,
            parser_classes=[SafeJSONParser, MultiPartParser, FormBodyParser])
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
                                     metadata=data.get("metadata"), **chunk_args(data))
                         for index, file in enumerate(files)]
            size = sum(len(document.upload.data) for document in documents if document.upload is not None)
        else:
            documents = [NewDocument(content=item["content"], content_type=item.get("content_type"),
                                     path=item.get("path"), title=item.get("title", ""), tags=item.get("tags"),
                                     metadata=item.get("metadata"), **chunk_args(data))
                         for item in data["documents"]]
            size = sum(len(item["content"].encode()) for item in data["documents"])
        created, inline = documents_create_or_enqueue(
            wait=data["wait"], size_bytes=size, project=self.project, documents=documents,
            lineage=lineage(request, self.project, data), base_url=base_url(request), owner=self.caller.owner)
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
        check_upload_size(request)
        serializer = ByRefCaptureSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        require_add_on_existing(request, self.project, source, external_ref)
        arguments = {"source": source, "external_ref": external_ref, **capture_args(request, self.project, data)}
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
        owner_tag(request, capture)
        answer = {"id": capture.document.pk, "status": capture.status.value,
                  "version": DocumentVersionSerializer(capture.version).data,
                  "document": DocumentSerializer(capture.document).data}
        return Response(answer, status=capture_status(capture, inline))
