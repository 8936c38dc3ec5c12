"""A host URLconf that opts in to the metrics view (tests/test_instruction_guard.py)."""

from django.urls import include, path

from example_project.urls import urlpatterns as host_urlpatterns

urlpatterns = [*host_urlpatterns, path("metrics/", include("memory_engine.metrics.urls"))]
