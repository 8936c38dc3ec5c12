"""Chunk settings: request -> ingestion rule -> entry-point default, validated once."""

from __future__ import annotations

from typing import Any

from memory_engine.chunking import TOKEN_STRATEGIES, validate_chunk_settings
from memory_engine.conf import engine_settings
from memory_engine.models import IngestionRule
from memory_engine.models.documents import ChunkStrategy

#: Defaults of the `size` strategy (characters); `recursive` and `page` count tokens and take
#: theirs from CHUNK_SIZE_TOKENS / CHUNK_OVERLAP_TOKENS.
DEFAULT_CHUNK_SIZE = 1000
DEFAULT_CHUNK_OVERLAP = 200
#: Entry-point default: `recursive` for these, `page` (long pages cut recursively) for the rest.
RECURSIVE_CONTENT_TYPES = frozenset({"text/plain", "text/markdown"})


def default_chunk_strategy(content_type: str) -> str:
    """The entry-point default for a content type: `recursive` for text and Markdown, else `page`."""
    return ChunkStrategy.RECURSIVE if content_type in RECURSIVE_CONTENT_TYPES else ChunkStrategy.PAGE


def resolve_chunking(*, requested: dict[str, Any], rule: IngestionRule | None,
                     content_type: str = "") -> tuple[str, int | None, int | None]:
    """Effective (strategy, size, overlap): request -> rule -> entry-point default.

    Size and overlap are tokens for `recursive` and `page`, characters for `size`, and
    None for `whole` (which uses neither), so the document reports what was used.
    """
    strategy = (requested.get("chunk_strategy") or (rule.chunk_strategy if rule else None)
                or default_chunk_strategy(content_type))
    if strategy == ChunkStrategy.WHOLE:
        return strategy, None, None
    in_tokens = strategy in TOKEN_STRATEGIES
    size = requested.get("chunk_size") or (rule.chunk_size if rule else None) or (
        engine_settings.CHUNK_SIZE_TOKENS if in_tokens else DEFAULT_CHUNK_SIZE)
    overlap = requested.get("chunk_overlap")
    if overlap is None and rule is not None:
        overlap = rule.chunk_overlap
    if overlap is None:
        # The default overlap; a smaller chunk keeps a fifth of itself as overlap.
        overlap = min(engine_settings.CHUNK_OVERLAP_TOKENS if in_tokens else DEFAULT_CHUNK_OVERLAP, size // 5)
    validate_chunk_settings(strategy=strategy, chunk_size=size, chunk_overlap=overlap,
                            max_chars=engine_settings.MAX_CHUNK_CHARS)  # 400 CHUNK_SETTINGS_INVALID
    return strategy, size, overlap


def chunking_label(strategy: str, size: int | None, overlap: int | None) -> str:
    """``"recursive 200 / overlap 40 tokens"``, ``"size 1000 / overlap 200 characters"``, ``"whole"``."""
    if size is None:
        return strategy
    unit = "tokens" if strategy in TOKEN_STRATEGIES else "characters"
    return f"{strategy} {size} / overlap {overlap} {unit}"


CHUNK_REQUEST_KEYS = ("chunk_strategy", "chunk_size", "chunk_overlap")


def chunk_request(chunk_strategy: str | None, chunk_size: int | None, chunk_overlap: int | None) -> dict[str, Any]:
    values = dict(zip(CHUNK_REQUEST_KEYS, (chunk_strategy, chunk_size, chunk_overlap), strict=True))
    return {key: value for key, value in values.items() if value not in (None, "")}
