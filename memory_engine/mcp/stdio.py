"""The stdio transport: one connection on this process's stdin and stdout."""

from __future__ import annotations

from mcp.server.stdio import stdio_server

from .server import Connection, build_server


async def serve_stdio(connection: Connection) -> None:
    """Serve ``connection`` until the client closes stdin."""
    server = build_server(connection)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
