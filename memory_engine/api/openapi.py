"""``/api/schema/``: the app's OpenAPI schema view (its settings live in :mod:`.schema`)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from .schema import SCHEMA_SETTINGS


class SchemaView(SpectacularAPIView):
    """/api/schema/: the app's OpenAPI schema with its own title, version and split request
    components, whatever the host's SPECTACULAR_SETTINGS; not listed in itself."""

    custom_settings = SCHEMA_SETTINGS

    @extend_schema(exclude=True)
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)
