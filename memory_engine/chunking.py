"""Pure functions that turn extracted pages into chunks.

No Django, no I/O: the same pages, settings and token counter always give the same
chunks, so ingestion, re-ingestion and tests agree. Four strategies:

``recursive``
    chunks of at most ``chunk_size`` tokens (counted by the embedder's tokenizer, see
    :data:`TokenCounter`), cut at the best boundary available: a paragraph end, else a
    line end, else a sentence end, else between words; a single "word" longer than the
    limit (a URL, a base64 blob) is the only thing ever cut inside. Consecutive chunks
    share up to ``chunk_overlap`` tokens. A chunk ends early, at a better boundary, only
    once it holds at least half of ``chunk_size`` (the minimum). Chunks may span pages;
    a chunk's page is the page it starts on.
``page``
    one chunk per page that has text, keeping the page number; a page longer than
    ``chunk_size`` tokens is cut like ``recursive`` and every piece keeps its page.
``whole``
    one chunk holding every page's text joined by a blank line.
``size``
    a window of at most ``chunk_size`` characters; the next window starts about
    ``chunk_overlap`` characters before the previous one ended.

Every strategy starts and ends chunks between words (leading and trailing whitespace
is dropped); only a word longer than the window is cut. ``max_chars``, when given, is a
hard cap on every chunk: ``recursive`` and ``page`` cut to respect it, ``whole`` raises
``CHUNK_TOO_LARGE``, and a ``size`` window larger than it is refused as invalid.

Text is cleaned before it is chunked (see :func:`clean_text`): NUL characters
are removed, because PostgreSQL ``text`` cannot hold them; surrogates are
resolved, because they cannot be encoded as UTF-8; typographic ligatures are
written as their letters, because search would not find the words they sit in.
Lengths count Unicode code points and can never cut a surrogate pair in half.

:func:`iter_chunks` yields chunks lazily, so a caller can stop after a chunk limit
without chunking (or tokenizing) the rest of a very large text.
"""

from __future__ import annotations

import bisect
import itertools
import math
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice

from memory_engine.exceptions import ChunkingError, ChunkSettingsInvalid, ChunkTooLarge
from memory_engine.text import expand_ligatures

__all__ = [
    "CHARS_PER_TOKEN",
    "CHUNK_STRATEGIES",
    "TOKEN_STRATEGIES",
    "ChunkSpec",
    "ChunkingError",
    "Page",
    "TokenCounter",
    "chunk_pages",
    "clean_text",
    "estimate_tokens",
    "iter_chunks",
    "validate_chunk_settings",
]

CHUNK_STRATEGIES: tuple[str, ...] = ("page", "whole", "size", "recursive")
#: Strategies whose chunk_size and chunk_overlap count tokens (``size`` counts characters;
#: ``whole`` uses neither).
TOKEN_STRATEGIES: tuple[str, ...] = ("page", "recursive")

#: Estimate used when no tokenizer is available: English averages about four characters
#: a token in BERT-style and GPT-style vocabularies.
CHARS_PER_TOKEN = 4

#: ``count(texts) -> token counts``, one per text, without special tokens.
TokenCounter = Callable[[Sequence[str]], list[int]]

# Separator between pages in the ``whole``, ``size`` and ``recursive`` strategies.
PAGE_SEPARATOR = "\n\n"

_SURROGATE = re.compile("[\ud800-\udfff]")

# Boundaries from best to worst; a piece that is too long is split by the next one.
# Each separator stays at the end of the piece before it, so pieces join back losslessly.
_SPLITTERS = (
    re.compile(r"\n[^\S\n]*\n\s*|\n(?=#{1,6} )"),  # blank line, or a Markdown heading
    re.compile(r"\n\s*"),  # line break
    re.compile(r"(?<=[.!?…])[\"'”’)\]]*\s+|(?<=[。！？])\s*"),  # sentence end
    re.compile(r"\s+"),  # between words
)
#: Boundary level after a piece: 4 paragraph, 3 line, 2 sentence, 1 word, 0 inside a word.
_PARAGRAPH = len(_SPLITTERS)
# Segments longer than this many characters a token are split before they are counted:
# that only costs a little merging later, and keeps any one tokenizer call small.
_COUNT_CHARS_PER_TOKEN = 16
_COUNT_BATCH = 256


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


