"""Subject erasure and its receipts over HTTP: thin views over memory_engine.services.erasure."""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory_engine import strict
from memory_engine.exceptions import GrantRequired, LegalHold
from memory_engine.models import ErasureReceipt
from memory_engine.policy import receipts_visible
from memory_engine.services.erasure import subject_erase
from memory_engine.strict import JSONObjectField

from .exceptions import ERRORS, error_responses
from .scoping import ProjectScopedMixin


class ErasureRequestSerializer(strict.Serializer):
    subject_external_id = serializers.CharField(
        required=False, allow_null=True, trim_whitespace=False,
        help_text="The end user whose user-tier store (memories, contents, revisions, ledger text) is erased.")
    tags = JSONObjectField(required=False, allow_null=True,
                           help_text="Memories and documents whose tags contain these are erased.")


class ErasureReceiptSerializer(strict.ModelSerializer):
    class Meta:
        model = ErasureReceipt
        fields = ["id", "selector_kind", "selector_hmac", "counts", "ids", "sha256", "principal", "created_at"]
        read_only_fields = fields


class ErasureView(ProjectScopedMixin, APIView):
    """Erase everything tied to a subject or to tags in one transaction; answers the receipt."""

    session_permissions = ["delete_memory", "delete_document"]

    @extend_schema(request=ErasureRequestSerializer,
                   responses={201: ErasureReceiptSerializer, **error_responses(LegalHold, GrantRequired), **ERRORS})
    def post(self, request: Request) -> Response:
        serializer = ErasureRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        receipt = subject_erase(project=self.project, caller=self.caller,
                                subject_external_id=data.get("subject_external_id"), tags=data.get("tags"))
        return Response(ErasureReceiptSerializer(receipt).data, status=status.HTTP_201_CREATED)


@extend_schema_view(
    list=extend_schema(responses={200: ErasureReceiptSerializer(many=True), **ERRORS}),
    retrieve=extend_schema(responses={200: ErasureReceiptSerializer, **ERRORS}),
)
class ErasureReceiptViewSet(ProjectScopedMixin, viewsets.ReadOnlyModelViewSet):
    """The project's erasure receipts, newest first: all of them for a caller that may purge anywhere
    in the project, else the receipts of the caller's own erasures."""

    queryset = ErasureReceipt.objects.none()
    serializer_class = ErasureReceiptSerializer

    def get_queryset(self) -> QuerySet[ErasureReceipt]:
        return receipts_visible(self.caller, ErasureReceipt.objects.filter(project=self.project)).order_by(
            "-created_at", "-id")


__all__ = ["ErasureReceiptViewSet", "ErasureView"]
