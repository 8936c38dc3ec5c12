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
    assert key_file.read_text().strip() == settings.SECRET_KEY and len(settings.SECRET_KEY) >= 50


MAKE_KEY = "import sys; from pathlib import Path; from example_project.secret_key import checkout_secret_key; " \
           "print(checkout_secret_key(Path(sys.argv[1])))"


def test_processes_starting_together_share_one_whole_checkout_key(tmp_path: Path) -> None:
    """The web server and the worker start at once on a fresh checkout: the key file appears
    whole (written beside it, then linked into place) and every process gets the same key."""
    key_file = tmp_path / ".secret_key"
    starters = [subprocess.Popen([sys.executable, "-c", MAKE_KEY, str(key_file)], cwd=ROOT, stdout=subprocess.PIPE,
                                 text=True) for _ in range(8)]
    keys = {starter.communicate(timeout=60)[0].strip() for starter in starters}
    assert keys == {key_file.read_text()} and len(key_file.read_text()) >= 50
    assert [p.name for p in tmp_path.iterdir()] == [".secret_key"]  # no temporary file left


@pytest.mark.parametrize("damaged", [b"", b"  \n", b"\xff\xfe"], ids=["empty", "blank", "binary"])
def test_an_empty_or_damaged_checkout_key_is_replaced(tmp_path: Path, caplog: Any, damaged: bytes) -> None:
    """An earlier version wrote the file in place: a process killed meanwhile left it empty, and
    Django then refused the empty SECRET_KEY in every later command."""
    from example_project.secret_key import checkout_secret_key

    key_file = tmp_path / ".secret_key"
    key_file.write_bytes(damaged)
    with caplog.at_level("WARNING", logger="example_project.secret_key"):
        key = checkout_secret_key(key_file)
    assert len(key) >= 50 and key_file.read_text() == key
    assert "is empty or damaged" in caplog.text
    assert checkout_secret_key(key_file) == key  # kept from now on
