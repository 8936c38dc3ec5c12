"""Request limits enforced before a body is read or parsed.

* Body size: ``Content-Length`` is compared with the limit before anything reads the
  body: multipart uploads may carry ``MAX_UPLOAD_BYTES`` plus ``MULTIPART_OVERHEAD_BYTES``,
  every other body ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (Django's setting; None = no limit).
  Too large -> 413 ``REQUEST_TOO_LARGE`` (``FILE_TOO_LARGE`` for multipart uploads).
  The refused body (up to ``MAX_DISCARD_BYTES``) is then read and thrown away 64 KiB at a
  time: a client that sends its whole body before reading the answer gets the 413, the
  connection stays usable, and no server buffers it (Django's dev server would otherwise
  read the rest in one piece; gunicorn's sync worker would close on unread data, which
  resets the connection under the answer). No ``Connection`` header is set: it is
  hop-by-hop, which WSGI forbids an application to send.
  :class:`ApiGuardMiddleware` answers before the view runs (and covers the
  signed-URL views); ``ProjectScopedMixin.initial`` checks again for hosts without it.
* JSON depth: :class:`SafeJSONParser` refuses documents nested deeper than
  ``MAX_JSON_DEPTH`` with 400 ``JSON_TOO_DEEP`` (never a RecursionError 500).
* JSON sent as a form: :class:`FormBodyParser` refuses a form body that is a JSON document
  (``curl -d '{…}'`` without ``Content-Type: application/json``) with 400 ``JSON_SENT_AS_FORM``,
  instead of an ``UNKNOWN_FIELD`` naming the whole document as one field.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from rest_framework.parsers import FormParser, JSONParser

from memory_engine.conf import engine_settings
from memory_engine.exceptions import (
    FileTooLarge,
    JSONSentAsForm,
    JSONTooDeep,
    MalformedRequest,
    MemoryEngineError,
    MethodNotAllowed,
    NotFound,
    PermissionDenied,
    RequestTooLarge,
    ServerError,
)
from memory_engine.exceptions.request import human_bytes

API_PREFIX_SETTING = "API_PATH_PREFIXES"


def _content_length(request: HttpRequest) -> int:
    try:
        return max(0, int(request.META.get("CONTENT_LENGTH") or 0))
    except (TypeError, ValueError):
        return 0


def body_limit(request: HttpRequest) -> tuple[int | None, bool]:
    """(max bytes or None, whether the request is a multipart upload)."""
    content_type = (request.META.get("CONTENT_TYPE") or "").lower()
    if content_type.startswith("multipart/form-data"):
        return engine_settings.MAX_UPLOAD_BYTES + engine_settings.MULTIPART_OVERHEAD_BYTES, True
    limit = getattr(settings, "DATA_UPLOAD_MAX_MEMORY_SIZE", None)
    return (None if limit is None else int(limit)), False


#: Bytes read at a time when a refused body is thrown away.
DISCARD_CHUNK_BYTES = 64 * 1024


def discard_body(request: HttpRequest, length: int) -> int:
    """Read and drop a refused body of ``length`` declared bytes (at most MAX_DISCARD_BYTES),
    one chunk at a time; the number of bytes read."""
    cap = engine_settings.MAX_DISCARD_BYTES
    if cap is None or length > int(cap):
        return 0
    read = 0
    try:
        while read < length:
            chunk = request.read(min(DISCARD_CHUNK_BYTES, length - read))
            if not chunk:
                break
            read += len(chunk)
    except OSError:  # the client gave up or stalled past the server's timeout: nothing to answer
        pass
    return read


def check_request_size(request: HttpRequest) -> None:
    """Raise 413 when the declared body is over the limit, decided on ``Content-Length``
    alone; the refused body is then discarded (never parsed or buffered)."""
    length = _content_length(request)
    limit, multipart = body_limit(request)
    if limit is None or length <= limit:
        return
    discard_body(request, length)
    details = {"bytes": length, "max_bytes": limit}
    if multipart:
        raise FileTooLarge.sized(length, limit, what="The upload",
                                 overhead=engine_settings.MULTIPART_OVERHEAD_BYTES)
    raise RequestTooLarge(f"The request body is {human_bytes(length)}; the limit is {human_bytes(limit)} "
                          f"(Django's DATA_UPLOAD_MAX_MEMORY_SIZE = {limit}).", details=details)


#: The code of each error Django answers itself as HTML (an unmatched URL, a CSRF failure, a
#: crash); another status answers ``ERROR``. The status stays Django's.
HTML_ERRORS: dict[int, type[MemoryEngineError]] = {
    400: MalformedRequest, 403: PermissionDenied, 404: NotFound, 405: MethodNotAllowed, 413: RequestTooLarge,
    500: ServerError,
}


class ApiGuardMiddleware:
    """Under the API prefixes (MEMORY_ENGINE['API_PATH_PREFIXES']):

    * 413 ``{"code", "message", "details"}`` for oversized bodies before any view or
      parser reads them;
    * errors Django renders as HTML (a URL no route matches, a CSRF failure, a 500 page)
      become ``{"code", "message", "details"}`` JSON like every other API error.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        prefixes = tuple(getattr(engine_settings, API_PREFIX_SETTING))
        if prefixes and not request.path.startswith(prefixes):
            return self.get_response(request)
        try:
            check_request_size(request)
        except RequestTooLarge as exc:  # FILE_TOO_LARGE too
            return JsonResponse(exc.as_dict(), status=exc.status_code)
        response = self.get_response(request)
        content_type = response.get("Content-Type", "")
        if response.status_code >= 400 and content_type.startswith("text/html"):
            code = HTML_ERRORS.get(response.status_code, MemoryEngineError).code
            message = response.reason_phrase or "Error"
            response = JsonResponse({"code": code, "message": f"{message}.", "details": {}},
                                    status=response.status_code)
        return response



def json_depth_exceeds(value: Any, limit: int) -> bool:
    """True when containers nest deeper than ``limit`` (iterative: no recursion)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children: Iterable[Any]
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


class SafeJSONParser(JSONParser):
    """DRF's JSONParser with a nesting limit (MAX_JSON_DEPTH) and no RecursionError."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        limit = engine_settings.MAX_JSON_DEPTH
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise JSONTooDeep(details={"max_depth": limit}) from None
        if json_depth_exceeds(data, limit):
            raise JSONTooDeep(details={"max_depth": limit})
        return data


class FormBodyParser(FormParser):
    """DRF's FormParser that refuses a JSON document sent as a form (400 JSON_SENT_AS_FORM): read as
    ``application/x-www-form-urlencoded`` its text becomes the name of one field (more when it holds
    ``&``), which no endpoint declares."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        data = super().parse(stream, media_type, parser_context)
        first = next(iter(data), "")
        if first.lstrip().startswith(("{", "[")):
            raise JSONSentAsForm(details={"content_type": media_type or "application/x-www-form-urlencoded"})
        return data
