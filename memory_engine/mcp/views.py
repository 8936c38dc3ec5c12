"""The streamable-HTTP transport as a Django view (``include("memory_engine.mcp.urls")``).

Each POST is one stateless exchange answered with JSON (the SDK's ``stateless`` and
``json_response`` modes): no session outlives the request, so the view works under ASGI and
WSGI servers alike and any worker can answer any request. The key comes in ``Authorization:
Bearer``; the host pins an agent, a subject and a facet with ``?agent=``, ``?subject=`` and
``?facet=`` (or the ``X-Memory-Agent``, ``X-Memory-Subject``, ``X-Memory-Facet`` headers).
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions as drf_exceptions

from memory_engine.auth_failures import FailedAuthThrottle
from memory_engine.exceptions import AuthenticationRequired, MemoryEngineError, Throttled

from .server import Connection, build_server, connect


def _pin(request: HttpRequest, name: str) -> str | None:
    return request.GET.get(name) or request.headers.get(f"X-Memory-{name.capitalize()}") or None


def _connection(request: HttpRequest) -> Connection:
    header = request.headers.get("Authorization", "").split()
    if len(header) != 2 or header[0].lower() != "bearer":
        raise AuthenticationRequired("Send the API key as `Authorization: Bearer <key>`.")
    try:
        return connect(header[1], agent_id=_pin(request, "agent"),
                       subject=_pin(request, "subject"), facet=_pin(request, "facet"))
    except MemoryEngineError as exc:
        if exc.status_code == 401:  # failing credentials are throttled as on the REST API
            throttle = FailedAuthThrottle()
            throttle.check(request)
            throttle.record_failure(request)
        raise


def _error(exc: MemoryEngineError) -> JsonResponse:
    response = JsonResponse(exc.as_dict(), status=exc.status_code)
    if exc.status_code == 401:
        response["WWW-Authenticate"] = "Bearer"
    return response


@csrf_exempt
async def mcp_endpoint(request: HttpRequest) -> HttpResponse:
    """One MCP request over streamable HTTP, for the caller's key."""
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    try:
        connection = await sync_to_async(_connection)(request)
    except MemoryEngineError as exc:
        return _error(exc)
    except drf_exceptions.Throttled as exc:
        return JsonResponse({"code": Throttled.code, "message": str(exc.detail), "details": {}}, status=429,
                            headers={"Retry-After": str(int(getattr(exc, "wait", None) or 1))})
    manager = StreamableHTTPSessionManager(app=build_server(connection), stateless=True, json_response=True)
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": request.method,
        "scheme": request.scheme, "path": request.path, "raw_path": request.path.encode(),
        "query_string": request.META.get("QUERY_STRING", "").encode("latin-1"), "root_path": "",
        "headers": [(name.lower().encode("latin-1"), value.encode("latin-1"))
                    for name, value in request.headers.items()],
        "server": (request.META.get("SERVER_NAME", ""), int(request.get_port() or 0)),
        "client": (request.META.get("REMOTE_ADDR", ""), 0),
    }
    body = request.body
    sent_body = False
    status = 500
    headers: list[tuple[str, str]] = []
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent_body
        if not sent_body:
            sent_body = True
            return {"type": "http.request", "body": body, "more_body": False}
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
            headers.extend((k.decode("latin-1"), v.decode("latin-1")) for k, v in message.get("headers", []))
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    async with manager.run():
        await manager.handle_request(scope, receive, send)
    response = HttpResponse(b"".join(chunks), status=status)
    for name, value in headers:
        if name.lower() not in ("content-length", "transfer-encoding"):
            response[name] = value
    return response
