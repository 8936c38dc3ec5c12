"""System check E006: a production process with a guessable SECRET_KEY refuses to serve."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memory_engine.checks import check_secret_key

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("key", ["change-me", "dev-only-insecure-key-change-me", "django-insecure-abc123xyz" * 3,
                                 "short-key", "a" * 60])
def test_guessable_secret_key_with_debug_off_is_an_error(settings: Any, key: str) -> None:
    settings.DEBUG, settings.SECRET_KEY = False, key
    assert [e.id for e in check_secret_key()] == ["memory_engine.E006"]
    settings.DEBUG = True  # development: allowed
    assert check_secret_key() == []


def test_random_secret_key_passes(settings: Any) -> None:
    settings.DEBUG, settings.SECRET_KEY = False, "q8VZl3-1Jm0x_w7pY2c9RkTn4sHbD6aEfGuLoQiW5vXy"
    assert check_secret_key() == []


def manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SECRET_KEY", "DJANGO_DEBUG")}
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env={**environ, **env},
                          capture_output=True, text=True, timeout=120)


def test_production_settings_refuse_to_start_without_a_key() -> None:
    """The example project (docker-compose runs it with DEBUG off) will not start on a default key."""
    missing = manage("check", DJANGO_DEBUG="false")
    assert missing.returncode != 0 and "Set DJANGO_SECRET_KEY" in missing.stderr
    default = manage("check", DJANGO_DEBUG="false", DJANGO_SECRET_KEY="change-me")
    assert default.returncode != 0 and "memory_engine.E006" in default.stderr
    compose = (ROOT / "docker-compose.yml").read_text()
    assert "${DJANGO_SECRET_KEY:?" in compose and "change-me" not in compose


def test_development_runs_on_a_per_checkout_key() -> None:
    from django.conf import settings

    key_file = ROOT / ".secret_key"
    assert settings.SECRET_KEY == key_file.read_text().strip() and len(settings.SECRET_KEY) >= 50