def clean_text(text: str) -> str:
    """Return ``text`` as something PostgreSQL can store.

    NUL characters are removed. A surrogate pair that arrived as two code points
    (for example from a UTF-16 decoder with ``surrogatepass``) is joined into the
    character it encodes; a lone surrogate becomes U+FFFD. Typographic ligatures (ﬁ, ﬂ,
    ﬀ...) are written as their letters (:func:`memory_engine.text.expand_ligatures`), so
    that search finds the words they sit in.
    """
    text = text.replace("\x00", "")
    if _SURROGATE.search(text):
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return expand_ligatures(text)


def estimate_tokens(texts: Sequence[str]) -> list[int]:
    """Token counts estimated at :data:`CHARS_PER_TOKEN` characters a token.

    Whitespace is free, so counting the words of a text one by one never gives less than
    counting the text (the chunker sums piece counts and must not undercount).
    """
    return [math.ceil(sum(map(len, text.split())) / CHARS_PER_TOKEN) for text in texts]


def validate_chunk_settings(*, strategy: str, chunk_size: int, chunk_overlap: int,
                            max_chars: int | None = None) -> None:
    """Raise :class:`ChunkingError` unless the settings can be used by :func:`chunk_pages`."""
    details = {"strategy": strategy, "chunk_size": chunk_size, "chunk_overlap": chunk_overlap}
    if strategy not in CHUNK_STRATEGIES:
        raise ChunkSettingsInvalid(
            f"Unknown chunk strategy {strategy!r}; use one of: {', '.join(CHUNK_STRATEGIES)}.",
            details=details,
        )
    # bool is an int subclass; True as a chunk size is a caller bug, not a size of 1.
    if not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size < 1:
        raise ChunkSettingsInvalid(
            "chunk_size must be an integer of at least 1.",
            details=details,
        )
    if (
        not isinstance(chunk_overlap, int)
        or isinstance(chunk_overlap, bool)
        or not 0 <= chunk_overlap < chunk_size
    ):
        raise ChunkSettingsInvalid(
            "chunk_overlap must be an integer with 0 <= chunk_overlap < chunk_size.",
            details=details,
        )
    if strategy == "size" and max_chars is not None and chunk_size > max_chars:
        raise ChunkSettingsInvalid(
            f"chunk_size {chunk_size} (characters) is larger than the per-chunk cap of {max_chars} "
            "characters (MAX_CHUNK_CHARS); use a smaller chunk_size or raise MAX_CHUNK_CHARS.",
            details={**details, "max_chars": max_chars},
        )


def chunk_pages(
    pages: Iterable[Page],
    *,
    strategy: str,
    chunk_size: int = 1000,
    chunk_overlap: int = 200,
    count_tokens: TokenCounter | None = None,
    max_chars: int | None = None,
) -> list[ChunkSpec]:
    """Every chunk of :func:`iter_chunks`, as a list."""
    return list(iter_chunks(pages, strategy=strategy, chunk_size=chunk_size, chunk_overlap=chunk_overlap,
                            count_tokens=count_tokens, max_chars=max_chars))


def iter_chunks(
    pages: Iterable[Page],
    *,
    strategy: str,
    chunk_size: int = 1000,
    chunk_overlap: int = 200,
    count_tokens: TokenCounter | None = None,
    max_chars: int | None = None,
) -> Iterator[ChunkSpec]:
    """Split ``pages`` into chunks numbered 0..n-1, lazily (settings are checked at once).

    Pages whose text is empty or whitespace-only contribute nothing in any
    strategy, and no strategy emits an empty or whitespace-only chunk, so a
    document without text yields nothing.

    ``count_tokens`` counts tokens for ``recursive`` and ``page`` (default:
    :func:`estimate_tokens`). ``max_chars`` caps every chunk (see the module docstring).

    ``whole``: its page is that page's number when exactly one page has text,
    otherwise None. ``size`` and ``recursive``: a chunk's page is the page of its
    first character.
    """
    validate_chunk_settings(strategy=strategy, chunk_size=chunk_size, chunk_overlap=chunk_overlap,
                            max_chars=max_chars)
    if max_chars is not None and max_chars < 1:
        raise ChunkSettingsInvalid("max_chars must be at least 1.", details={"max_chars": max_chars})
    cleaned = ((clean_text(page.text), page.number) for page in pages)
    texts = ((text, number) for text, number in cleaned if text.strip())
    if strategy in TOKEN_STRATEGIES:
        splitter = _Recursive(count_tokens or estimate_tokens, max_tokens=chunk_size, overlap=chunk_overlap,
                              max_chars=max_chars)
        if strategy == "page":
            return _numbered(splitter.pages(texts))
        return _numbered(splitter.chunks(texts))
    if strategy == "whole":
        return _whole(list(texts), max_chars)
    return _numbered(_size_windows(list(texts), chunk_size=chunk_size, chunk_overlap=chunk_overlap))


