"""Agents: CRUD, push retrieval (``/context``), tool definitions (``/tools``, and with guidance
``/tool-guidance``; which tools, memory_engine.agent_tools decides) and the tools an agent calls
(``/tools/search_knowledge``, ``/tools/open_memory``, ``/tools/list_memories``, ``/tools/write_memory``,
``/tools/forget_memory``)."""

from __future__ import annotations

from typing import Any

from django.db.models import OuterRef, QuerySet, Subquery
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory_engine import strict
from memory_engine.agent_tools import (
    FORMATS,
    ForgetMemoryToolRequestSerializer,
    ListMemoriesToolRequestSerializer,
    OpenMemoryToolRequestSerializer,
    SearchToolRequestSerializer,
    WriteMemoryToolSerializer,
    agent_tool_definitions,
    agent_tool_guidance,
    run_forget_memory,
    run_list_memories,
    run_open_memory,
    run_search_knowledge,
    run_write_memory,
)
from memory_engine.exceptions import AgentNotFound
from memory_engine.injection import inject_knowledge
from memory_engine.models import Agent, MemoryStore
from memory_engine.models.memories import Tier
from memory_engine.policy import ADD, get_visible_or_404, require, visible
from memory_engine.selectors.agents import agent_scope_in_reach
from memory_engine.services.agents import UNSET, agent_create, agent_delete, agent_update
from memory_engine.strict import JSONObjectField
from memory_engine.subjects import validate_subject

from .exceptions import ERRORS, ErrorSerializer
from .memories import WRITE_RESPONSES, MemoryFullSerializer, write_response
from .scoping import ProjectScopedMixin
from .search import SEARCH_PERMISSIONS, SearchResultSerializer

#: The query parameters of ``/tools`` and ``/tool-guidance``.
TOOLS_PARAMETERS = [
    OpenApiParameter("subject", str, required=False,
                     description="The end user the host will pin on the calls: write_memory and forget_memory are "
                                 "offered for their store even when the agent has no write store."),
]


def _tools_subject(request: Request) -> str | None:
    return validate_subject(request.query_params.get("subject") or None, allow_none=True)


class AgentSerializer(strict.ModelSerializer):
    knowledge_config = JSONObjectField(
        required=False,
        help_text="memory_store_ids, document_ids, document_paths, tags, min_score, limit (5), rrf_k, "
                  "recency_half_life_days.",
    )
    write_memory_store_id = serializers.CharField(required=False, allow_null=True, max_length=40)
    name = serializers.CharField(max_length=200)
    memory_store_id = serializers.SerializerMethodField(
        help_text="The agent's own (agent-tier) memory store, created with it; null for older agents.")

    class Meta:
        model = Agent
        fields = ["id", "name", "knowledge_config", "write_memory_store_id", "memory_store_id", "created_at"]
        read_only_fields = ["id", "created_at"]

    def to_representation(self, agent: Agent) -> dict[str, Any]:
        data = super().to_representation(agent)
        caller = getattr(self.context.get("view"), "caller", None)
        if caller is not None:  # the stores and documents it names, as far as the reader reaches
            data["knowledge_config"], data["write_memory_store_id"] = agent_scope_in_reach(caller, agent)
        return data

    def get_memory_store_id(self, agent: Agent) -> str | None:
        if hasattr(agent, "own_store_id"):  # annotated by AgentViewSet.get_queryset
            return agent.own_store_id
        return (agent.own_stores.filter(project_id=agent.project_id, tier=Tier.AGENT)
                .values_list("pk", flat=True).first())


class AgentContextRequestSerializer(strict.Serializer):
    messages = serializers.ListField(child=serializers.DictField(), help_text="Chat messages [{role, content}].")
    override = JSONObjectField(required=False, allow_null=True,
                               help_text="Per-generation knowledge_config override (arrays unioned, "
                                         "tags merged per key, scalars overridden).")
    query = serializers.CharField(required=False, allow_null=True, trim_whitespace=False,
                                  help_text="Defaults to the last user message.")
    subject = serializers.CharField(required=False, allow_null=True, allow_blank=True, trim_whitespace=False,
                                    help_text="The end user's external id: recall includes their user-tier store.")
    facet = serializers.CharField(required=False, allow_null=True, allow_blank=True, trim_whitespace=False,
                                  help_text="Pinned facet: that facet's memories and the cross-cutting ones.")


