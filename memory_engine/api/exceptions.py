"""One mapping from errors to HTTP: ``{"code", "message", "details"}`` bodies, and
``ERRORS``, how every view documents them in the OpenAPI schema."""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import PermissionDenied, RequestDataTooBig, SuspiciousOperation
from django.db import DatabaseError, DataError, InterfaceError, OperationalError
from django.http import Http404
from drf_spectacular.utils import OpenApiResponse
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response
from rest_framework.views import set_rollback

from memory_engine.exceptions import InputInvalid, JSONTooDeep, MemoryEngineError, RequestTooLarge

logger = logging.getLogger("memory_engine.api")


class ErrorSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    details = serializers.DictField()


#: The error answers every view may give, for ``extend_schema(responses={..., **ERRORS})``.
ERRORS = {
    400: OpenApiResponse(ErrorSerializer, description="Invalid input"),
    401: OpenApiResponse(ErrorSerializer, description="Missing or invalid key"),
    403: OpenApiResponse(ErrorSerializer, description="Read-only key"),
    404: OpenApiResponse(ErrorSerializer, description="Not found in your project"),
}

DRF_CODES: list[tuple[type[Exception], str]] = [
    (exceptions.NotAuthenticated, "AUTHENTICATION_REQUIRED"),
    (exceptions.AuthenticationFailed, "AUTHENTICATION_FAILED"),
    (exceptions.PermissionDenied, "PERMISSION_DENIED"),
    (exceptions.NotFound, "NOT_FOUND"),
    (exceptions.MethodNotAllowed, "METHOD_NOT_ALLOWED"),
    (exceptions.NotAcceptable, "NOT_ACCEPTABLE"),
    (exceptions.UnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE"),
    (exceptions.Throttled, "THROTTLED"),
    (exceptions.ParseError, "MALFORMED_REQUEST"),
    (exceptions.ValidationError, "VALIDATION_ERROR"),
]


def error_response(code: str, message: str, http_status: int, details: Any = None,
                   headers: dict[str, str] | None = None) -> Response:
    return Response({"code": code, "message": message, "details": details or {}}, status=http_status,
                    headers=headers)


def _message(detail: Any) -> str:
    if isinstance(detail, dict):
        first_key = next(iter(detail), None)
        if first_key is None:
            return "Invalid request."
        inner = detail[first_key]
        text = _message(inner)
        return text if first_key == "non_field_errors" else f"{first_key}: {text}"
    if isinstance(detail, list):
        return _message(detail[0]) if detail else "Invalid request."
    return str(detail)


def database_reason(exc: BaseException) -> str:
    """The driver's message behind a database error, on one line."""
    root = exc.__cause__ or exc
    return " ".join(str(root).split()) or root.__class__.__name__


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, MemoryEngineError):
        headers = {"Retry-After": "5"} if exc.status_code in (429, 503) else None
        return error_response(exc.code, exc.message, exc.status_code, exc.details, headers)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound("Not found.")
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    if isinstance(exc, exceptions.APIException):
        code = next((c for cls, c in DRF_CODES if isinstance(exc, cls)), "ERROR")
        headers: dict[str, str] = {}
        if getattr(exc, "auth_header", None):
            headers["WWW-Authenticate"] = exc.auth_header  # type: ignore[attr-defined]
        if getattr(exc, "wait", None):
            headers["Retry-After"] = str(int(exc.wait))  # type: ignore[attr-defined]
        if isinstance(exc, exceptions.ValidationError):
            return error_response(code, _message(exc.detail), exc.status_code, {"fields": exc.detail})
        return error_response(code, _message(exc.detail), exc.status_code, None, headers or None)
    if isinstance(exc, RequestDataTooBig):
        exc = RequestTooLarge()
        return error_response(exc.code, exc.message, exc.status_code)
    if isinstance(exc, SuspiciousOperation):  # too many form fields or files, a malformed multipart body
        return error_response("MALFORMED_REQUEST", str(exc) or "The request is malformed.", 400)
    if isinstance(exc, RecursionError):  # a parser or validator met absurdly nested input
        exc = JSONTooDeep()
        return error_response(exc.code, exc.message, exc.status_code)
    if isinstance(exc, DataError) or (isinstance(exc, ValueError) and "NUL" in str(exc)):
        # PostgreSQL refused a value (NUL characters, out-of-range numbers): the input's fault.
        logger.info("input refused by the database: %s", exc.__class__.__name__)
        set_rollback()  # with ATOMIC_REQUESTS the failed transaction must not be committed
        exc = InputInvalid()
        return error_response(exc.code, exc.message, exc.status_code)
    if isinstance(exc, (OperationalError, InterfaceError)):
        # The database's own words ("too many clients already", "the database system is
        # shutting down", ...) say what to fix; they name no secret.
        logger.warning("database unavailable: %s: %s", exc.__class__.__name__, database_reason(exc))
        return error_response(
            "DATABASE_UNAVAILABLE", "The database is unavailable; retry shortly.",
            status.HTTP_503_SERVICE_UNAVAILABLE, headers={"Retry-After": "2"},
        )
    if isinstance(exc, DatabaseError):
        logger.exception("database error")
        return None
    return None
