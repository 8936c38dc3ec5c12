"""Per-project request throttling (rate from REST_FRAMEWORK['DEFAULT_THROTTLE_RATES']['project'])."""

from __future__ import annotations

from typing import Any

from rest_framework.throttling import SimpleRateThrottle

from memory_engine.models import ApiKey


class ProjectRateThrottle(SimpleRateThrottle):
    scope = "project"

    def get_cache_key(self, request: Any, view: Any) -> str | None:
        if isinstance(request.auth, ApiKey):
            return self.cache_format % {"scope": self.scope, "ident": request.auth.project_id}
        return None
