"""The tools an agent calls, in one home: their definitions (rendered from the project's memory
schema, in the OpenAI and Anthropic shapes; which tools an agent gets is decided here, for every door),
their arguments (checked strictly) and their runners.
The REST tool endpoints (memory_engine.api.agents) and the MCP server (memory_engine.mcp) are
thin adapters over this package; docs/memory.md and docs/mcp.md describe the tools."""

from .arguments import (
    MEMORY_FIELDS,
    ForgetMemoryToolRequestSerializer,
    HostPinsSerializer,
    ListMemoriesToolRequestSerializer,
    MemoryFieldsSerializer,
    OpenMemoryToolRequestSerializer,
    SearchToolRequestSerializer,
    WriteMemoryToolSerializer,
    validated,
)
from .definitions import (
    FORGET_MEMORY,
    FORMATS,
    LIST_MEMORIES,
    OPEN_MEMORY,
    SEARCH_KNOWLEDGE,
    WRITE_MEMORY,
    WRITE_TOOLS,
    agent_tool_definitions,
    agent_tool_guidance,
    search_knowledge_definition,
    tool_definitions,
    write_memory_definition,
)
from .runners import (
    agent_write_memory,
    run_forget_memory,
    run_list_memories,
    run_open_memory,
    run_search_knowledge,
    run_write_memory,
)

__all__ = [
    "FORGET_MEMORY",
    "FORMATS",
    "LIST_MEMORIES",
    "MEMORY_FIELDS",
    "OPEN_MEMORY",
    "SEARCH_KNOWLEDGE",
    "WRITE_MEMORY",
    "WRITE_TOOLS",
    "ForgetMemoryToolRequestSerializer",
    "HostPinsSerializer",
    "ListMemoriesToolRequestSerializer",
    "MemoryFieldsSerializer",
    "OpenMemoryToolRequestSerializer",
    "SearchToolRequestSerializer",
    "WriteMemoryToolSerializer",
    "agent_tool_definitions",
    "agent_tool_guidance",
    "agent_write_memory",
    "run_forget_memory",
    "run_list_memories",
    "run_open_memory",
    "run_search_knowledge",
    "run_write_memory",
    "search_knowledge_definition",
    "tool_definitions",
    "validated",
    "write_memory_definition",
]
