"""Memory stores, memories and the assertion ledger over HTTP: their serializers (wire
names exactly as DESIGN.md lists them), list filters and thin views over the write funnel."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import django_filters
from django.db import transaction
from django.db.models import Count, Q, QuerySet
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    extend_schema_view,
)
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory_engine import strict
from memory_engine.agent_tools import MEMORY_FIELDS, MemoryFieldsSerializer
from memory_engine.conf import engine_settings
from memory_engine.consent import ConsentCategory
from memory_engine.exceptions import BatchTooLarge, NotFound, ValidationFailed
from memory_engine.facets import validate_facet
from memory_engine.models import (
    DocumentVersion,
    Generation,
    Lineage,
    Memory,
    MemoryAssertion,
    MemoryRevision,
    MemoryRule,
    MemoryStore,
    Project,
    Provenance,
)
from memory_engine.models.memories import Mechanism, Tier, live_memory_q, unexpired_memory_q
from memory_engine.models.retention import RetentionClass
from memory_engine.policy import (
    ADD,
    FORGET,
    PURGE,
    access_tags_write,
    require,
    share_resolve,
    visible,
)
from memory_engine.selectors.memories import drop_instruction_memories, in_facet, open_memory
from memory_engine.selectors.search import Degraded
from memory_engine.services.memories import WriteResult, memory_write, memory_write_batch
from memory_engine.services.memories.batch import BatchSummary
from memory_engine.services.memory_lifecycle import memory_forget, memory_restore
from memory_engine.services.retention import memory_retention_set
from memory_engine.services.stores import memory_store_delete, memory_store_save, subject_store_get_or_create
from memory_engine.strict import JSONObjectField, StrictCharField
from memory_engine.subjects import validate_subject

from .exceptions import ERRORS, ErrorSerializer, error_responses
from .fields import ShareSerializer, parse_tags_param
from .permissions import require_write_access
from .scoping import (
    NonBlankFilter,
    ProjectScopedMixin,
    ScopeIdFilter,
    referenced_store,
    request_caller,
    request_project,
)

# --- serializers ---------------------------------------------------------------------


class MemoryStoreSerializer(strict.ModelSerializer):
    tags = JSONObjectField(required=False)
    duplicate_threshold = serializers.FloatField(required=False, allow_null=True)
    supersede_threshold = serializers.FloatField(required=False, allow_null=True)
    require_about_for_kinds = serializers.ListField(
        child=serializers.CharField(max_length=100), required=False, max_length=100
    )
    valid_memories = serializers.IntegerField(read_only=True, required=False)
    # Checked by the service (TIER_INVALID, SUBJECT_INVALID), fixed after creation (TIER_IMMUTABLE).
    tier = serializers.CharField(required=False, help_text="user | agent | institutional (default).")
    subject_external_id = serializers.CharField(
        required=False, allow_null=True, allow_blank=True, trim_whitespace=False,
        help_text="user tier: the end user's external id (one store per subject).")
    agent_id = serializers.CharField(required=False, allow_null=True, max_length=40,
                                     help_text="agent tier: the agent whose own store this is.")
    recency_half_life_days = serializers.FloatField(
        required=False, allow_null=True, help_text="Recall recency half-life in days (null: the tier's; 0: none).")
    # Checked by the service (LIFETIME_INVALID).
    ttl_default = serializers.IntegerField(
        required=False, allow_null=True, help_text="Seconds a memory lives when its writer sets no expires_at.")
    ttl_max = serializers.IntegerField(
        required=False, allow_null=True, help_text="Longest lifetime in seconds of any memory of the store.")
    trash_days = serializers.IntegerField(
        required=False, allow_null=True, help_text="Days a forgotten memory stays restorable (null: TRASH_DAYS).")
    # Checked by the service (LIFETIME_INVALID).
    consent_expiry_days = JSONObjectField(
        required=False, help_text='Days a memory of a consent category may live here, e.g. {"memory:health": 30} '
                                  "(null: no limit); overrides CONSENT_EXPIRY_DAYS for the store's tier.")
    share = ShareSerializer(required=False, write_only=True,
                            help_text="On create: keys of your project that get access (docs/security.md).")

    class Meta:
        model = MemoryStore
        fields = [
            "id", "name", "description", "tags", "duplicate_threshold", "supersede_threshold",
            "require_about_for_kinds", "judge_enabled", "valid_memories", "created_at",
            "tier", "subject_external_id", "agent_id", "recency_half_life_days", "ttl_default", "ttl_max",
            "trash_days", "consent_expiry_days", "share",
        ]
        read_only_fields = ["id", "created_at", "valid_memories"]


class MemoryWriteSerializer(MemoryFieldsSerializer):
    memory_store_id = serializers.CharField(max_length=40)
    content = StrictCharField(allow_blank=True, trim_whitespace=False)
    duplicate_threshold = serializers.FloatField(required=False, allow_null=True)
    supersede_threshold = serializers.FloatField(required=False, allow_null=True)
    conversation_id = serializers.CharField(required=False, allow_blank=True, max_length=200)
    retention_class = serializers.ChoiceField(
        choices=RetentionClass.choices, required=False, default=RetentionClass.DURABLE,
        help_text="durable | ephemeral (expires_at defaults to MEMORY_EPHEMERAL_TTL_SECONDS) | legal_hold.")


class MemoryBatchItemSerializer(MemoryFieldsSerializer):
    """One memory of a batch: what POST /memories takes but its store and thresholds."""

    content = StrictCharField(allow_blank=True, trim_whitespace=False)
    conversation_id = serializers.CharField(required=False, allow_blank=True, max_length=200)
    retention_class = serializers.ChoiceField(choices=RetentionClass.choices, required=False,
                                              default=RetentionClass.DURABLE)

    @staticmethod
    def item_kwargs(data: dict[str, Any]) -> dict[str, Any]:
        """One validated item as ``memory_write_batch`` takes it."""
        kwargs = {name: data.get(name) for name in MEMORY_FIELDS}
        kwargs.update(content=data["content"], retention_class=data["retention_class"])
        if data.get("conversation_id"):
            kwargs["conversation_id"] = data["conversation_id"]
        return kwargs


class MemoryBatchSerializer(strict.Serializer):
    memory_store_id = serializers.CharField(max_length=40)
    memories = serializers.ListField(
        child=MemoryBatchItemSerializer(), allow_empty=False,
        help_text="Written in this order, each as POST /memories would (at most MAX_BATCH_MEMORIES, 1,000).")
    duplicate_threshold = serializers.FloatField(required=False, allow_null=True)
    supersede_threshold = serializers.FloatField(required=False, allow_null=True)


class MemoryBatchItemResultSerializer(strict.Serializer):
    index = serializers.IntegerField(help_text="The item's position in `memories`.")
    action = serializers.ChoiceField(choices=["created", "superseded", "skipped"], required=False,
                                     help_text="Absent when the item was refused (`error`).")
    memory_id = serializers.CharField(required=False, help_text="The memory created, superseding, or kept.")
    assertion_id = serializers.CharField(required=False)
    decision_reason = serializers.CharField(required=False)
    similarity = serializers.FloatField(required=False, allow_null=True)
    superseded_memory_id = serializers.CharField(required=False, allow_null=True)
    consent_category = serializers.ChoiceField(choices=ConsentCategory.choices, required=False,
                                               help_text="The memory's consent category after the write.")
    error = ErrorSerializer(required=False, help_text="Why this item was refused; nothing of it was written.")


class MemoryBatchSummarySerializer(strict.Serializer):
    """What a batch did, counted: items per action, refused items, written items per decision reason."""

    created = serializers.IntegerField()
    superseded = serializers.IntegerField(help_text="Items that retired a live memory (their `superseded_memory_id`).")
    skipped = serializers.IntegerField()
    refused = serializers.IntegerField(help_text="Items refused with an `error` (`counts.failed`).")
    reasons = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="Written items per `decision_reason` (below_threshold, duplicate, similar, changed_detail, "
                  "value_change, about_key, judge, …), most frequent first; docs/write-funnel.md.")


class MemoryBatchResultSerializer(strict.Serializer):
    results = MemoryBatchItemResultSerializer(many=True)
    counts = serializers.DictField(child=serializers.IntegerField(),
                                   help_text="{created, superseded, skipped, failed}")
    summary = MemoryBatchSummarySerializer(help_text="What the batch did: items per action, refused items, and "
                                                     "written items per decision reason.")


def batch_results(outcomes: list[Any]) -> dict[str, Any]:
    """The answer of a batch: one entry per item, in order, the counts and the summary."""
    results: list[dict[str, Any]] = []
    counts = {"created": 0, "superseded": 0, "skipped": 0, "failed": 0}
    for outcome in outcomes:
        if outcome.error is not None:
            counts["failed"] += 1
            results.append({"index": outcome.index, "error": outcome.error.as_dict()})
            continue
        result = outcome.result
        counts[result.action] += 1
        results.append({"index": outcome.index, "action": result.action, "memory_id": result.memory.pk,
                        "assertion_id": result.assertion.pk, "decision_reason": result.decision_reason,
                        "similarity": result.similarity,
                        "superseded_memory_id": result.replaced.pk if result.replaced else None,
                        "consent_category": result.memory.consent_category})
    return {"results": results, "counts": counts, "summary": BatchSummary.of(outcomes).as_dict()}


class MemoryRetentionSerializer(strict.Serializer):
    retention_class = serializers.ChoiceField(choices=RetentionClass.choices)


class MemorySerializer(strict.ModelSerializer):
    memory_store_id = serializers.CharField(source="store_id", read_only=True)
    content = serializers.CharField(source="content.text", read_only=True)
    content_id = serializers.CharField(read_only=True)
    superseded_by_memory_id = serializers.CharField(source="superseded_by_id", read_only=True, allow_null=True)
    about = serializers.SerializerMethodField()
    subjects = serializers.ListField(
        child=serializers.CharField(), read_only=True,
        help_text="Who or what the memory is about, as the write funnel compares it: identifiers (id:acme-19), the "
                  "name it opens with (name:dana whitfield), its about key (about:kind/key); marked ~ when named as a "
                  "value. A memory about other subjects is never skipped into or superseded (docs/write-funnel.md).")
    agent_id = serializers.CharField(read_only=True, allow_null=True)
    derived_from = serializers.SerializerMethodField(
        help_text="lineage derived: the document versions it was read out of that you may see.")

    class Meta:
        model = Memory
        fields = [
            "id", "memory_store_id", "content", "content_id", "tags", "metadata", "source_type", "about", "subjects",
            "kind", "title", "summary", "confidence", "facet", "expires_at", "evidence_count", "reinforced_at",
            "trashed_at", "agent_id", "created_at", "invalidated_at", "superseded_by_memory_id",
            "retention_class", "provenance", "lineage", "consent_category", "derived_from",
        ]

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_derived_from(self, obj: Memory) -> list[str]:
        if obj.lineage != Lineage.DERIVED:
            return []
        request = self.context.get("request")
        if request is None:
            return []  # no caller to check the documents' grants against: nothing is shown
        versions = DocumentVersion.objects.filter(derived_memories__memory=obj)
        return sorted(visible(request_caller(request), versions).values_list("pk", flat=True))

    def get_about(self, obj: Memory) -> dict[str, str] | None:
        if obj.about_key is None:
            return None
        return {"kind": obj.about_kind or "", "key": obj.about_key}


class MemoryFullSerializer(MemorySerializer):
    """A memory with its whole body and lifecycle fields (open, restore)."""

    class Meta(MemorySerializer.Meta):
        fields = list(dict.fromkeys([*MemorySerializer.Meta.fields, "kind", "title", "facet", "confidence",
                                     "expires_at", "trashed_at"]))


class ChangedDetailSerializer(strict.Serializer):
    kind = serializers.CharField()
    old = serializers.ListField(child=serializers.CharField())
    new = serializers.ListField(child=serializers.CharField())


class PotentialDuplicateSerializer(strict.Serializer):
    memory_id = serializers.CharField()
    similarity = serializers.FloatField()


class MemoryWriteResultSerializer(MemorySerializer):
    action = serializers.ChoiceField(choices=["created", "superseded", "skipped"])
    similarity = serializers.FloatField(allow_null=True)
    decision_reason = serializers.CharField()
    changed_details = ChangedDetailSerializer(many=True)
    assertion_id = serializers.CharField()
    superseded_memory_id = serializers.CharField(allow_null=True)
    potential_duplicates = PotentialDuplicateSerializer(
        many=True, help_text="Live memories of the same store and facet near this text, below the supersede "
        "threshold (best first, at most 5): reconcile them if they state the same fact.")
    degraded = serializers.ListField(
        child=serializers.ChoiceField(choices=list(Degraded.ALL)),
        help_text="embed_unavailable: the embedder failed, the memory is stored without a vector "
                  "(manage.py memory_engine_reembed --missing fills it in).")

    class Meta(MemorySerializer.Meta):
        fields = ["action", *MemorySerializer.Meta.fields, "similarity", "decision_reason",
                  "changed_details", "assertion_id", "superseded_memory_id", "potential_duplicates", "degraded"]


def write_degraded(result: WriteResult) -> list[str]:
    """The search vocabulary's reasons for a write: embed_unavailable when the embedder failed."""
    return [Degraded.EMBED_UNAVAILABLE] if result.assertion.details.get("embedding") == "embedding_failed" else []


