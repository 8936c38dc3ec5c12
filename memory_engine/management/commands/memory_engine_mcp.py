"""``manage.py memory_engine_mcp --key KEY [--agent ID] [--subject X] [--facet F]``: the MCP
server over stdio, for a desktop MCP client that starts it as a subprocess (docs/mcp.md)."""

from __future__ import annotations

import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory_engine.exceptions import MemoryEngineError


class Command(BaseCommand):
    help = "Serve the memory tools over MCP on stdin/stdout, as one API key (needs the `mcp` extra)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--key", default=os.environ.get("MEMORY_ENGINE_API_KEY"),
                            help="The API key (me_…); default: $MEMORY_ENGINE_API_KEY.")
        parser.add_argument("--agent", help="Pin the agent (agt_…); else every tool takes an agent_id.")
        parser.add_argument("--subject", help="Pin the end user the agent acts for.")
        parser.add_argument("--facet", help="Pin the facet (memories of that facet and of none).")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            import anyio

            from memory_engine.mcp.stdio import serve_stdio
        except ImportError as exc:
            raise CommandError(f"The MCP server needs the `mcp` extra: pip install 'django-memory-engine[mcp]' "
                               f"({exc}).") from None
        from memory_engine.mcp.server import connect

        if not options["key"]:
            raise CommandError("Pass --key (or set MEMORY_ENGINE_API_KEY).")
        try:
            connection = connect(options["key"], agent_id=options["agent"], subject=options["subject"],
                                 facet=options["facet"])
        except MemoryEngineError as exc:
            raise CommandError(f"{exc.code}: {exc.message}") from None
        anyio.run(serve_stdio, connection)