def _numbered(chunks: Iterable[tuple[str, int | None]]) -> Iterator[ChunkSpec]:
    for index, (text, page) in enumerate(chunks):
        yield ChunkSpec(text=text, chunk_index=index, page=page)


def _whole(texts: list[tuple[str, int | None]], max_chars: int | None) -> Iterator[ChunkSpec]:
    if not texts:
        return
    joined = PAGE_SEPARATOR.join(text.strip() for text, _ in texts)
    if max_chars is not None and len(joined) > max_chars:
        raise ChunkTooLarge(
            f"The whole document is {len(joined)} characters, more than the per-chunk cap of {max_chars} "
            "(MAX_CHUNK_CHARS); use the recursive strategy, or raise MAX_CHUNK_CHARS.",
            details={"chars": len(joined), "max_chars": max_chars, "strategy": "whole"},
        )
    page = texts[0][1] if len(texts) == 1 else None
    yield ChunkSpec(text=joined, chunk_index=0, page=page)


# --- size: character windows on word boundaries ------------------------------------------

_SPACE = re.compile(r"\s")
_NON_SPACE = re.compile(r"\S")


def _size_windows(
    texts: list[tuple[str, int | None]],
    *,
    chunk_size: int,
    chunk_overlap: int,
) -> Iterator[tuple[str, int | None]]:
    joined = PAGE_SEPARATOR.join(text for text, _ in texts)
    # Offsets in ``joined`` where each page's text begins, for page attribution.
    starts: list[int] = []
    offset = 0
    for text, _ in texts:
        starts.append(offset)
        offset += len(text) + len(PAGE_SEPARATOR)
    numbers = [number for _, number in texts]

    for start, end in _size_spans(joined, chunk_size=chunk_size, chunk_overlap=chunk_overlap):
        yield joined[start:end], numbers[bisect.bisect_right(starts, start) - 1]


