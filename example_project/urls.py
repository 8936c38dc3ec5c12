"""URLs of the example host project: the admin, memory_engine's API and its MCP endpoint."""

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

urlpatterns = [
    path("", RedirectView.as_view(url="/api/docs/", permanent=False)),
    path("admin/", admin.site.urls),
    # The MCP server over streamable HTTP (docs/mcp.md; needs the `mcp` extra to answer)
    path("mcp/", include("memory_engine.mcp.urls")),
    path("", include("memory_engine.urls")),
]
