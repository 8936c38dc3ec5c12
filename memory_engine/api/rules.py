"""Memory rules of a store: ``/api/v1/memory-stores/{id}/rules``."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from memory_engine import strict
from memory_engine.exceptions import MemoryStoreNotFound
from memory_engine.models import MemoryRule, MemoryStore
from memory_engine.models.rules import MemoryRuleAgent
from memory_engine.policy import ADD, get_visible_or_404, require
from memory_engine.redaction import mask_handler_config
from memory_engine.services.rules import memory_rule_create, memory_rule_update
from memory_engine.strict import JSONObjectField

from .exceptions import ERRORS
from .scoping import ProjectScopedMixin

SECRET_KEYS = ("secret",)


class RuleHandlerSerializer(strict.Serializer):
    type = serializers.ChoiceField(choices=MemoryRule.HandlerType.choices)
    prompt = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False,
                                   help_text="builtin: the system prompt (default: extract durable facts).")
    model = serializers.CharField(required=False, allow_blank=True, help_text="builtin: the model name.")
    provider = JSONObjectField(required=False, help_text="builtin: BASE_URL, API_KEY, MODEL, TIMEOUT overrides.")
    max_tokens = serializers.IntegerField(required=False, min_value=1)
    path = serializers.CharField(required=False, help_text="callable: import path of fn(transcript, rule, generation).")
    url = serializers.CharField(required=False, help_text="http: the tool's URL.")
    secret = serializers.CharField(required=False, write_only=True,
                                   help_text="http: HMAC-SHA256 key for the X-Memory-Engine-Signature header.")
    timeout = serializers.FloatField(required=False, min_value=0.1)
    retries = serializers.IntegerField(required=False, min_value=0, max_value=5)
    agent_id = serializers.CharField(required=False, help_text="The agent this handler runs as (fires no rules).")
    secret_set = serializers.BooleanField(read_only=True)


class MemoryRuleSerializer(strict.ModelSerializer):
    memory_store_id = serializers.CharField(source="store_id", read_only=True)
    source_agent_ids = serializers.ListField(child=serializers.CharField(max_length=40), required=False,
                                             max_length=500, help_text="Empty: every agent of the project.")
    handler = RuleHandlerSerializer()

    class Meta:
        model = MemoryRule
        fields = ["id", "memory_store_id", "on", "source_agent_ids", "enabled", "handler", "created_at"]
        read_only_fields = ["id", "memory_store_id", "created_at"]

    def to_representation(self, rule: MemoryRule) -> dict[str, Any]:
        config = dict(rule.handler_config or {})
        handler: dict[str, Any] = {"type": rule.handler_type}
        handler.update({k: v for k, v in mask_handler_config(config).items() if k not in SECRET_KEYS})
        handler["secret_set"] = bool(config.get("secret"))
        return {
            "id": rule.pk,
            "memory_store_id": rule.store_id,
            "on": rule.on,
            "source_agent_ids": sorted(MemoryRuleAgent.objects.filter(project_id=rule.project_id, memoryrule_id=rule.pk)
                                       .values_list("agent_id", flat=True)),
            "enabled": rule.enabled,
            "handler": handler,
            "created_at": serializers.DateTimeField().to_representation(rule.created_at),
        }


def _handler_args(data: dict[str, Any], default_type: str | None = None) -> dict[str, Any]:
    handler = data.get("handler")
    if handler is None:
        return {}
    config = {k: v for k, v in handler.items() if k != "type"}
    # A PATCH may send a handler without `type` (the nested serializer is partial): keep the rule's.
    return {"handler_type": handler.get("type", default_type), "handler_config": config}


@extend_schema_view(
    list=extend_schema(responses={200: MemoryRuleSerializer(many=True), **ERRORS}),
    create=extend_schema(responses={201: MemoryRuleSerializer, **ERRORS}),
    retrieve=extend_schema(responses={200: MemoryRuleSerializer, **ERRORS}),
    update=extend_schema(responses={200: MemoryRuleSerializer, **ERRORS}),
    partial_update=extend_schema(responses={200: MemoryRuleSerializer, **ERRORS}),
    destroy=extend_schema(responses={204: None, **ERRORS}),
)
class MemoryRuleViewSet(ProjectScopedMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                        mixins.DestroyModelMixin, viewsets.GenericViewSet):
    """What to extract into this store when a generation completes, and with which handler. A rule
    acts as the principal that created or last changed it: its firings write only where that
    principal's grants allow ``add``, checked again at each firing."""

    queryset = MemoryRule.objects.none()  # schema generation only; get_queryset scopes by project
    serializer_class = MemoryRuleSerializer
    filterset_fields: list[str] = []

    @property
    def store(self) -> MemoryStore:
        """The store of the path, in the caller's reach (else 404 like an unknown id); a rule writes
        into it, so changing its rules needs ``add`` on it (403 GRANT_REQUIRED)."""
        store = get_visible_or_404(self.caller, MemoryStore.objects.filter(project=self.project),
                                   self.kwargs["store_id"], action=self.detail_action, error=MemoryStoreNotFound,
                                   field="memory_store_id")
        if self.request.method not in ("GET", "HEAD", "OPTIONS"):
            require(self.caller, ADD, store)
        return store

    def get_queryset(self) -> QuerySet[MemoryRule]:
        return (
            MemoryRule.objects.filter(project=self.project, store=self.store).order_by("created_at", "id")
        )

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        rule = memory_rule_create(
            store=self.store, source_agent_ids=data.get("source_agent_ids", []),
            enabled=data.get("enabled", True), on=data.get("on", MemoryRule.On.GENERATION_COMPLETED),
            caller=self.caller, **_handler_args(data),
        )
        return Response(self.get_serializer(rule).data, status=status.HTTP_201_CREATED)

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        partial = kwargs.pop("partial", False)
        rule = self.get_object()
        serializer = self.get_serializer(rule, data=request.data, partial=partial)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        rule = memory_rule_update(
            rule=rule, source_agent_ids=data.get("source_agent_ids", None if partial else []),
            enabled=data.get("enabled", None if partial else True),
            on=data.get("on", None if partial else MemoryRule.On.GENERATION_COMPLETED),
            caller=self.caller, **_handler_args(data, default_type=rule.handler_type),
        )
        return Response(self.get_serializer(rule).data)

    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        kwargs["partial"] = True
        return self.update(request, *args, **kwargs)