def _size_spans(text: str, *, chunk_size: int, chunk_overlap: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each ``size`` window in ``text``, without surrounding whitespace."""
    length = len(text)
    start, previous_end = _next_word(text, 0), 0
    while start < length:
        end, cut_inside = _window_end(text, start, chunk_size)
        end = start + len(text[start:end].rstrip())
        if end <= previous_end and not cut_inside:
            # Adds nothing to the previous window (the overlap was most of it): start a word later.
            space = _SPACE.search(text, start)
            start = _next_word(text, space.start()) if space else length
            continue
        yield start, end
        if end >= length or _next_word(text, end) >= length:
            return
        previous_end = end
        following = max(end - chunk_overlap, start + 1)
        if not cut_inside and following < end and not text[following - 1].isspace():
            # Inside a word: the overlap begins with the next whole word.
            space = _SPACE.search(text, following, end)
            following = space.start() if space else end
        start = _next_word(text, following) if not cut_inside else following


def _window_end(text: str, start: int, size: int) -> tuple[int, bool]:
    """Where a window from ``start`` ends: the last whitespace within ``size``, else a cut inside a word."""
    end = min(start + size, len(text))
    if end == len(text) or text[end].isspace():
        return end, False
    space = _last_space(text, start + 1, end)
    if space > start:
        return space, False
    return end, True  # one word longer than the window: the only thing ever cut inside


def _next_word(text: str, position: int) -> int:
    found = _NON_SPACE.search(text, position)
    return found.start() if found else len(text)


def _last_space(text: str, low: int, high: int) -> int:
    """The last index i in [low, high] with text[i] whitespace, or -1."""
    for i in range(high, low - 1, -1):
        if text[i].isspace():
            return i
    return -1


# --- recursive: paragraphs, then lines, sentences, words ------------------------------------


@dataclass(frozen=True)
class _Piece:
    """Text that fits in one chunk; ``level`` is the boundary after it, ``depth`` the next splitter."""

    text: str
    tokens: int
    level: int
    depth: int
    page: int | None


class _Recursive:
    """Cuts text into pieces that each fit, then packs pieces into chunks with overlap."""

    def __init__(self, count: TokenCounter, *, max_tokens: int, overlap: int, max_chars: int | None) -> None:
        self.count = count
        self.max_tokens = max_tokens
        self.min_tokens = max_tokens // 2
        self.overlap = overlap
        self.max_chars = max_chars if max_chars is not None else math.inf
        self.countable = min(self.max_chars, max_tokens * _COUNT_CHARS_PER_TOKEN)

    # -- strategies

    def pages(self, texts: Iterable[tuple[str, int | None]]) -> Iterator[tuple[str, int | None]]:
        """``page``: a page that fits is one chunk; a longer one is cut like ``recursive``."""
        for text, number in texts:
            if len(text) <= self.countable and self.count([text])[0] <= self.max_tokens:
                yield text.strip(), number
            else:
                yield from self.chunks([(text, number)])

    def chunks(self, texts: Iterable[tuple[str, int | None]]) -> Iterator[tuple[str, int | None]]:
        pieces = self._fitting(
            ((text.strip() + PAGE_SEPARATOR, _PARAGRAPH, number) for text, number in texts), depth=0)
        for group in self._pack(pieces):
            yield "".join(piece.text for piece in group).strip(), group[0].page

    # -- cutting

    def _fitting(self, segments: Iterator[tuple[str, int, int | None]], *, depth: int) -> Iterator[_Piece]:
        """Pieces that fit, splitting any segment that does not with splitter ``depth``."""
        while batch := [(_short_separator(text, self.countable), level, page)
                        for text, level, page in islice(segments, _COUNT_BATCH)]:
            countable = [text for text, _, _ in batch if len(text) <= self.countable]
            counts = iter(self.count(countable)) if countable else iter(())
            for text, level, page in batch:
                tokens = next(counts) if len(text) <= self.countable else None
                if tokens is not None and tokens <= self.max_tokens:
                    yield _Piece(text, tokens, level, depth, page)
                elif depth < len(_SPLITTERS):
                    parts, deeper = _split_deeper(text, depth, level, page)
                    yield from self._fitting(iter(parts), depth=deeper + 1)
                else:
                    yield from self._cut_word(text, level, page)

    def _cut_word(self, text: str, level: int, page: int | None) -> Iterator[_Piece]:
        """A word longer than a chunk: equal slices, halved until each fits."""
        width = int(min(self.max_chars, self.countable, len(text)))
        slices = [text[i:i + width] for i in range(0, len(text), width)]
        for position, part in enumerate(slices):
            after = level if position == len(slices) - 1 else 0
            yield from self._halve(part, after, page)

    def _halve(self, text: str, level: int, page: int | None) -> Iterator[_Piece]:
        tokens = self.count([text])[0]
        if tokens <= self.max_tokens or len(text) == 1:
            yield _Piece(text, tokens, level, len(_SPLITTERS) + 1, page)
            return
        middle = len(text) // 2
        yield from self._halve(text[:middle], 0, page)
        yield from self._halve(text[middle:], level, page)

    # -- packing

    def _pack(self, pieces: Iterator[_Piece]) -> Iterator[list[_Piece]]:
        current: list[_Piece] = []
        shared = 0  # how many pieces at the front of ``current`` repeat the previous chunk
        tokens = chars = 0  # running totals of ``current`` (chars with every separator)
        pending: list[_Piece] = []  # parts of a refined piece, last first
        while True:
            if pending:
                piece = pending.pop()
            elif (following := next(pieces, None)) is not None:
                piece = following
            else:
                break
            if current and not self._fits(tokens, chars, piece):
                if tokens < self.min_tokens and piece.depth < len(_SPLITTERS):
                    # The chunk is still under the minimum: take the next piece's first
                    # sentences (or words) rather than end the chunk this short.
                    parts, depth = _split_deeper(piece.text, piece.depth, piece.level, piece.page)
                    refined = list(self._fitting(iter(parts), depth=depth + 1))
                    if len(refined) > 1:
                        pending.extend(reversed(refined))
                        continue
                while current and not self._fits(tokens, chars, piece):
                    if shared == len(current):
                        dropped = current.pop(0)  # the overlap gives way to new text
                        shared, tokens, chars = shared - 1, tokens - dropped.tokens, chars - len(dropped.text)
                        continue
                    cut = self._best_cut(current, shared)
                    yield current[:cut]
                    tail = self._tail(current[:cut])
                    current, shared = tail + current[cut:], len(tail)
                    tokens, chars = sum(p.tokens for p in current), sum(len(p.text) for p in current)
            current.append(piece)
            tokens, chars = tokens + piece.tokens, chars + len(piece.text)
        if len(current) > shared:
            yield current

    def _fits(self, tokens: int, chars: int, piece: _Piece) -> bool:
        return tokens + piece.tokens <= self.max_tokens and chars + len(piece.text.rstrip()) <= self.max_chars

    def _best_cut(self, current: list[_Piece], shared: int) -> int:
        """Where the chunk ends: the best boundary once it holds min_tokens, the latest of equals."""
        best, best_level, total = len(current), -1, 0
        for index, piece in enumerate(current, 1):
            total += piece.tokens
            if index > shared and total >= self.min_tokens and piece.level >= best_level:
                best, best_level = index, piece.level
        return best

    def _tail(self, pieces: list[_Piece]) -> list[_Piece]:
        """The end of a chunk, at most ``overlap`` tokens of whole pieces, coarsest first."""
        budget, tail = self.overlap, list[_Piece]()
        candidates = list(pieces)
        while candidates and budget > 0:
            piece = candidates.pop()
            if piece.tokens <= budget:
                tail.insert(0, piece)
                budget -= piece.tokens
                continue
            if tail or piece.depth >= len(_SPLITTERS):
                break  # whole pieces only, once there are some
            # Too long to repeat whole: look at its sentences (or words) instead.
            parts, depth = _split_deeper(piece.text, piece.depth, piece.level, piece.page)
            candidates = list(self._fitting(iter(parts), depth=depth + 1))
        return tail


def _split_deeper(text: str, depth: int, level: int,
                  page: int | None) -> tuple[Iterable[tuple[str, int, int | None]], int]:
    """The parts of ``text`` by the first splitter from ``depth`` on that finds a boundary.

    Splitters that find none are skipped, so the same text is not counted again.
    """
    for current in range(depth, len(_SPLITTERS)):
        parts = _split(text, current, level, page)
        first = next(parts)
        if first[0] != text:
            return itertools.chain([first], parts), current
    return [(text, level, page)], len(_SPLITTERS) - 1


def _split(text: str, depth: int, level: int, page: int | None) -> Iterator[tuple[str, int, int | None]]:
    """``text`` cut after each separator of splitter ``depth``; the last part keeps ``level``."""
    inner = _PARAGRAPH - depth
    start = 0
    for match in _SPLITTERS[depth].finditer(text):
        if start < match.start() and match.end() < len(text):  # text before it, and after it
            yield text[start:match.end()], inner, page
            start = match.end()
    yield text[start:], level, page


def _short_separator(text: str, limit: float) -> str:
    """A segment over ``limit`` that ends in a long run of whitespace keeps one break of it.

    Otherwise thousands of blank lines would be a "word" to cut into empty pieces.
    """
    if len(text) <= limit:
        return text
    body = text.rstrip()
    separator = text[len(body):]
    if len(separator) <= 2:
        return text
    return body + ("\n\n" if separator.count("\n") >= 2 else "\n" if "\n" in separator else " ")
