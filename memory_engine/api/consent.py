"""``POST /api/v1/consent/revoke``: a subject withdraws consent for consent categories; their
memories of those categories are erased and the receipt answered (thin view over
memory_engine.services.consent; docs/memory.md, *Consent categories*)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory_engine import strict
from memory_engine.consent_categories import ConsentCategory
from memory_engine.exceptions import GrantRequired, LegalHold
from memory_engine.services.consent import consent_revoke

from .erasure import ErasureReceiptSerializer
from .exceptions import ERRORS, error_responses
from .scoping import ProjectScopedMixin


class ConsentRevokeSerializer(strict.Serializer):
    subject_external_id = serializers.CharField(
        trim_whitespace=False, help_text="The end user whose user-tier store holds the memories.")
    categories = serializers.ListField(
        child=serializers.ChoiceField(choices=ConsentCategory.choices), min_length=1, max_length=len(ConsentCategory),
        help_text="The consent categories withdrawn: every memory of these in the subject's store is erased.")


class ConsentRevokeView(ProjectScopedMixin, APIView):
    """Erase a subject's memories of the withdrawn consent categories in one transaction; answers
    the receipt (also listed under /erasure-receipts)."""

    session_permissions = ["delete_memory"]

    @extend_schema(request=ConsentRevokeSerializer,
                   responses={201: ErasureReceiptSerializer, **error_responses(LegalHold, GrantRequired), **ERRORS})
    def post(self, request: Request) -> Response:
        serializer = ConsentRevokeSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        receipt = consent_revoke(project=self.project, caller=self.caller,
                                 subject_external_id=data["subject_external_id"], categories=data["categories"])
        return Response(ErasureReceiptSerializer(receipt).data, status=status.HTTP_201_CREATED)


__all__ = ["ConsentRevokeView"]