def write_response(result: WriteResult) -> Response:
    """What the funnel did, as MemoryWriteResultSerializer describes it: 201 for a created or
    superseding memory, 200 for a skip (the duplicate it matched)."""
    data = dict(MemorySerializer(result.memory).data)
    data.update(
        similarity=result.similarity,
        decision_reason=result.decision_reason,
        changed_details=result.changed_details,
        assertion_id=result.assertion.pk,
        superseded_memory_id=result.replaced.pk if result.replaced else None,
        potential_duplicates=result.potential_duplicates,
        degraded=write_degraded(result),
    )
    code = status.HTTP_200_OK if result.action == "skipped" else status.HTTP_201_CREATED
    return Response({"action": result.action, **data}, status=code)


#: The documented answers of a memory write (POST /memories and the write_memory tool).
WRITE_RESPONSES = {
    201: OpenApiResponse(MemoryWriteResultSerializer, description="created or superseded"),
    200: OpenApiResponse(MemoryWriteResultSerializer, description="skipped (a duplicate)"),
    429: OpenApiResponse(ErrorSerializer, description="Quota exceeded"),
    **ERRORS,
}


class MemoryRevisionSerializer(strict.ModelSerializer):
    content = serializers.CharField(source="content.text", read_only=True)

    class Meta:
        model = MemoryRevision
        fields = ["id", "content", "created_at"]


