"""A document's retention over HTTP: deprecate, forget (a tombstone), purge, and the retention
class of its versions (docs/retention.md)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from memory_engine.exceptions import DocumentNotForgotten, DocumentVersionNotFound, LegalHold
from memory_engine.models import DocumentVersion
from memory_engine.policy import FORGET, PURGE, require
from memory_engine.services.retention import (
    document_deprecate,
    document_forget,
    document_purge,
    document_retention_set,
)

from ..exceptions import ERRORS, error_responses
from ..scoping import ProjectScopedMixin, project_object_or_404, request_principal
from .serializers import (
    DocumentForgetSerializer,
    DocumentRetentionSerializer,
    DocumentSerializer,
    DocumentVersionSerializer,
)


class DocumentRetentionActions(ProjectScopedMixin, viewsets.GenericViewSet):
    """The document viewset's retention actions (memory_engine.api.documents.views)."""

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
