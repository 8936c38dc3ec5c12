"""The opt-in Prometheus view: ``memory_engine_instructions_blocked_total`` and whatever else is
registered in the process's default prometheus-client registry.

Nothing routes here unless the host includes it, e.g. in its URLconf::

    path("metrics/", include("memory_engine.metrics.urls")),

It answers without authentication (scrapers do not log in): mount it where only the scraper
reaches it (an internal port, a proxy rule).
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

# Importing the guard registers its counter, so the view lists it even before the first drop.
from memory_engine.instruction_guard import BLOCKED

__all__ = ["BLOCKED", "metrics_view"]


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    """The registry in the Prometheus text exposition format."""
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)
