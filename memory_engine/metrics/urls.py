"""``include("memory_engine.metrics.urls")``: the metrics view at the included prefix (opt-in)."""

from __future__ import annotations

from django.urls import path

from memory_engine.metrics import metrics_view

app_name = "memory_engine_metrics"

urlpatterns = [path("", metrics_view, name="metrics")]
