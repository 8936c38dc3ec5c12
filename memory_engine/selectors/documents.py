"""Reading documents' versions: a version's text and the difference between two versions."""

from __future__ import annotations

import difflib

from memory_engine.models import DocumentVersion

#: Content types whose raw capture is shown as text.
TEXT_CONTENT_TYPES = ("text/",)


def version_text(version: DocumentVersion) -> str | None:
    """The captured text of a text version (from its raw capture; for a version older than raw
    captures, the stored file while it is the live one); None for binary content or when
    nothing holds its bytes any more."""
    if not (version.content_type or "").startswith(TEXT_CONTENT_TYPES):
        return None
    data: bytes | None = None
    if version.raw_capture is not None:
        data = bytes(version.raw_capture.data)
    elif version.status == DocumentVersion.Status.ACTIVE and version.document.file:
        try:
            with version.document.file.open("rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            return None
    return None if data is None else data.decode("utf-8", errors="replace")


def version_diff(older: DocumentVersion, newer: DocumentVersion, *, context_lines: int = 3) -> str:
    """A unified diff of two versions' texts (empty when either has no text or they are equal)."""
    before, after = version_text(older), version_text(newer)
    if before is None or after is None:
        return ""
    return "".join(difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True),
        fromfile=f"v{older.number}", tofile=f"v{newer.number}", n=context_lines))
