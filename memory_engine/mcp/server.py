"""One MCP connection: an API key, optionally pinned to an agent, a subject and a facet.

The tool list is rendered from the project's memory schema by :mod:`memory_engine.agent_tools` (the
same definitions as ``GET /agents/{id}/tools``) and each call runs through the same validation
and services as the REST tool endpoints, as mechanism ``tool`` with the key as principal. A
:class:`~memory_engine.exceptions.MemoryEngineError` becomes an MCP tool error whose text and
structured content are the REST error body (``{"code", "message", "details"}``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async
from django.db import DEFAULT_DB_ALIAS, DatabaseError
from rest_framework import exceptions as drf_exceptions

from memory_engine import __version__, replicas
from memory_engine.agent_tools import (
    WRITE_TOOLS,
    SearchToolRequestSerializer,
    run_forget_memory,
    run_list_memories,
    run_open_memory,
    run_search_knowledge,
    run_write_memory,
    validated,
)
from memory_engine.agent_tools import tool_definitions as agent_tools_for
from memory_engine.exceptions import (
    AgentNotFound,
    AuthenticationFailed,
    MemoryEngineError,
    ReadOnlyKey,
    UnknownField,
    ValidationFailed,
)
from memory_engine.facets import validate_facet
from memory_engine.models import Agent, ApiKey
from memory_engine.policy import Principal, get_visible_or_404, key_principal
from memory_engine.services.keys import api_key_authenticate
from memory_engine.services.memory_schema import memory_schema_of
from memory_engine.subjects import validate_subject

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

SERVER_NAME = "memory-engine"

#: The argument every tool takes when the connection names no agent.
AGENT_ID_PROPERTY = {"type": "string", "description": "The id of the agent you act as (agt_…)."}


@dataclass(frozen=True)
class Connection:
    """Who is calling: the key (its project, grants, read-only flag) and what the host pinned.
    The model cannot change a pinned ``agent``, ``subject`` or ``facet``: they are not tool
    arguments when pinned, and an argument the schema does not name is refused."""

    key: ApiKey
    caller: Principal
    agent: Agent | None = None
    subject: str | None = None
    facet: str | None = None

    @property
    def principal(self) -> str:
        return self.caller.label

    def renewed(self) -> Connection:
        """This connection as its key is now: a stdio server lives as long as its client, and a
        revoked key, changed grants or an agent moved out of reach must apply to the next call
        (401 AUTHENTICATION_FAILED, the narrower reach, 404 AGENT_NOT_FOUND)."""
        key = ApiKey.objects.select_related("project").filter(pk=self.key.pk).first()
        if key is None or not key.is_active:
            raise AuthenticationFailed("This API key is revoked or expired.")
        caller = key_principal(key)
        agent = _visible_agent(caller, key, self.agent.pk) if self.agent is not None else None
        return replace(self, key=key, caller=caller, agent=agent)


def connect(raw_key: str, *, agent_id: str | None = None, subject: str | None = None,
            facet: str | None = None) -> Connection:
    """The connection of ``raw_key``: 401 AUTHENTICATION_FAILED for a bad key, 404
    AGENT_NOT_FOUND for an agent of another project, 400 for an invalid subject or facet."""
    key = api_key_authenticate(raw_key)
    caller = key_principal(key)
    agent = None
    if agent_id:
        agent = _visible_agent(caller, key, agent_id)
    return Connection(key=key, caller=caller, agent=agent,
                      subject=validate_subject(subject or None, allow_none=True), facet=validate_facet(facet or None))


def _visible_agent(caller: Principal, key: ApiKey, agent_id: Any) -> Agent:
    """An agent of the key's project in its reach; else 404 AGENT_NOT_FOUND, as for an unknown id."""
    agents = Agent.objects.filter(project_id=key.project_id).select_related("project", "write_memory_store")
    return get_visible_or_404(caller, agents, agent_id, error=AgentNotFound, field="agent_id")


def tool_definitions(connection: Connection) -> list[dict[str, Any]]:
    """The connection's tools in the neutral ``{name, description, parameters}`` shape.

    Which tools: :func:`memory_engine.agent_tools.tool_definitions` decides, for the key, the
    pinned agent and the pinned subject, as it does for ``GET /agents/{id}/tools``. What the pins
    change here: the model's ``facet`` argument is gone when the host pinned one; ``agent_id`` is a
    required argument when it did not pin an agent."""
    kinds = memory_schema_of(connection.key.project)["kinds"]
    definitions = agent_tools_for(connection.agent, kinds, caller=connection.caller, subject=connection.subject)
    rendered = []
    for definition in definitions:
        parameters = json.loads(json.dumps(definition["parameters"]))
        if connection.facet is not None:
            parameters["properties"].pop("facet", None)
        if connection.agent is None:
            parameters["properties"] = {"agent_id": AGENT_ID_PROPERTY, **parameters["properties"]}
            parameters["required"] = ["agent_id", *parameters.get("required", [])]
        rendered.append({**definition, "parameters": parameters})
    return rendered


