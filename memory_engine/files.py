"""Files the app writes for itself (the embedded server's handle list, the demo credentials):
each is replaced in one step, so a process killed while writing leaves the previous content,
never an empty or half-written file; their readers treat a damaged file as missing (with a
warning) and write it again."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

__all__ = ["write_atomically"]


def write_atomically(path: str | os.PathLike[str], text: str, *, mode: int = 0o600) -> None:
    """Replace the content of ``path`` with ``text``: a reader sees the old file or the new one.

    The text goes to a temporary file beside it (flushed to disk, with ``mode``), which is then
    renamed over ``path``; the rename is atomic on POSIX file systems.
    """
    target = Path(path)
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
