"""Memory stores, memories and the assertion ledger over HTTP: thin views over the write funnel,
the lifecycle services and the selectors."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import OuterRef, Q, QuerySet
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory_engine.conf import engine_settings
from memory_engine.db import SubqueryCount
from memory_engine.exceptions import BatchTooLarge, NotFound
from memory_engine.facets import validate_facet
from memory_engine.models import Memory, MemoryAssertion, MemoryRevision, MemoryStore, Project
from memory_engine.models.memories import Mechanism, Tier, unexpired_memory_q
from memory_engine.policy import ADD, FORGET, PURGE, access_tags_write, require, share_resolve, visible
from memory_engine.selectors.memories import drop_instruction_memories, in_facet, open_memory
from memory_engine.services.memories import memory_write, memory_write_batch
from memory_engine.services.memory_lifecycle import memory_forget, memory_restore
from memory_engine.services.retention import memory_retention_set
from memory_engine.services.stores import memory_store_delete, memory_store_save, subject_store_get_or_create
from memory_engine.subjects import validate_subject

from ..exceptions import ERRORS, error_responses
from ..permissions import require_write_access
from ..scoping import ProjectScopedMixin, referenced_store, request_caller
from .filters import MemoryAssertionFilter, MemoryFilter, MemoryStoreFilter
from .serializers import (
    WRITE_RESPONSES,
    MemoryAssertionSerializer,
    MemoryBatchItemSerializer,
    MemoryBatchResultSerializer,
    MemoryBatchSerializer,
    MemoryFullSerializer,
    MemoryRetentionSerializer,
    MemoryRevisionSerializer,
    MemorySerializer,
    MemoryStoreSerializer,
    MemoryWriteSerializer,
    batch_results,
    write_response,
)


def stores_with_counts(project: Project) -> QuerySet[MemoryStore]:
    """The project's stores, each annotated with ``valid_memories``: its live memories."""
    return MemoryStore.objects.filter(project=project).annotate(
        valid_memories=SubqueryCount(Memory.objects.live().filter(store=OuterRef("pk"), project=project)))


@extend_schema_view(
    list=extend_schema(responses={200: MemoryStoreSerializer(many=True), **ERRORS}),
    create=extend_schema(responses={201: MemoryStoreSerializer, **ERRORS}),
    retrieve=extend_schema(responses={200: MemoryStoreSerializer, **ERRORS}),
    update=extend_schema(responses={200: MemoryStoreSerializer, **ERRORS}),
    partial_update=extend_schema(responses={200: MemoryStoreSerializer, **ERRORS}),
    destroy=extend_schema(responses={204: None, **ERRORS}),
)
class MemoryStoreViewSet(ProjectScopedMixin, viewsets.ModelViewSet):
    """Memory stores of your project, with their dedup thresholds."""

    queryset = MemoryStore.objects.none()  # for the schema generator; requests use get_queryset
    serializer_class = MemoryStoreSerializer
    filterset_class = MemoryStoreFilter

    def get_queryset(self) -> QuerySet[MemoryStore]:
        return visible(self.caller, stores_with_counts(self.project), self.detail_action).order_by(
            "created_at", "id")

    def perform_create(self, serializer: Any) -> None:
        data = dict(serializer.validated_data)
        share = data.pop("share", None)
        with transaction.atomic():  # the store, its tags and the shared keys' grants together
            if share is not None:
                share = share_resolve(project=self.project, key_ids=share["keys"], actions=share["actions"])
            store = memory_store_save(project=self.project, **data)
            access_tags_write(obj=store, owner=self.caller.owner, share=share)
        # The 201 answer carries what list/retrieve carry, valid_memories annotated.
        serializer.instance = self.get_queryset().get(pk=store.pk)

    def perform_update(self, serializer: Any) -> None:
        require(self.caller, ADD, serializer.instance)
        data = {k: v for k, v in serializer.validated_data.items() if k != "share"}  # share: on create only
        # The instance carries get_queryset's valid_memories annotation into the answer.
        memory_store_save(project=self.project, store=serializer.instance, **data)

    def perform_destroy(self, instance: MemoryStore) -> None:
        require(self.caller, PURGE, instance)
        memory_store_delete(store=instance)


