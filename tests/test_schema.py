"""The app's OpenAPI schema stands on its own: the same title, version and request
components whatever the host's SPECTACULAR_SETTINGS (none, or its own API's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memory_engine import __version__

ROOT = Path(__file__).resolve().parents[1]

FETCH = """
import django, json
django.setup()
from django.test import Client
response = Client().get("/api/schema/?format=json")
assert response.status_code == 200, response.content
print(json.dumps(response.json()))
"""

HOSTS = {
    # a host that never heard of drf-spectacular's settings
    "bare": "del SPECTACULAR_SETTINGS\n",
    # a host whose own API settings would otherwise leak into the app's schema
    "own settings": 'SPECTACULAR_SETTINGS = {"TITLE": "Host API", "VERSION": "9.9", '
                    '"COMPONENT_SPLIT_REQUEST": False, "SERVE_INCLUDE_SCHEMA": True}\n',
}


def served_schema(tmp_path: Path, host_settings: str) -> dict[str, Any]:
    """/api/schema/ as a fresh process with these host settings serves it."""
    (tmp_path / "host_settings.py").write_text(f"from example_project.settings import *  # noqa\n{host_settings}")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "host_settings",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    result = subprocess.run([sys.executable, "-c", FETCH], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("host", HOSTS)
def test_schema_stands_on_its_own(tmp_path: Path, host: str) -> None:
    schema = served_schema(tmp_path, HOSTS[host])
    assert schema["info"]["title"] == "memory_engine API"
    assert schema["info"]["version"] == __version__
    assert "/api/schema/" not in schema["paths"] and "/api/docs/" not in schema["paths"]
    components = schema["components"]["schemas"]
    # read-only fields are not asked for in request bodies
    assert "id" not in components["MemoryWriteRequest"].get("required", [])
    assert "id" not in components["MemoryStoreRequest"]["properties"]
    assert {"id", "created_at"} <= set(components["MemoryStore"]["required"])
