"""One mapping from errors to HTTP: ``{"code", "message", "details"}`` bodies, and
``ERRORS``, how every view documents them in the OpenAPI schema.

A :class:`~memory_engine.exceptions.MemoryEngineError` answers with its class's ``code`` and
``status``. DRF's and Django's own exceptions, and database failures, are answered with the
code of the memory_engine class that stands for them (``DRF_ERRORS`` and below)."""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.db import DatabaseError, DataError, InterfaceError, OperationalError
from django.http import Http404
from drf_spectacular.utils import OpenApiResponse
from rest_framework import exceptions, serializers
from rest_framework.response import Response
from rest_framework.views import set_rollback

from memory_engine.exceptions import (
    AuthenticationFailed,
    AuthenticationRequired,
    DatabaseUnavailable,
    InputInvalid,
    JSONTooDeep,
    MalformedRequest,
    MemoryEngineError,
    MethodNotAllowed,
    NotAcceptable,
    NotFound,
    PermissionDenied,
    RequestTooLarge,
    Throttled,
    UnsupportedMediaType,
    ValidationFailed,
)

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

#: DRF's exceptions and the code each answers with. The status stays DRF's own: it answers
#: NotAuthenticated with 403 instead of 401 when no authenticator names a WWW-Authenticate scheme.
def error_responses(*errors: type[MemoryEngineError]) -> dict[int, OpenApiResponse]:
    """OpenAPI answers naming the codes of ``errors``, by status (for ``extend_schema(responses=...)``)."""
    codes: dict[int, list[str]] = {}
    for error in errors:
        codes.setdefault(error.status_code, []).append(error.code)
    return {status: OpenApiResponse(ErrorSerializer, description=", ".join(names)) for status, names in codes.items()}


DRF_ERRORS: list[tuple[type[exceptions.APIException], type[MemoryEngineError]]] = [
    (exceptions.NotAuthenticated, AuthenticationRequired),
    (exceptions.AuthenticationFailed, AuthenticationFailed),
    (exceptions.PermissionDenied, PermissionDenied),
    (exceptions.NotFound, NotFound),
    (exceptions.MethodNotAllowed, MethodNotAllowed),
    (exceptions.NotAcceptable, NotAcceptable),
    (exceptions.UnsupportedMediaType, UnsupportedMediaType),
    (exceptions.Throttled, Throttled),
    (exceptions.ParseError, MalformedRequest),
    (exceptions.ValidationError, ValidationFailed),
]


def drf_error_code(exc: exceptions.APIException) -> str:
    """The code a DRF exception answers with (``ERROR`` for one the table does not name)."""
    return next((error.code for cls, error in DRF_ERRORS if isinstance(exc, cls)), MemoryEngineError.code)


def error_response(code: str, message: str, http_status: int, details: Any = None,
                   headers: dict[str, str] | None = None) -> Response:
    return Response({"code": code, "message": message, "details": details or {}}, status=http_status,
                    headers=headers)


def engine_error_response(exc: MemoryEngineError, headers: dict[str, str] | None = None) -> Response:
    """The answer to ``exc``: its class's code and status; 429 and 503 say when to retry."""
    if headers is None and exc.status_code in (429, 503):
        headers = {"Retry-After": "5"}
    return error_response(exc.code, exc.message, exc.status_code, exc.details, headers)


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
        return engine_error_response(exc)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound("Not found.")
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    if isinstance(exc, exceptions.NotAuthenticated):
        return _not_authenticated(exc, context.get("request"))
    if isinstance(exc, exceptions.APIException):
        return _drf_error_response(exc)
    return _django_error_response(exc)


def _not_authenticated(exc: exceptions.NotAuthenticated, request: Any) -> Response:
    """401 AUTHENTICATION_REQUIRED that says how to send a key; a key sent without the ``Bearer``
    scheme (``Authorization: me_…``, ``Token me_…``) is named as such (the header is never echoed)."""
    header = (request.META.get("HTTP_AUTHORIZATION", "") if request is not None else "").strip()
    if header:
        error = AuthenticationRequired(
            "The Authorization header does not use the Bearer scheme, so no key was read: send the key as "
            "`Authorization: Bearer <key>`.", details={"expected": "Authorization: Bearer <key>"})
    else:
        error = AuthenticationRequired(details={"expected": "Authorization: Bearer <key>"})
    auth_header = getattr(exc, "auth_header", None)
    # DRF's status stays: 403 when no authenticator names a scheme (a host without the key authentication).
    return error_response(error.code, error.message, exc.status_code, error.details,
                          {"WWW-Authenticate": auth_header} if auth_header else None)


def _drf_error_response(exc: exceptions.APIException) -> Response:
    """DRF's own exceptions, answered with the code of the class that stands for each."""
    code = drf_error_code(exc)
    headers: dict[str, str] = {}
    # DRF sets auth_header on a 401 (APIView.handle_exception); Throttled carries its wait.
    if auth_header := getattr(exc, "auth_header", None):
        headers["WWW-Authenticate"] = auth_header
    if wait := getattr(exc, "wait", None):
        headers["Retry-After"] = str(int(wait))
    if isinstance(exc, exceptions.ValidationError):
        return error_response(code, _message(exc.detail), exc.status_code, {"fields": exc.detail})
    return error_response(code, _message(exc.detail), exc.status_code, None, headers or None)


def _django_error_response(exc: Exception) -> Response | None:
    """Django's and the database's exceptions that a request can cause; None for the others (a 500)."""
    if isinstance(exc, RequestDataTooBig):
        return engine_error_response(RequestTooLarge())
    if isinstance(exc, SuspiciousOperation):  # too many form fields or files, a malformed multipart body
        return engine_error_response(MalformedRequest(str(exc) or None))
    if isinstance(exc, RecursionError):  # a parser or validator met absurdly nested input
        return engine_error_response(JSONTooDeep())
    if isinstance(exc, DataError) or (isinstance(exc, ValueError) and "NUL" in str(exc)):
        # PostgreSQL refused a value (NUL characters, out-of-range numbers): the input's fault.
        logger.info("input refused by the database: %s", exc.__class__.__name__)
        set_rollback()  # with ATOMIC_REQUESTS the failed transaction must not be committed
        return engine_error_response(InputInvalid())
    if isinstance(exc, (OperationalError, InterfaceError)):
        # The database's own words ("too many clients already", "the database system is
        # shutting down", ...) say what to fix; they name no secret.
        logger.warning("database unavailable: %s: %s", exc.__class__.__name__, database_reason(exc))
        return engine_error_response(DatabaseUnavailable(), headers={"Retry-After": "2"})
    if isinstance(exc, DatabaseError):
        logger.exception("database error")
    return None
