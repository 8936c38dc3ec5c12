"""A development SECRET_KEY per checkout (no side effects on import: benchmarks use it too)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def checkout_secret_key(path: Path) -> str:
    """For development only: a random key made once per checkout and kept in ``path``
    (git-ignored), so no two checkouts share a key and none is published anywhere."""
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    key = secrets.token_urlsafe(50)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process of this checkout made it first
        return path.read_text().strip()
    with os.fdopen(fd, "w") as handle:
        handle.write(key)
    return key
