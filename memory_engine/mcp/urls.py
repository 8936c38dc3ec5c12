"""``path("mcp/", include("memory_engine.mcp.urls"))``: the MCP endpoint over streamable HTTP."""

from django.urls import path

from .views import mcp_endpoint

app_name = "memory_engine_mcp"

urlpatterns = [
    path("", mcp_endpoint, name="endpoint"),
]
