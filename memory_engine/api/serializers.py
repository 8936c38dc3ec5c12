"""Serializers: wire names exactly as DESIGN.md lists them."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from memory_engine.models import Memory, MemoryAssertion, MemoryStore
from memory_engine.services.memory_write import validate_thresholds

from .fields import JSONObjectField, StrictCharField


class MemoryStoreSerializer(serializers.ModelSerializer):
    tags = JSONObjectField(required=False)
    duplicate_threshold = serializers.FloatField(required=False, allow_null=True)
    supersede_threshold = serializers.FloatField(required=False, allow_null=True)
    require_about_for_kinds = serializers.ListField(
        child=serializers.CharField(max_length=100), required=False, max_length=100
    )
    valid_memories = serializers.IntegerField(read_only=True, required=False)

    class Meta:
        model = MemoryStore
        fields = [
            "id", "name", "description", "tags", "duplicate_threshold", "supersede_threshold",
            "require_about_for_kinds", "judge_enabled", "valid_memories", "created_at",
        ]
        read_only_fields = ["id", "created_at", "valid_memories"]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        instance = self.instance
        dup = attrs.get("duplicate_threshold", getattr(instance, "duplicate_threshold", None))
        sup = attrs.get("supersede_threshold", getattr(instance, "supersede_threshold", None))
        validate_thresholds(dup, sup)
        return attrs


class AboutSerializer(serializers.Serializer):
    kind = serializers.CharField(max_length=100)
    key = serializers.CharField(max_length=200)


class MemoryWriteSerializer(serializers.Serializer):
    memory_store_id = serializers.CharField(max_length=40)
    content = StrictCharField(allow_blank=True, trim_whitespace=False)
    tags = JSONObjectField(required=False)
    metadata = JSONObjectField(required=False)
    duplicate_threshold = serializers.FloatField(required=False, allow_null=True)
    supersede_threshold = serializers.FloatField(required=False, allow_null=True)
    conversation_id = serializers.CharField(required=False, allow_blank=True, max_length=200)
    about = AboutSerializer(required=False, allow_null=True)


class MemorySerializer(serializers.ModelSerializer):
    memory_store_id = serializers.CharField(source="store_id", read_only=True)
    content = serializers.CharField(source="content.text", read_only=True)
    content_id = serializers.CharField(read_only=True)
    superseded_by_memory_id = serializers.CharField(source="superseded_by_id", read_only=True, allow_null=True)
    about = serializers.SerializerMethodField()

    class Meta:
        model = Memory
        fields = [
            "id", "memory_store_id", "content", "content_id", "tags", "metadata", "source_type", "about",
            "created_at", "invalidated_at", "superseded_by_memory_id",
        ]

    def get_about(self, obj: Memory) -> dict[str, str] | None:
        if obj.about_key is None:
            return None
        return {"kind": obj.about_kind or "", "key": obj.about_key}


class ChangedDetailSerializer(serializers.Serializer):
    kind = serializers.CharField()
    old = serializers.ListField(child=serializers.CharField())
    new = serializers.ListField(child=serializers.CharField())


class MemoryWriteResultSerializer(MemorySerializer):
    action = serializers.ChoiceField(choices=["created", "superseded", "skipped"])
    similarity = serializers.FloatField(allow_null=True)
    decision_reason = serializers.CharField()
    changed_details = ChangedDetailSerializer(many=True)
    assertion_id = serializers.CharField()
    superseded_memory_id = serializers.CharField(allow_null=True)

    class Meta(MemorySerializer.Meta):
        fields = ["action", *MemorySerializer.Meta.fields, "similarity", "decision_reason",
                  "changed_details", "assertion_id", "superseded_memory_id"]


def write_result_data(result: Any) -> dict[str, Any]:
    data = dict(MemorySerializer(result.memory).data)
    data.update(
        action=result.action,
        similarity=result.similarity,
        decision_reason=result.decision_reason,
        changed_details=result.changed_details,
        assertion_id=result.assertion.pk,
        superseded_memory_id=result.replaced.pk if result.replaced else None,
    )
    return {"action": data.pop("action"), **data}


class MemoryAssertionSerializer(serializers.ModelSerializer):
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


class EmbeddingRequestSerializer(serializers.Serializer):
    input = serializers.JSONField(help_text="A string or a list of up to 256 strings.")

    def validate_input(self, value: Any) -> list[str]:
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not items or not all(isinstance(v, str) for v in items):
            raise serializers.ValidationError("Must be a non-empty string or a list of strings.")
        if len(items) > 256:
            raise serializers.ValidationError("At most 256 inputs per request.")
        if any(len(v) > 32768 for v in items):
            raise serializers.ValidationError("Each input must be at most 32768 characters.")
        return items


class EmbeddingDataSerializer(serializers.Serializer):
    object = serializers.CharField(default="embedding")
    embedding = serializers.ListField(child=serializers.FloatField())
    index = serializers.IntegerField()


class EmbeddingResponseSerializer(serializers.Serializer):
    object = serializers.CharField(default="list")
    data = EmbeddingDataSerializer(many=True)
    model = serializers.CharField()


class ErrorSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    details = serializers.DictField()