class AgentContextResponseSerializer(strict.Serializer):
    messages = serializers.ListField(child=serializers.DictField())
    injected = serializers.BooleanField()
    knowledge = SearchResultSerializer()


class ToolsResponseSerializer(strict.Serializer):
    provider = serializers.ChoiceField(choices=FORMATS)
    tools = serializers.ListField(child=serializers.DictField())


class SchemaEntryOutSerializer(strict.Serializer):
    name = serializers.CharField()
    display_name = serializers.CharField()
    description = serializers.CharField()


class ToolGuidanceResponseSerializer(strict.Serializer):
    provider = serializers.ChoiceField(choices=FORMATS)
    kinds = SchemaEntryOutSerializer(many=True, help_text="The project's declared memory kinds (empty: open).")
    relation_types = SchemaEntryOutSerializer(many=True)
    tools = serializers.ListField(child=serializers.DictField(), help_text="As GET /agents/{id}/tools.")
    guidance = serializers.CharField(help_text="Text for the host's system prompt: when to use each tool, "
                                               "and the kinds.")


class SearchToolResponseSerializer(strict.Serializer):
    content = serializers.CharField(help_text="Text to hand back to the model as the tool result.")
    knowledge = SearchResultSerializer()


class OpenMemoryToolResponseSerializer(strict.Serializer):
    content = serializers.CharField(help_text="Text to hand back to the model as the tool result.")
    memory = MemoryFullSerializer()


class ListMemoriesToolResponseSerializer(strict.Serializer):
    content = serializers.CharField(help_text="Text to hand back to the model as the tool result.")
    memory_ids = serializers.ListField(child=serializers.CharField(), help_text="The memories listed, in order.")


class ForgetMemoryToolResponseSerializer(strict.Serializer):
    content = serializers.CharField(help_text="Text to hand back to the model as the tool result.")
    memory_id = serializers.CharField()
    assertion_id = serializers.CharField(help_text="The forget's assertion (outcome forgotten, mechanism tool).")


