"""Throttles: requests per project, and failed authentications per client address.

The per-project rate comes from REST_FRAMEWORK['DEFAULT_THROTTLE_RATES']['project'] or,
when the host names none, MEMORY_ENGINE['PROJECT_RATE']. Failed key authentications are
counted per client address in Django's cache: over MEMORY_ENGINE['AUTH_FAILURE_RATE'] a
failing key from that address gets 429 THROTTLED with Retry-After until the window passes.
A valid key is never refused by it, so nobody can lock a client out by failing on purpose
from (or claiming to be) its address.

The address is REMOTE_ADDR unless MEMORY_ENGINE['NUM_PROXIES'] (default 0) says how many
trusted proxies append to X-Forwarded-For; a client-sent header is never trusted otherwise.
Use a shared cache (Redis, database) when several processes serve the API, or each
process counts on its own.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured
from rest_framework import exceptions
from rest_framework.throttling import SimpleRateThrottle

from memory_engine.conf import engine_settings
from memory_engine.models import ApiKey

logger = logging.getLogger("memory_engine.auth")


class ProjectRateThrottle(SimpleRateThrottle):
    scope = "project"

    def get_rate(self) -> str | None:
        try:
            return super().get_rate()
        except ImproperlyConfigured:
            return engine_settings.PROJECT_RATE

    def get_cache_key(self, request: Any, view: Any) -> str | None:
        if isinstance(request.auth, ApiKey):
            return self.cache_format % {"scope": self.scope, "ident": request.auth.project_id}
        return None


def client_address(request: Any) -> str:
    """The caller's address: REMOTE_ADDR, or with NUM_PROXIES = n > 0 trusted proxies in front,
    the X-Forwarded-For entry the outermost of them appended (the n-th from the right)."""
    remote = request.META.get("REMOTE_ADDR") or ""
    proxies = engine_settings.NUM_PROXIES
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR") or ""
    if proxies <= 0 or not forwarded:
        return remote
    hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
    return hops[-min(proxies, len(hops))] if hops else remote


class FailedAuthThrottle(SimpleRateThrottle):
    """Counts failed authentications per client address (not a view throttle: used by
    ApiKeyAuthentication, before and after it checks a key)."""

    scope = "auth_failures"
    cache = cache
    # Set by SimpleRateThrottle.__init__ from the rate (the stubs do not declare them); read only
    # once _load has seen a rate.
    num_requests: int
    duration: int

    def get_rate(self) -> str | None:
        return engine_settings.AUTH_FAILURE_RATE

    def get_ident(self, request: Any) -> str:
        return client_address(request)

    def get_cache_key(self, request: Any, view: Any = None) -> str | None:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}

    def _load(self, request: Any) -> bool:
        """Load the window's failures; False when throttling is disabled."""
        if not self.rate:
            return False
        self.key = self.get_cache_key(request)
        self.history = self.cache.get(self.key, [])
        self.now = time.time()
        while self.history and self.history[-1] <= self.now - self.duration:
            self.history.pop()
        return True

    def check(self, request: Any) -> None:
        """Raise 429 THROTTLED (with Retry-After) when the address is over its budget."""
        if self._load(request) and len(self.history) >= self.num_requests:
            raise exceptions.Throttled(
                wait=self.wait(),
                detail="Too many failed authentication attempts from this address; retry later.",
            )

    def record_failure(self, request: Any) -> None:
        if not self._load(request):
            return
        self.history.insert(0, self.now)
        self.cache.set(self.key, self.history, self.duration)
        if len(self.history) == self.num_requests:
            logger.warning("authentication failures throttled", extra={"client": self.get_ident(request),
                                                                       "failures": len(self.history)})
