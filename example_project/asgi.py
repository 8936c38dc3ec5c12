"""ASGI entry point of the example host project (serves the API and the MCP endpoint):
``uvicorn example_project.asgi:application``."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")

application = get_asgi_application()
