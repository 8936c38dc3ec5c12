"""The engine's agent tools over the Model Context Protocol (docs/mcp.md).

:mod:`memory_engine.mcp.server` serves ``search_knowledge``, ``write_memory``, ``open_memory``,
``list_memories`` and ``forget_memory`` (rendered and run by :mod:`memory_engine.agent_tools`) to one
API key's connection; ``manage.py memory_engine_mcp`` serves it over stdio and
``include("memory_engine.mcp.urls")`` over streamable HTTP. The ``mcp`` SDK is an optional
extra (``pip install django-memory-engine[mcp]``): nothing imports it until a server starts.
"""
