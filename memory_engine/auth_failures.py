"""Failed authentications per client address, for every door that takes a key (the REST API and
the MCP server): over MEMORY_ENGINE['AUTH_FAILURE_RATE'] failures in the window, a failing key
from that address gets 429 THROTTLED with Retry-After until the window passes. A valid key is
never refused by it, so nobody can lock a client out by failing on purpose from (or claiming to
be) its address. The address is REMOTE_ADDR unless MEMORY_ENGINE['NUM_PROXIES'] says how many
trusted proxies append to X-Forwarded-For. Counted in Django's cache (share it across processes).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from django.core.cache import cache
from rest_framework import exceptions
from rest_framework.throttling import SimpleRateThrottle

from memory_engine.conf import engine_settings

__all__ = ["FailedAuthThrottle", "client_address"]

logger = logging.getLogger("memory_engine.auth")


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
