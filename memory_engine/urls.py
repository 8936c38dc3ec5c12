"""Include in the host's urls: ``path("", include("memory_engine.urls"))``.

Serves the API under /api/v1/, the OpenAPI schema at /api/schema/ and Swagger UI at /api/docs/.
"""

from django.urls import include, path
from drf_spectacular.views import SpectacularSwaggerView

from memory_engine.api.openapi import SchemaView

app_name = "memory_engine"

urlpatterns = [
    path("api/v1/", include("memory_engine.api.urls")),
    path("api/schema/", SchemaView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="memory_engine:schema"), name="docs"),
]
