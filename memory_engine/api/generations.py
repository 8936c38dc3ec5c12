"""Generations: an agent's recorded turns, completing them, and the ledger rows of each."""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from memory_engine import strict
from memory_engine.exceptions import AgentNotFound, GenerationNotFound, RuleNotFound
from memory_engine.models import Agent, Generation, MemoryAssertion, MemoryRule
from memory_engine.models.agents import GenerationStatus
from memory_engine.policy import ADD, get_visible_or_404, require, visible
from memory_engine.services.generations import complete_generation, record_generation

from .exceptions import ERRORS, ErrorSerializer
from .memories import MemoryAssertionSerializer
from .scoping import ProjectScopedMixin, ScopeIdFilter


class GenerationSerializer(strict.ModelSerializer):
    agent_id = serializers.CharField(read_only=True)
    initiator_id = serializers.CharField(read_only=True, allow_null=True)
    started_by_rule_id = serializers.CharField(read_only=True, allow_null=True)
    extraction = serializers.DictField(
        read_only=True, help_text="Per rule id: {created, superseded, skipped, failed, error}."
    )

    class Meta:
        model = Generation
        fields = ["id", "agent_id", "input_messages", "output", "status", "initiator_id", "started_by_rule_id",
                  "extraction", "created_at", "completed_at"]
        read_only_fields = fields


class GenerationCreateSerializer(strict.Serializer):
    agent_id = serializers.CharField(max_length=40)
    # The stubs allow only a mapping as a JSONField's default; any JSON value is valid.
    input_messages = serializers.JSONField(default=list,  # type: ignore[arg-type]
                                           help_text="OpenAI chat format: [{role, content}].")
    output = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    status = serializers.ChoiceField(choices=GenerationStatus.choices, default=GenerationStatus.RUNNING)
    initiator_id = serializers.CharField(required=False, allow_null=True, max_length=40)
    started_by_rule_id = serializers.CharField(
        required=False, allow_null=True, max_length=40,
        help_text="Set by a rule handler recording its own turn; such generations fire no rules.",
    )


class GenerationCompleteSerializer(strict.Serializer):
    output = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    # The full status set (one enum in the schema); `running` is refused by the service.
    status = serializers.ChoiceField(choices=GenerationStatus.choices, default=GenerationStatus.COMPLETED,
                                     help_text="`completed` or `failed`.")


class GenerationFilter(django_filters.FilterSet):
    agent_id = ScopeIdFilter(param="agent_id", model=Agent, field_name="agent_id")
    status = django_filters.ChoiceFilter(choices=GenerationStatus.choices)

    class Meta:
        model = Generation
        fields = ["agent_id", "status"]


@extend_schema_view(
    list=extend_schema(responses={200: GenerationSerializer(many=True), **ERRORS}),
    retrieve=extend_schema(responses={200: GenerationSerializer, **ERRORS}),
)
class GenerationViewSet(ProjectScopedMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                        viewsets.GenericViewSet):
    """Record an agent's turns; completing one fires the matching memory rules in the background."""

    queryset = Generation.objects.none()  # schema generation only; get_queryset scopes by project
    serializer_class = GenerationSerializer
    filterset_class = GenerationFilter

    def get_queryset(self) -> QuerySet[Generation]:
        generations = visible(self.caller, Generation.objects.filter(project=self.project), self.detail_action)
        return generations.order_by("-created_at", "-id")

    @extend_schema(request=GenerationCreateSerializer, responses={201: GenerationSerializer, **ERRORS})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        serializer = GenerationCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        agent = get_visible_or_404(self.caller, Agent.objects.filter(project=self.project), data["agent_id"],
                                   action=None, error=AgentNotFound, field="agent_id")
        require(self.caller, ADD, agent)  # a turn of the agent: its conversation goes with it
        initiator = rule = None
        if data.get("initiator_id"):
            initiator = get_visible_or_404(self.caller, Generation.objects.filter(project=self.project),
                                           data["initiator_id"], error=GenerationNotFound, field="initiator_id")
        if data.get("started_by_rule_id"):
            rule = get_visible_or_404(self.caller, MemoryRule.objects.filter(store__project=self.project),
                                      data["started_by_rule_id"], error=RuleNotFound, field="started_by_rule_id")
        generation = record_generation(
            agent=agent, input_messages=data["input_messages"], output=data.get("output"),
            status=data["status"], initiator=initiator, started_by_rule=rule,
        )
        return Response(GenerationSerializer(generation).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        request=GenerationCompleteSerializer,
        responses={200: GenerationSerializer, 409: OpenApiResponse(ErrorSerializer, "Already completed"),
                   **ERRORS},
    )
    @action(detail=True, methods=["post"], filterset_class=None, session_permissions=["change_generation"])
    def complete(self, request: Request, pk: str | None = None) -> Response:
        """Store the reply and final status; matching memory rules run afterwards in a worker."""
        generation = self.get_object()
        require(self.caller, ADD, generation)
        serializer = GenerationCompleteSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        generation = complete_generation(generation=generation, **serializer.validated_data)
        return Response(GenerationSerializer(generation).data)

    @extend_schema(responses={200: MemoryAssertionSerializer(many=True), **ERRORS}, filters=False)
    @action(detail=True, methods=["get"], url_path="memory-assertions", filterset_class=None)
    def memory_assertions(self, request: Request, pk: str | None = None) -> Response:
        """The ledger rows written in this turn: by its rules and by the agent's write_memory tool."""
        generation = self.get_object()
        queryset = visible(self.caller, MemoryAssertion.objects.filter(
            generation_id=generation.pk, store__project=self.project
        )).order_by("created_at", "id")
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(MemoryAssertionSerializer(page, many=True).data)