class SubjectMemoryStoreView(ProjectScopedMixin, APIView):
    """``GET /api/v1/subjects/{external_id}/memory-store``: the end user's (user-tier) store."""

    queryset = MemoryStore.objects.none()  # the schema generator's model; the view reads by subject
    session_permissions = ["view_memorystore"]
    replica_reads = False  # it creates the store on first use

    @extend_schema(responses={200: MemoryStoreSerializer,
                              201: OpenApiResponse(MemoryStoreSerializer, description="Created on first use"),
                              **ERRORS})
    def get(self, request: Request, external_id: str) -> Response:
        """Find the subject's store, or create it (201) on first use; a read-only key only finds."""
        validate_subject(external_id, field="external_id")
        stores = stores_with_counts(self.project)
        store = stores.filter(tier=Tier.USER, subject_external_id=external_id).first()
        created = False
        if store is not None and not visible(request_caller(request), stores).filter(pk=store.pk).exists():
            raise NotFound()  # another principal's subject (docs/security.md, *Access inside a project*)
        if store is None:
            require_write_access(request, "memory_engine.add_memorystore")
            found, created = subject_store_get_or_create(project=self.project, external_id=external_id)
            if created:
                access_tags_write(obj=found, owner=request_caller(request).owner)
            store = stores.get(pk=found.pk)
        return Response(MemoryStoreSerializer(store).data,
                        status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


#: ``?facet=`` on the routes of one memory: a memory of another facet answers like an unknown id.
FACET_PARAMETER = OpenApiParameter("facet", str, required=False,
                                   description="Only a memory of this facet or a cross-cutting one.")


@extend_schema_view(
    list=extend_schema(responses={200: MemorySerializer(many=True), **ERRORS}),
    retrieve=extend_schema(
        responses={200: MemorySerializer, **ERRORS},
        description="Any memory of your project, superseded and trashed ones included (expired ones are gone).",
    ),
    destroy=extend_schema(
        parameters=[FACET_PARAMETER],
        responses={204: None, **ERRORS},
        description="Forget, by the store's tier: a user-tier memory is deleted at once; an agent or "
                    "institutional one goes to the trash (restorable for the store's trash_days). Either "
                    "way the ledger records outcome `forgotten`.",
    ),
)
class MemoryViewSet(ProjectScopedMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                    mixins.DestroyModelMixin, viewsets.GenericViewSet):
    """Write facts through the funnel; list valid memories; read any memory by id."""

    queryset = Memory.objects.none()
    serializer_class = MemorySerializer
    filterset_class = MemoryFilter

    def get_queryset(self) -> QuerySet[Memory]:
        # An expired memory is gone for every route, before the sweep deletes it.
        return (
            # each table by the project (the memory's, its store's, its content's): one node's
            # statement on a distributed PostgreSQL (docs/scaling.md)
            visible(self.caller, Memory.objects.of_project(self.project.pk), self.detail_action)
            .filter(unexpired_memory_q())
            .select_related("content", "store").order_by("created_at", "id")
        )

    def filter_queryset(self, queryset: QuerySet[Any, Any]) -> QuerySet[Any, Any]:
        # List filters (valid-only by default) never hide a memory read or forgotten by id;
        # ?facet= applies to forget, restore and open too.
        if self.action == "list":
            return super().filter_queryset(queryset)
        if self.action in ("destroy", "restore"):
            return in_facet(queryset, validate_facet(self.request.query_params.get("facet")))
        return queryset

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Valid memories (``include_invalidated`` adds superseded and trashed ones), without
        those that read as instructions to an AI (they stay stored)."""
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        kept = drop_instruction_memories(list(page or []), path="list")
        return self.get_paginated_response(self.get_serializer(kept, many=True).data)

    def write_store(self, store_id: str) -> MemoryStore:
        """The store a write names: one of the project's in the caller's reach (else 400
        UNKNOWN_SCOPE, as for an unknown id), on which it holds ``add`` (else 403 GRANT_REQUIRED)."""
        store = referenced_store(self.caller, self.project, store_id)
        require(self.caller, ADD, store)
        store.project = self.project  # the store's own (the filter above): the quota check reads it
        return store

    @extend_schema(request=MemoryWriteSerializer, responses=WRITE_RESPONSES)
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        serializer = MemoryWriteSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        store = self.write_store(data["memory_store_id"])
        result = memory_write(
            store=store,
            content=data["content"],
            conversation_id=data.get("conversation_id"),
            duplicate_threshold=data.get("duplicate_threshold"),
            supersede_threshold=data.get("supersede_threshold"),
            retention_class=data["retention_class"],
            **serializer.write_kwargs(),
            principal=self.principal,
            mechanism=Mechanism.API,
        )
        return write_response(result)

    @extend_schema(request=MemoryBatchSerializer, filters=False,
                   responses={200: MemoryBatchResultSerializer, **error_responses(BatchTooLarge), **ERRORS})
    @action(detail=False, methods=["post"], filterset_class=None, session_permissions=["add_memory"])
    def batch(self, request: Request) -> Response:
        """Write many memories into one store, in order, as one-by-one writes would decide, in one
        transaction: one result per item (its action, or the error that refused it alone), and a
        summary (items per action, refused items, written items per decision reason)."""
        # The list's length first: validating 100,000 items to refuse them all takes seconds.
        items = request.data.get("memories") if isinstance(request.data, dict) else None
        limit = engine_settings.MAX_BATCH_MEMORIES
        if isinstance(items, list) and len(items) > limit:
            raise BatchTooLarge(f"The batch holds {len(items)} memories; the limit is {limit} (MAX_BATCH_MEMORIES).",
                                details={"items": len(items), "max_items": limit})
        serializer = MemoryBatchSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        store = self.write_store(data["memory_store_id"])
        items = [MemoryBatchItemSerializer.item_kwargs(item) for item in data["memories"]]
        outcomes = memory_write_batch(store=store, items=items, principal=self.principal, mechanism=Mechanism.API,
                                      duplicate_threshold=data.get("duplicate_threshold"),
                                      supersede_threshold=data.get("supersede_threshold"))
        return Response(batch_results(outcomes))

    def perform_destroy(self, instance: Memory) -> None:
        require(self.caller, FORGET, instance)
        memory_forget(memory=instance, principal=self.principal, mechanism=Mechanism.API)

    @extend_schema(request=None, parameters=[FACET_PARAMETER], filters=False,
                   responses={200: MemoryFullSerializer, **ERRORS})
    @action(detail=True, methods=["post"], filterset_class=None, session_permissions=["delete_memory"])
    def restore(self, request: Request, pk: str | None = None) -> Response:
        """Bring a forgotten agent or institutional memory back from the trash (outcome `restored`);
        409 NOT_IN_TRASH or TRASH_EXPIRED (after the store's trash_days)."""
        memory = self.get_object()
        require(self.caller, FORGET, memory)
        memory = memory_restore(memory=memory, principal=self.principal, mechanism=Mechanism.API)
        return Response(MemoryFullSerializer(memory).data)

    @extend_schema(request=MemoryRetentionSerializer, filters=False, responses={200: MemoryFullSerializer, **ERRORS})
    @action(detail=True, methods=["post"], filterset_class=None, session_permissions=["change_memory"])
    def retention(self, request: Request, pk: str | None = None) -> Response:
        """Change the memory's retention class (an operator's decision): ``legal_hold`` makes
        forget and erasure refuse it (409 LEGAL_HOLD); ``ephemeral`` gives it an expiry."""
        serializer = MemoryRetentionSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        memory = self.get_object()
        require(self.caller, FORGET, memory)  # a retention class decides deletion
        memory = memory_retention_set(memory=memory, caller=self.caller,
                                      retention_class=serializer.validated_data["retention_class"])
        return Response(MemoryFullSerializer(memory).data)

    @extend_schema(parameters=[FACET_PARAMETER], filters=False, responses={200: MemoryFullSerializer, **ERRORS})
    @action(detail=True, methods=["get"], filterset_class=None)
    def open(self, request: Request, pk: str | None = None) -> Response:
        """The full body of a live memory (recall shows a preview of long ones). Expired, trashed,
        superseded and other facets' memories answer 404 like an unknown id; one that reads as
        instructions to an AI answers 409 INSTRUCTION_WITHHELD."""
        facet = validate_facet(request.query_params.get("facet"))
        return Response(MemoryFullSerializer(open_memory(self.get_queryset(), pk, facet=facet)).data)

    @extend_schema(responses={200: MemoryAssertionSerializer(many=True), **ERRORS}, filters=False)
    @action(detail=True, methods=["get"], filterset_class=None)
    def assertions(self, request: Request, pk: str | None = None) -> Response:
        """The ledger rows that created, kept or retired this memory."""
        memory = self.get_object()
        queryset = MemoryAssertion.objects.filter(
            Q(memory=memory) | Q(replaced_memory=memory), store__project=self.project
        ).order_by("created_at", "id")
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(MemoryAssertionSerializer(page, many=True).data)

    @extend_schema(responses={200: MemoryRevisionSerializer(many=True), **ERRORS}, filters=False)
    @action(detail=True, methods=["get"], filterset_class=None)
    def revisions(self, request: Request, pk: str | None = None) -> Response:
        """The memory's earlier wordings, oldest first (kept when a restatement reworded it)."""
        memory = self.get_object()
        queryset = MemoryRevision.objects.filter(memory=memory).select_related("content") \
            .defer("content__embedding").order_by("created_at", "id")
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(MemoryRevisionSerializer(page, many=True).data)


@extend_schema_view(
    list=extend_schema(responses={200: MemoryAssertionSerializer(many=True), **ERRORS}),
    retrieve=extend_schema(responses={200: MemoryAssertionSerializer, **ERRORS}),
)
class MemoryAssertionViewSet(ProjectScopedMixin, viewsets.ReadOnlyModelViewSet):
    """The append-only ledger: one row per write attempt, skips included."""

    queryset = MemoryAssertion.objects.none()
    serializer_class = MemoryAssertionSerializer
    filterset_class = MemoryAssertionFilter

    def get_queryset(self) -> QuerySet[MemoryAssertion]:
        return visible(self.caller, MemoryAssertion.objects.filter(store__project=self.project)).order_by(
            "created_at", "id")


__all__ = ["MemoryAssertionViewSet", "MemoryStoreViewSet", "MemoryViewSet", "SubjectMemoryStoreView"]
