"""Throttles: requests per project (and failed authentications per client address, counted by
memory_engine.auth_failures for the API and the MCP server alike).

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
from typing import Any

from django.core.exceptions import ImproperlyConfigured
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
