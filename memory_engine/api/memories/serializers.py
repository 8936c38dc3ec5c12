"""The memory API's serializers: what its requests carry and its answers hold (wire names exactly
as DESIGN.md lists them), and the answers of a write and of a batch built from them."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema_field
from rest_framework import serializers, status
from rest_framework.response import Response

from memory_engine import strict
from memory_engine.agent_tools import MEMORY_FIELDS, MemoryFieldsSerializer
from memory_engine.consent_categories import ConsentCategory
from memory_engine.models import DocumentVersion, Lineage, Memory, MemoryAssertion, MemoryRevision, MemoryStore
from memory_engine.models.retention import RetentionClass
from memory_engine.policy import visible
from memory_engine.selectors.search import Degraded
from memory_engine.services.memories import WriteResult
from memory_engine.services.memories.batch import BatchSummary
from memory_engine.strict import JSONObjectField, StrictCharField

from ..exceptions import ERRORS, ErrorSerializer
from ..fields import ShareSerializer
from ..scoping import request_caller


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