@extend_schema_view(
    list=extend_schema(responses={200: AgentSerializer(many=True), **ERRORS}),
    create=extend_schema(responses={201: AgentSerializer, **ERRORS}),
    retrieve=extend_schema(responses={200: AgentSerializer, **ERRORS}),
    update=extend_schema(responses={200: AgentSerializer, **ERRORS}),
    partial_update=extend_schema(responses={200: AgentSerializer, **ERRORS}),
    destroy=extend_schema(responses={204: None, **ERRORS}),
)
class AgentViewSet(ProjectScopedMixin, viewsets.ModelViewSet):
    """Your agents: their retrieval scope (knowledge_config) and optional write memory store."""

    queryset = Agent.objects.none()  # schema generation only; get_queryset scopes by project
    serializer_class = AgentSerializer
    filterset_fields: list[str] = []
    #: Set per action: reading context or running a search is allowed with read-only keys.
    read_only_key_allowed = False
    replica_search = True  # context and the search tool may search on a replica (memory_engine.replicas)
    not_found_error = AgentNotFound
    not_found_field = "agent_id"

    def get_queryset(self) -> QuerySet[Agent]:
        own = MemoryStore.objects.filter(project=self.project, agent=OuterRef("pk"), tier=Tier.AGENT).values("pk")[:1]
        agents = visible(self.caller, Agent.objects.filter(project=self.project), self.detail_action)
        return agents.select_related("project").annotate(own_store_id=Subquery(own)).order_by("name", "id")

    def perform_create(self, serializer: Any) -> None:
        data = serializer.validated_data
        serializer.instance = agent_create(
            project=self.project, name=data["name"], knowledge_config=data.get("knowledge_config"), caller=self.caller,
            write_memory_store_id=data.get("write_memory_store_id", UNSET),
        )

    def perform_update(self, serializer: Any) -> None:
        data = serializer.validated_data
        require(self.caller, ADD, serializer.instance)
        serializer.instance = agent_update(
            agent=serializer.instance, name=data.get("name"), caller=self.caller,
            knowledge_config=data.get("knowledge_config", UNSET),
            write_memory_store_id=data.get("write_memory_store_id", UNSET),
        )

    def perform_destroy(self, instance: Agent) -> None:
        agent_delete(agent=instance, caller=self.caller)

    @extend_schema(request=AgentContextRequestSerializer,
                   responses={200: AgentContextResponseSerializer,
                              503: OpenApiResponse(ErrorSerializer, description="No embedding provider"),
                              **ERRORS})
    @action(detail=True, methods=["post"], read_only_key_allowed=True,
            session_permissions=["view_agent", *SEARCH_PERMISSIONS])
    def context(self, request: Request, pk: str | None = None) -> Response:
        """The turn's messages with a fenced <knowledge> block prepended as a user message."""
        agent = self.get_object()
        serializer = AgentContextRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        messages, result = inject_knowledge(data["messages"], agent=agent, override=data.get("override"),
                                            query=data.get("query") or None, subject=data.get("subject"),
                                            facet=data.get("facet"), caller=self.caller)
        return Response({
            "messages": messages,
            "injected": len(messages) > len(data["messages"]),
            "knowledge": SearchResultSerializer(result.as_dict()).data,
        })

    @extend_schema(
        parameters=[OpenApiParameter("provider", str, enum=list(FORMATS), default="openai",
                                     description="Function-calling shape (`?format=` is DRF's renderer switch)."),
                    *TOOLS_PARAMETERS],
        responses={200: ToolsResponseSerializer, **ERRORS}, filters=False,
    )
    @action(detail=True, methods=["get"], pagination_class=None)
    def tools(self, request: Request, pk: str | None = None) -> Response:
        """Function-calling definitions, as the MCP server lists them: search_knowledge, open_memory and
        list_memories; write_memory and forget_memory when the caller may write and the agent has a
        write store (or a ``subject`` is given)."""
        agent = self.get_object()
        fmt = request.query_params.get("provider", "openai")
        return Response({"provider": fmt, "tools": agent_tool_definitions(
            agent, fmt=fmt, caller=self.caller, subject=_tools_subject(request))})

    @extend_schema(
        parameters=[OpenApiParameter("provider", str, enum=list(FORMATS), default="openai",
                                     description="Function-calling shape of `tools`."),
                    *TOOLS_PARAMETERS],
        responses={200: ToolGuidanceResponseSerializer, **ERRORS}, filters=False,
    )
    @action(detail=True, methods=["get"], url_path="tool-guidance", pagination_class=None)
    def tool_guidance(self, request: Request, pk: str | None = None) -> Response:
        """The agent's tools with the project's memory kinds, and guidance text for a system prompt."""
        agent = self.get_object()
        return Response(agent_tool_guidance(agent, fmt=request.query_params.get("provider", "openai"),
                                            caller=self.caller, subject=_tools_subject(request)))

    @extend_schema(request=SearchToolRequestSerializer,
                   responses={200: SearchToolResponseSerializer, **ERRORS})
    @action(detail=True, methods=["post"], url_path="tools/search_knowledge", read_only_key_allowed=True,
            session_permissions=["view_agent", *SEARCH_PERMISSIONS])
    def search_knowledge(self, request: Request, pk: str | None = None) -> Response:
        """Run a search_knowledge tool call inside the agent's scope."""
        agent = self.get_object()
        serializer = SearchToolRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        subject, pinned = serializer.pins()
        arguments = {k: v for k, v in serializer.validated_data.items() if k not in ("subject", "pinned_facet")}
        content, result = run_search_knowledge(agent, arguments, subject=subject, facet=pinned,
                                               caller=self.caller)
        return Response({"content": content, "knowledge": SearchResultSerializer(result.as_dict()).data},
                        status=status.HTTP_200_OK)

    @extend_schema(request=OpenMemoryToolRequestSerializer,
                   responses={200: OpenMemoryToolResponseSerializer, **ERRORS})
    @action(detail=True, methods=["post"], url_path="tools/open_memory", read_only_key_allowed=True,
            session_permissions=["view_agent", "view_memory"])
    def open_memory(self, request: Request, pk: str | None = None) -> Response:
        """Run an open_memory tool call: the full body of a live memory this agent may see
        (its knowledge_config's stores and its write store); any other id answers 404."""
        agent = self.get_object()
        serializer = OpenMemoryToolRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        subject, pinned = serializer.pins()
        content, memory = run_open_memory(agent, {"id": serializer.validated_data["id"]}, subject=subject,
                                          facet=pinned, caller=self.caller)
        return Response({"content": content, "memory": MemoryFullSerializer(memory).data})

    @extend_schema(request=ListMemoriesToolRequestSerializer,
                   responses={200: ListMemoriesToolResponseSerializer, **ERRORS})
    @action(detail=True, methods=["post"], url_path="tools/list_memories", read_only_key_allowed=True,
            session_permissions=["view_agent", "view_memory"])
    def list_memories(self, request: Request, pk: str | None = None) -> Response:
        """Run a list_memories tool call: the live memories this agent may open, newest first, as
        previews."""
        agent = self.get_object()
        serializer = ListMemoriesToolRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        subject, pinned = serializer.pins()
        arguments = {k: v for k, v in serializer.validated_data.items() if k not in ("subject", "pinned_facet")}
        content, memories = run_list_memories(agent, arguments, subject=subject, facet=pinned, caller=self.caller)
        return Response({"content": content, "memory_ids": [memory.pk for memory in memories]})