class MemoryAssertionSerializer(strict.ModelSerializer):
    memory_store_id = serializers.CharField(source="store_id", read_only=True)
    memory_id = serializers.CharField(read_only=True, allow_null=True)
    replaced_memory_id = serializers.CharField(read_only=True, allow_null=True)
    generation_id = serializers.CharField(read_only=True, allow_null=True)
    rule_id = serializers.CharField(read_only=True, allow_null=True)

    class Meta:
        model = MemoryAssertion
        fields = [
            "id", "memory_store_id", "memory_id", "replaced_memory_id", "content", "outcome",
            "similarity", "decision_reason", "details", "principal", "mechanism", "generation_id",
            "rule_id", "created_at",
        ]


# --- filters --------------------------------------------------------------------------


class MemoryFilter(django_filters.FilterSet):
    memory_store_id = ScopeIdFilter(param="memory_store_id", model=MemoryStore, field_name="store_id")
    tags = django_filters.CharFilter(method="filter_tags", help_text='JSON object, e.g. {"team": "a"}')
    include_invalidated = django_filters.BooleanFilter(
        method="filter_validity", help_text="Also superseded and trashed memories (never expired ones).")
    source_type = django_filters.CharFilter()
    provenance = django_filters.ChoiceFilter(choices=Provenance.choices)
    lineage = django_filters.ChoiceFilter(choices=Lineage.choices)
    consent_category = django_filters.ChoiceFilter(choices=ConsentCategory.choices)
    facet = django_filters.CharFilter(
        method="filter_facet", help_text="That facet's memories and the cross-cutting ones (no facet).")

    class Meta:
        model = Memory
        fields = ["memory_store_id", "tags", "include_invalidated", "source_type", "provenance", "lineage",
                  "consent_category", "facet"]

    def filter_facet(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return in_facet(queryset, validate_facet(value))

    def filter_tags(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        tags = parse_tags_param(value)
        if not tags:
            return queryset
        return queryset.filter(Q(tags__contains=tags) | Q(store__tags__contains=tags))

    def filter_validity(self, queryset: QuerySet, name: str, value: bool | None) -> QuerySet:
        return queryset  # applied in filter_queryset so the default (valid only) holds when absent

    def filter_queryset(self, queryset: QuerySet) -> QuerySet:
        queryset = super().filter_queryset(queryset)
        if not self.form.cleaned_data.get("include_invalidated"):
            queryset = queryset.filter(live_memory_q())
        return queryset


class LedgerMemoryFilter(ScopeIdFilter):
    """``?memory_id=``: a memory the caller may see, or one deleted since (a forgotten user-tier
    memory, an expired one) whose ledger rows it may see: the ledger outlives the row."""

    def known(self, request: Any, value: Any) -> bool:
        ledger = MemoryAssertion.objects.filter(Q(memory_id=value) | Q(replaced_memory_id=value),
                                                store__project=request_project(request))
        return super().known(request, value) or visible(request_caller(request), ledger).exists()


class MemoryStoreFilter(django_filters.FilterSet):
    name = NonBlankFilter(help_text="Only the store of this name (names are unique per project): find a store "
                                    "before creating it.")

    class Meta:
        model = MemoryStore
        fields = ["name"]


class MemoryAssertionFilter(django_filters.FilterSet):
    memory_store_id = ScopeIdFilter(param="memory_store_id", model=MemoryStore, field_name="store_id")
    memory_id = LedgerMemoryFilter(param="memory_id", model=Memory, project_path="store__project",
                              match=lambda rows, value: rows.filter(Q(memory_id=value) | Q(replaced_memory_id=value)))
    outcome = django_filters.CharFilter()
    mechanism = django_filters.CharFilter()
    principal = django_filters.CharFilter()
    generation_id = ScopeIdFilter(param="generation_id", model=Generation, field_name="generation_id")
    rule_id = ScopeIdFilter(param="rule_id", model=MemoryRule, project_path="store__project", field_name="rule_id")
    created_after = django_filters.IsoDateTimeFilter(method="filter_created")
    created_before = django_filters.IsoDateTimeFilter(method="filter_created")

    class Meta:
        model = MemoryAssertion
        fields: list[str] = []

    def filter_created(self, queryset: QuerySet, name: str, value: datetime | None) -> QuerySet:
        if value is None:
            return queryset
        try:  # PostgreSQL refuses UTC offsets over 15:59 that Python accepts
            value = value.astimezone(UTC)
        except OverflowError:
            raise ValidationFailed(f"`{name}` is out of range.", details={name: str(value)}) from None
        lookup = "created_at__gte" if name == "created_after" else "created_at__lt"
        return queryset.filter(**{lookup: value})



# --- views ----------------------------------------------------------------------------


def stores_with_counts(project: Project) -> QuerySet[MemoryStore]:
    """The project's stores, each annotated with ``valid_memories``: its live memories."""
    return MemoryStore.objects.filter(project=project).annotate(
        valid_memories=Count("memories", filter=live_memory_q("memories__")))


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
            visible(self.caller, Memory.objects.filter(store__project=self.project), self.detail_action)
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