def _agent(connection: Connection, arguments: dict[str, Any]) -> Agent:
    if connection.agent is not None:
        return connection.agent
    return _visible_agent(connection.caller, connection.key, arguments.pop("agent_id", None))


def run_tool(connection: Connection, name: str, arguments: dict[str, Any] | None) -> dict[str, Any]:
    """Run one tool call; ``{"content": text, ...}`` with what the REST endpoint answers besides.
    Raises MemoryEngineError (or DRF's ValidationError from the shared serializers).

    A reading tool reads from a replica when one can serve the key (memory_engine.replicas; a
    replica that fails mid-call is retried on the primary); a writing one records its write so
    the key's next reads see it."""
    if name in WRITE_TOOLS:
        result = _run_tool(connection, name, arguments)
        replicas.note_write(connection.principal)
        return result
    with replicas.reads_from_replica(connection.principal, search=name == "search_knowledge") as alias:
        try:
            return _run_tool(connection, name, arguments)
        except DatabaseError as exc:
            if alias == DEFAULT_DB_ALIAS:
                raise
            replicas.mark_down(alias, exc)
            replicas.use_primary()
            return _run_tool(connection, name, arguments)


def _run_tool(connection: Connection, name: str, arguments: dict[str, Any] | None) -> dict[str, Any]:
    if name in WRITE_TOOLS and connection.key.read_only:
        raise ReadOnlyKey()
    definitions = {d["name"]: d for d in tool_definitions(connection)}
    if name not in definitions:
        raise ValidationFailed(f"No tool named {name!r} on this connection.", details={"tool": name})
    arguments = dict(arguments or {})
    unknown = sorted(set(arguments) - set(definitions[name]["parameters"]["properties"]))
    if unknown:
        raise UnknownField(f"Unknown argument(s) for {name}: {', '.join(unknown)}.", details={"fields": unknown})
    agent = _agent(connection, arguments)
    pins: dict[str, Any] = {"subject": connection.subject, "facet": connection.facet}
    if name == "search_knowledge":
        data = validated(SearchToolRequestSerializer, arguments).validated_data
        content, result = run_search_knowledge(agent, dict(data), caller=connection.caller,
                                               **pins)
        return {"content": content, "knowledge": result.as_dict()}
    if name == "open_memory":
        content, memory = run_open_memory(agent, arguments, caller=connection.caller,
                                          **pins)
        return {"content": content, "memory_id": memory.pk}
    if name == "list_memories":
        content, memories = run_list_memories(agent, arguments, caller=connection.caller,
                                              **pins)
        return {"content": content, "memory_ids": [m.pk for m in memories]}
    if name == "forget_memory":
        content, assertion = run_forget_memory(agent, arguments, caller=connection.caller, **pins)
        return {"content": content, "memory_id": arguments["id"].strip(), "assertion_id": assertion.pk}
    result = run_write_memory(agent, arguments, caller=connection.caller, **pins)
    return {"content": f"Remembered ({result.action}): memory {result.memory.pk}.", "action": result.action,
            "memory_id": result.memory.pk, "assertion_id": result.assertion.pk,
            "superseded_memory_id": result.replaced.pk if result.replaced else None}


def error_body(exc: Exception) -> dict[str, Any] | None:
    """The REST error body of ``exc``; None for an error that is a bug (the SDK reports it)."""
    if isinstance(exc, MemoryEngineError):
        return exc.as_dict()
    if isinstance(exc, drf_exceptions.ValidationError):  # the arguments' checks (memory_engine.agent_tools)
        return {"code": ValidationFailed.code, "message": "Invalid tool arguments.", "details": {"fields": exc.detail}}
    return None


def build_server(connection: Connection) -> Server:
    """An MCP low-level server for ``connection``. Its handlers run the ORM work in Django's
    thread for synchronous code (``sync_to_async``)."""
    import mcp_types as types
    from mcp.server.lowlevel import Server

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        definitions = await sync_to_async(tool_definitions)(connection)
        return types.ListToolsResult(tools=[
            types.Tool(name=d["name"], description=d["description"], input_schema=d["parameters"])
            for d in definitions])

    def call(name: str, arguments: dict[str, Any] | None) -> tuple[bool, dict[str, Any]]:
        try:
            return False, run_tool(connection.renewed(), name, arguments)
        except Exception as exc:
            body = error_body(exc)
            if body is None:
                raise
            return True, body

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        is_error, body = await sync_to_async(call)(params.name, params.arguments)
        text = json.dumps(body) if is_error else body["content"]
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                    structured_content=body, is_error=is_error)

    return Server(SERVER_NAME, version=__version__, on_list_tools=list_tools, on_call_tool=call_tool)