def _tool_agent(view: ProjectScopedMixin, agent_id: str) -> Agent:
    """The agent a writing tool acts for: one the caller sees (the tool then checks what it may
    write), else 404 AGENT_NOT_FOUND as for an unknown id."""
    agent = get_visible_or_404(view.caller, Agent.objects.filter(project=view.project).select_related(
        "write_memory_store"), agent_id, error=AgentNotFound, field="agent_id")
    agent.project = view.project  # the agent's own (the filter above), read again by the write
    return agent


class WriteMemoryToolView(ProjectScopedMixin, APIView):
    """The agent's ``write_memory`` tool: one fact into the agent's write memory store, or with the
    host's ``subject`` into that end user's store."""

    session_permissions = ["add_memory"]

    @extend_schema(request=WriteMemoryToolSerializer, responses=WRITE_RESPONSES)
    def post(self, request: Request, agent_id: str) -> Response:
        return write_response(run_write_memory(_tool_agent(self, agent_id), request.data, caller=self.caller))


class ForgetMemoryToolView(ProjectScopedMixin, APIView):
    """The agent's ``forget_memory`` tool: forget a live memory of a store the agent writes to (its
    write store, its own agent-tier store, the host's ``subject``'s store); any other id answers
    404 like an unknown one."""

    session_permissions = ["delete_memory"]

    @extend_schema(request=ForgetMemoryToolRequestSerializer,
                   responses={200: ForgetMemoryToolResponseSerializer, **ERRORS})
    def post(self, request: Request, agent_id: str) -> Response:
        agent = _tool_agent(self, agent_id)
        serializer = ForgetMemoryToolRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        subject, pinned = serializer.pins()
        memory_id = serializer.validated_data["id"]
        content, assertion = run_forget_memory(agent, {"id": memory_id}, subject=subject, facet=pinned,
                                               caller=self.caller)
        return Response({"content": content, "memory_id": memory_id.strip(), "assertion_id": assertion.pk})
