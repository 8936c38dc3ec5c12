"""Pure functions that turn extracted pages into chunks.

No Django, no I/O: the same pages and settings always give the same chunks, so
ingestion, re-ingestion and tests agree. Three strategies:

``page``
    one chunk per page that has text; the chunk keeps the page number.
``whole``
    one chunk holding every page's text joined by a blank line.
``size``
    a character window of ``chunk_size`` that advances by
    ``chunk_size - chunk_overlap`` over the joined text.

Text is cleaned before it is chunked (see :func:`clean_text`): NUL characters
are removed, because PostgreSQL ``text`` cannot hold them, and surrogates are
resolved, because they cannot be encoded as UTF-8. Windows therefore count
Unicode code points and can never cut a surrogate pair in half.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass

from memory_engine.exceptions import CodedError

__all__ = [
    "CHUNK_STRATEGIES",
    "ChunkSpec",
    "ChunkingError",
    "Page",
    "chunk_pages",
    "clean_text",
    "validate_chunk_settings",
]

CHUNK_STRATEGIES: tuple[str, ...] = ("page", "whole", "size")

# Separator between pages in the ``whole`` and ``size`` strategies.
PAGE_SEPARATOR = "\n\n"

_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class Page:
    """The text of one page; ``number`` is 1-based, or None for text without pages."""

    text: str
    number: int | None


@dataclass(frozen=True)
class ChunkSpec:
    """One chunk to embed and store; ``page`` is the page it starts on, if known."""

    text: str
    chunk_index: int
    page: int | None


class ChunkingError(CodedError, ValueError):
    """Invalid chunking settings; ``code`` is stable (``CHUNK_SETTINGS_INVALID``)."""


def clean_text(text: str) -> str:
    """Return ``text`` as something PostgreSQL can store.

    NUL characters are removed. A surrogate pair that arrived as two code points
    (for example from a UTF-16 decoder with ``surrogatepass``) is joined into the
    character it encodes; a lone surrogate becomes U+FFFD.
    """
    text = text.replace("\x00", "")
    if _SURROGATE.search(text):
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def validate_chunk_settings(*, strategy: str, chunk_size: int, chunk_overlap: int) -> None:
    """Raise :class:`ChunkingError` unless the settings can be used by :func:`chunk_pages`."""
    details = {"strategy": strategy, "chunk_size": chunk_size, "chunk_overlap": chunk_overlap}
    if strategy not in CHUNK_STRATEGIES:
        raise ChunkingError(
            "CHUNK_SETTINGS_INVALID",
            f"Unknown chunk strategy {strategy!r}; use one of: {', '.join(CHUNK_STRATEGIES)}.",
            details,
        )
    # bool is an int subclass; True as a chunk size is a caller bug, not a size of 1.
    if not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size < 1:
        raise ChunkingError(
            "CHUNK_SETTINGS_INVALID",
            "chunk_size must be an integer of at least 1.",
            details,
        )
    if (
        not isinstance(chunk_overlap, int)
        or isinstance(chunk_overlap, bool)
        or not 0 <= chunk_overlap < chunk_size
    ):
        raise ChunkingError(
            "CHUNK_SETTINGS_INVALID",
            "chunk_overlap must be an integer with 0 <= chunk_overlap < chunk_size.",
            details,
        )


def chunk_pages(
    pages: Sequence[Page],
    *,
    strategy: str,
    chunk_size: int = 1000,
    chunk_overlap: int = 200,
) -> list[ChunkSpec]:
    """Split ``pages`` into chunks numbered 0..n-1.

    Pages whose text is empty or whitespace-only contribute nothing in any
    strategy, and no strategy emits an empty or whitespace-only chunk, so a
    document without text yields ``[]``.

    ``page``: one chunk per remaining page, with its page number.
    ``whole``: one chunk of the remaining pages joined by ``"\\n\\n"``; its page is
    that page's number when exactly one page has text, otherwise None.
    ``size``: windows ``text[start:start + chunk_size]`` for ``start = 0, step,
    2 * step, ...`` with ``step = chunk_size - chunk_overlap`` over the joined
    text. The last window may be shorter; it stops at the first window that
    reaches the end, so no window lies entirely inside the previous one. A
    window's page is the page of its first non-whitespace character (a window
    that starts in the separator between two pages belongs to the next page).
    """
    validate_chunk_settings(strategy=strategy, chunk_size=chunk_size, chunk_overlap=chunk_overlap)
    texts = [(clean_text(page.text), page.number) for page in pages]
    texts = [(text, number) for text, number in texts if text.strip()]
    if not texts:
        return []

    if strategy == "page":
        return [
            ChunkSpec(text=text, chunk_index=index, page=number)
            for index, (text, number) in enumerate(texts)
        ]

    joined = PAGE_SEPARATOR.join(text for text, _ in texts)
    if strategy == "whole":
        page = texts[0][1] if len(texts) == 1 else None
        return [ChunkSpec(text=joined, chunk_index=0, page=page)]

    return _size_windows(texts, joined, chunk_size=chunk_size, chunk_overlap=chunk_overlap)


def _size_windows(
    texts: list[tuple[str, int | None]],
    joined: str,
    *,
    chunk_size: int,
    chunk_overlap: int,
) -> list[ChunkSpec]:
    # Offsets in ``joined`` where each page's text begins, for page attribution.
    starts: list[int] = []
    offset = 0
    for text, _ in texts:
        starts.append(offset)
        offset += len(text) + len(PAGE_SEPARATOR)
    numbers = [number for _, number in texts]

    step = chunk_size - chunk_overlap
    chunks: list[ChunkSpec] = []
    for start in range(0, len(joined), step):
        window = joined[start:start + chunk_size]
        stripped = window.lstrip()
        if stripped:
            first_char = start + len(window) - len(stripped)
            page = numbers[bisect.bisect_right(starts, first_char) - 1]
            chunks.append(ChunkSpec(text=window, chunk_index=len(chunks), page=page))
        if start + chunk_size >= len(joined):
            break
    return chunks
