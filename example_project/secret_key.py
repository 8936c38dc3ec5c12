"""A development SECRET_KEY per checkout (no side effects on import: benchmarks use it too)."""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import tempfile
from pathlib import Path

logger = logging.getLogger(__name__)


def checkout_secret_key(path: Path) -> str:
    """For development only: a random key made once per checkout and kept in ``path``
    (git-ignored), so no two checkouts share a key and none is published anywhere.

    The file appears whole or not at all: the key is written beside it, then linked into place,
    and the first process of the checkout to do so wins (web server and worker share its key).
    A file found empty or unreadable (an earlier version wrote it in place) is reported and
    replaced.
    """
    key, found = _read_key(path)
    if key:
        return key
    if found is not None:
        logger.warning("%s is empty or damaged: a new development SECRET_KEY replaces it", path)
        with contextlib.suppress(FileNotFoundError):
            if os.stat(path).st_ino == found:  # not already replaced by another process
                path.unlink()
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_urlsafe(50))
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(FileExistsError):  # another process of this checkout made it first
            os.link(temporary, path)
    finally:
        os.unlink(temporary)
    return path.read_text().strip()


def _read_key(path: Path) -> tuple[str, int | None]:
    """The key in ``path`` ("" when empty or unreadable) and the file's inode (None: no file)."""
    try:
        with open(path, "rb") as handle:
            return handle.read().decode().strip(), os.fstat(handle.fileno()).st_ino
    except FileNotFoundError:
        return "", None
    except UnicodeDecodeError:
        return "", os.stat(path).st_ino
