"""Rows of the search statements as named records, filled by column name.

The statements of memory_engine.selectors.search.sql name each column after a field of these
records; :func:`fetch_records` matches them by the result's column names, so a column added,
dropped or reordered on one side only fails loudly instead of shifting every value.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, TypeVar

from memory_engine.db import result_columns

from .results import SearchHit


def _json_object(value: Any) -> dict[str, Any]:
    """jsonb from a raw cursor arrives as text (Django registers a text loader for psycopg)."""
    if isinstance(value, str):
        loaded: dict[str, Any] = json.loads(value)
        return loaded
    return value or {}


@dataclass(frozen=True, kw_only=True)
class DisplayRow:
    """What a hit shows of its memory or chunk."""

    source: str
    id: str
    text: str
    tags: Any  # jsonb: a dict, or its text from a raw cursor
    document_id: str | None
    document_path: str | None
    document_title: str | None
    page: int | None
    chunk_index: int | None
    memory_store_id: str | None
    memory_store_name: str | None
    tier: str | None
    title: str | None
    provenance: str | None
    lineage: str | None
    created_at: datetime | None

    @classmethod
    def columns(cls) -> list[str]:
        """The column names a statement must select, in field order."""
        return [f.name for f in fields(cls)]

    def hit(self, *, score: float = 0.0, similarity_score: float | None = None,
            ranks: dict[str, int | None] | None = None, lexical_score: float | None = None,
            authority: float = 0.0) -> SearchHit:
        return SearchHit(
            source=self.source, id=self.id, text=self.text, score=score, similarity_score=similarity_score,
            ranks=ranks or {"vector": None, "lexical": None}, lexical_score=lexical_score, tags=_json_object(self.tags),
            document_id=self.document_id, document_path=self.document_path, document_title=self.document_title,
            page=self.page, chunk_index=self.chunk_index, memory_store_id=self.memory_store_id,
            memory_store_name=self.memory_store_name, created_at=self.created_at, tier=self.tier,
            title=self.title, provenance=self.provenance, lineage=self.lineage, authority=authority,
        )


@dataclass(frozen=True, kw_only=True)
class CandidateRow(DisplayRow):
    """A candidate of the ranked search: what each channel found of it, and its display fields."""

    #: Cosine distance to the query (None without a query vector).
    dist: float | None
    #: Whether the vector channel ranked it (the lexical channel's rows carry ``dist`` too).
    from_vector: bool
    #: Lexical score, higher is better (None: the lexical channel did not find it).
    lex: float | None
    #: The graph channel's score: the weights of the graph entities the memory mentions (None:
    #: the channel did not find it).
    graph: float | None
    #: The store's recency half-life override in days (None: its tier's default; 0: none).
    store_half_life: float | None
    #: The authority prior in [0, 1]: a chunk's version's (selectors.search.boosts), a memory's
    #: confidence.
    authority: float
    #: When an event hit happened (an event-kind memory's created_at, a chunk's version's
    #: occurred_at); None for a state, which the recency boost leaves alone.
    event_at: datetime | None
    #: Whether it is a memory written as a conversation turn (its neighbouring turns may join it).
    turn: bool

    @property
    def key(self) -> tuple[str, str]:
        return (self.source, self.id)

    @property
    def similarity(self) -> float | None:
        """Cosine similarity, None without a distance (or a NaN one)."""
        if self.dist is None or math.isnan(self.dist):
            return None
        return 1.0 - self.dist


@dataclass(frozen=True, kw_only=True)
class ContextRow(CandidateRow):
    """A conversation turn next to top hits (memory_engine.selectors.search.sql.context_sql)."""

    #: The ids of the memories it neighbours.
    origins: list[str]


Record = TypeVar("Record", bound=DisplayRow)


def fetch_records(cursor: Any, record: type[Record]) -> list[Record]:
    """The cursor's remaining rows as ``record`` instances, each column passed by its name."""
    names = result_columns(cursor) or []
    return [record(**dict(zip(names, row, strict=True))) for row in cursor.fetchall()]
