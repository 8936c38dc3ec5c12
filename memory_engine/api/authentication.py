"""``Authorization: Bearer <key>`` authentication against hashed API keys."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from memory_engine.auth_failures import FailedAuthThrottle
from memory_engine.exceptions import AuthenticationFailed
from memory_engine.models import ApiKey
from memory_engine.services.keys import api_key_authenticate


class ApiKeyPrincipal:
    """The ``request.user`` of a key-authenticated call."""

    is_authenticated = True
    is_active = True
    is_staff = False
    is_superuser = False
    is_anonymous = False

    def __init__(self, api_key: ApiKey) -> None:
        self.api_key = api_key
        self.pk = api_key.pk
        self.username = f"key:{api_key.pk}"

    def __str__(self) -> str:
        return self.username

    def has_perm(self, *args: Any, **kwargs: Any) -> bool:
        return False


class ApiKeyAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Any) -> tuple[ApiKeyPrincipal, ApiKey] | None:
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        try:
            return self._authenticate_key(header)
        except exceptions.AuthenticationFailed:
            # Only failing credentials are throttled: a valid key always gets in, so failures
            # sent from (or forged for) a client's address can never lock that client out.
            throttle = FailedAuthThrottle()
            throttle.check(request)
            throttle.record_failure(request)
            raise

    def _authenticate_key(self, header: list[bytes]) -> tuple[ApiKeyPrincipal, ApiKey]:
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Malformed Authorization header; send `Bearer <key>`.")
        try:
            raw = header[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("Invalid API key.") from None
        try:
            key = api_key_authenticate(raw)
        except AuthenticationFailed as exc:
            raise exceptions.AuthenticationFailed(exc.message) from None
        return ApiKeyPrincipal(key), key

    def authenticate_header(self, request: Any) -> str:
        return self.keyword


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "memory_engine.api.authentication.ApiKeyAuthentication"
    name = "ApiKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "description": "Authorization: Bearer me_…"}
