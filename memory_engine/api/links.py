"""Evidence links: create, list, read and delete ``source supports|contradicts target``
between the project's memories and document versions (corroboration, docs/retrieval.md)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, serializers, viewsets

from memory_engine import strict
from memory_engine.exceptions import LinkEndNotFound, LinkNotFound
from memory_engine.models import EvidenceLink
from memory_engine.policy import ADD, require, sees, visible
from memory_engine.services.links import evidence_link_create, evidence_link_delete, link_end

from .exceptions import ERRORS
from .scoping import ProjectScopedMixin


class EvidenceLinkSerializer(strict.ModelSerializer):
    # Plain fields: the service checks the values (LINK_INVALID, LINK_END_NOT_FOUND, ...).
    kind = serializers.CharField(max_length=20, help_text="supports | contradicts")
    source_id = serializers.CharField(max_length=40,
                                   help_text="The evidence: a memory id (mem_…) or a document version id (dv_…).")
    target_id = serializers.CharField(max_length=40,
                                   help_text="The claim it bears on: a memory id or a document version id.")

    class Meta:
        model = EvidenceLink
        fields = ["id", "kind", "source_id", "target_id", "created_by", "created_at"]
        read_only_fields = ["id", "created_by", "created_at"]


@extend_schema_view(
    list=extend_schema(responses={200: EvidenceLinkSerializer(many=True), **ERRORS}),
    create=extend_schema(responses={201: EvidenceLinkSerializer, **ERRORS}),
    retrieve=extend_schema(responses={200: EvidenceLinkSerializer, **ERRORS}),
    destroy=extend_schema(responses={204: None, **ERRORS}),
)
class EvidenceLinkViewSet(ProjectScopedMixin, mixins.CreateModelMixin, mixins.ListModelMixin,
                          mixins.RetrieveModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet):
    """``source_id`` supports or contradicts ``target_id``; both ends in the caller's project. A key
    with grants needs ``add`` on both ends to create or delete a link, and lists the links whose
    ends it may search."""

    queryset = EvidenceLink.objects.none()  # for the schema; get_queryset scopes by project
    serializer_class = EvidenceLinkSerializer
    not_found_error = LinkNotFound
    filterset_fields = ["kind"]

    def get_queryset(self) -> QuerySet[EvidenceLink]:
        links = EvidenceLink.objects.filter(project=self.project).order_by("-created_at", "id")
        return visible(self.caller, links, self.detail_action)  # both ends in reach

    def perform_create(self, serializer: Any) -> None:
        data = serializer.validated_data
        source = link_end(project=self.project, end_id=data.get("source_id"), field="source_id")
        target = link_end(project=self.project, end_id=data.get("target_id"), field="target_id")
        for field, end in (("source_id", source), ("target_id", target)):
            if not sees(self.caller, end, None):  # any action: a row the caller reaches at all
                raise LinkEndNotFound(details={"field": field, field: end.pk})  # 404 parity: unseen = unknown
            require(self.caller, ADD, end)
        serializer.instance = evidence_link_create(project=self.project, kind=data.get("kind", ""), source=source,
                                                   target=target, created_by=self.principal)

    def perform_destroy(self, instance: EvidenceLink) -> None:
        for end in (instance.source_memory or instance.source_version,
                    instance.target_memory or instance.target_version):
            if end is not None:
                require(self.caller, ADD, end)
        evidence_link_delete(link=instance)


