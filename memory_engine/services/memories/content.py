"""Content rows: one per distinct text per store, embedded once.

A write's text is normalised and hashed (:func:`content_hash`); the row of that hash is reused
with its vector (no embedder call), or the text is embedded once, before any lock
(:func:`prepare_vector`: best-effort, a failure stores the row without a vector), and the row is
found or made in one statement under the store lock (:func:`resolve_content`). Formation
(memory_engine.services.formation) makes its rows through the same upsert.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from typing import Any, NamedTuple

from django.db import DataError, connection

from memory_engine.db import Params, in_order, prepared, result_columns, vector_literal
from memory_engine.ids import new_id
from memory_engine.models import MemoryContent, MemoryStore
from memory_engine.providers.embeddings import EmbeddingError, get_embedding_provider
from memory_engine.selectors.dedup import (
    CANDIDATES_PLAN_PARAMS,
    CONTENT_FIELDS,
    Candidates,
    CandidatesQuery,
    content_row,
    read_candidates,
)

from .locks import LOCK_FOR_WRITE_SQL, lock_for_write_params

__all__ = ["CONTENT_LOOKUP_SQL", "CONTENT_UPSERT_SQL", "Prepared", "ResolvedContent", "content_hash",
           "embed_best_effort", "embed_many_best_effort", "model_switched", "normalize_text", "parse_vector",
           "prepare_vector", "resolve_content"]

logger = logging.getLogger("memory_engine.write")


def normalize_text(text: str) -> str:
    """Trimmed, whitespace-collapsed text: the identity of a memory's content."""
    return " ".join(text.split())


def content_hash(text: str) -> str:
    return hashlib.sha256(normalize_text(text).encode("utf-8")).hexdigest()



def embed_best_effort(text: str) -> tuple[list[float] | None, str]:
    """Embed one text; on any failure return (None, reason) instead of raising."""
    return embed_many_best_effort([text])[0]


def embed_many_best_effort(texts: Sequence[str]) -> list[tuple[list[float] | None, str]]:
    """:func:`embed_best_effort` for many texts, in one provider call (the provider splits it into
    its own batches). When that call fails, each text is embedded alone, so a text the provider
    refuses costs only its own vector."""
    provider = get_embedding_provider()
    if provider is None:
        return [(None, "embedding_not_configured") for _ in texts]
    try:
        vectors = provider.embed_documents(list(texts))
    except EmbeddingError as exc:
        if len(texts) > 1:
            logger.warning("embedding %d texts in one call failed; embedding them one by one: %s", len(texts), exc)
            return [embed_best_effort(text) for text in texts]
        logger.warning("embedding failed; storing without a vector: %s", exc)
        return [(None, "embedding_failed")]
    # A zero vector (e.g. a text of control characters only) has no direction: its cosine is NaN.
    return [(vector, "") if any(vector) else (None, "embedding_empty") for vector in vectors]



class Prepared(NamedTuple):
    """prepare_vector's answer."""

    #: the text's vector, None when its content row holds one already (or the embedder failed)
    vector: list[float] | None
    #: what the assertion should record (an embedder failure)
    notes: dict[str, Any]
    #: the content row as seen before the write: None (no row), else whether it holds a vector
    stored: bool | None
    #: the vector the content row holds (the consent classifier's; the row keeps it)
    stored_vector: list[float] | None = None
    #: the instruction guard's finding the content row holds (its ``guard`` column)
    stored_guard: Any = None


def parse_vector(text: str | None) -> list[float] | None:
    """A vector as PostgreSQL writes it (``[0.1,0.2,…]``), None for NULL."""
    return None if text is None else [float(value) for value in text.strip("[]").split(",")]


#: The content row of a text (prepare_vector): by its store and hash, and by the store's project,
#: which routes the statement to one node on a distributed PostgreSQL (docs/scaling.md).
CONTENT_LOOKUP_SQL = ("SELECT embedding::text, guard FROM memory_engine_memorycontent"
                      " WHERE project_id = %s AND store_id = %s AND content_hash = %s")


def prepare_vector(store: MemoryStore, text: str, digest: str) -> Prepared:
    """Embed the text unless its content row already holds a vector (outside any transaction); that
    vector is read then, for the consent classifier and the instruction guard, with the guard's
    finding the row holds."""
    with connection.cursor() as cursor:
        # raw SQL: the ORM spent more time building the query than PostgreSQL answering it
        cursor.execute(CONTENT_LOOKUP_SQL, [store.project_id, store.pk, digest])
        row = cursor.fetchone()
    if row is not None and row[0] is not None:
        return Prepared(None, {}, True, parse_vector(row[0]), json_value(row[1]))
    stored = None if row is None else False
    vector, failure = embed_best_effort(text)
    return Prepared(vector, {"embedding": failure} if failure else {}, stored,
                    stored_guard=None if row is None else json_value(row[1]))


def json_value(value: Any) -> Any:
    """A jsonb value read with a raw cursor (Django's psycopg setup hands it over as text)."""
    return json.loads(value) if isinstance(value, str) else value



class ResolvedContent(NamedTuple):
    """resolve_content's answer."""

    #: the content row, its vector deferred (it stays in PostgreSQL)
    row: MemoryContent
    has_vector: bool
    #: made by this statement: no memory holds it yet
    inserted: bool
    #: what the ``candidates`` statement sent with the upsert found
    found: Candidates | None = None


#: The content upsert (resolve_content). A hit updates the row only to fill a missing vector or a
#: guard finding the row lacks (or holds from an older guard): rewriting it would add a row
#: version, and with it an entry in every index (the HNSW graph's insert is the slow one). The
#: store lock is held, so a row this statement does not insert or update is committed and
#: visible to its second branch. Both branches name the project, so the statement runs on one
#: node of a distributed PostgreSQL (docs/scaling.md).
CONTENT_UPSERT_SQL = f"""WITH upsert AS (
    INSERT INTO memory_engine_memorycontent
        (id, store_id, project_id, content_hash, text, embedding, embedding_model, guard, created_at)
    VALUES (%(id)s, %(store)s, %(project)s, %(hash)s, %(text)s, %(vector)s::vector, %(model)s, %(guard)s::jsonb,
            now())
    ON CONFLICT (store_id, content_hash, project_id) DO UPDATE SET
        embedding = coalesce(memory_engine_memorycontent.embedding, EXCLUDED.embedding),
        embedding_model = CASE WHEN memory_engine_memorycontent.embedding IS NULL THEN EXCLUDED.embedding_model
                               ELSE memory_engine_memorycontent.embedding_model END,
        guard = coalesce(EXCLUDED.guard, memory_engine_memorycontent.guard)
    WHERE (memory_engine_memorycontent.embedding IS NULL AND EXCLUDED.embedding IS NOT NULL)
       OR (EXCLUDED.guard IS NOT NULL AND memory_engine_memorycontent.guard IS DISTINCT FROM EXCLUDED.guard)
    RETURNING {", ".join(CONTENT_FIELDS)}, embedding IS NOT NULL
)
SELECT * FROM upsert
UNION ALL
SELECT {", ".join(CONTENT_FIELDS)}, embedding IS NOT NULL FROM memory_engine_memorycontent
WHERE project_id = %(project)s AND store_id = %(store)s AND content_hash = %(hash)s
  AND NOT EXISTS (SELECT 1 FROM upsert)"""


def resolve_content(store: MemoryStore, text: str, digest: str, vector: list[float] | None, *,
                    guard: dict[str, Any] | None = None, lock_first: bool = False,
                    candidates: CandidatesQuery | None = None,
                    prepare: bool = False) -> ResolvedContent:
    """Find or make the content row in one statement, filling its vector if it had none.

    ``guard``: the instruction guard's finding on the text (stored on a new row, or on a row whose
    finding is missing or older). ``lock_first``: take the store lock for the write first
    (locks.LOCK_FOR_WRITE_SQL), so the upsert runs once the lock is held; otherwise the caller
    holds it already. ``candidates``: a candidates_query statement naming the row by its hash, run
    after the upsert. ``prepare``: run the upsert and the candidates statement as statements
    prepared on the connection (memory_engine.db.prepared; the caller runs its transaction again
    when one was lost). All in one round trip where the connection allows it (memory_engine.db.in_order).
    """
    provider = get_embedding_provider()
    model_name = provider.model_name if (provider and vector is not None) else ""
    content_id = new_id("mc")
    upsert_params = {"id": content_id, "store": store.pk, "project": store.project_id, "hash": digest, "text": text,
                     "model": model_name, "guard": None if guard is None else json.dumps(guard),
                     "vector": vector_literal(vector) if vector is not None else None}
    preparing: list[tuple[str, Params]] = []
    upsert: tuple[str, Params] = (CONTENT_UPSERT_SQL, upsert_params)
    if prepare:
        preparing, upsert = prepared(CONTENT_UPSERT_SQL, upsert_params)
    statements: list[tuple[str, Params]] = [upsert]
    if lock_first:
        statements.insert(0, (LOCK_FOR_WRITE_SQL, lock_for_write_params(store.pk)))
    if candidates is not None:
        if prepare:
            more, execute = prepared(candidates.sql, candidates.params, inline=CANDIDATES_PLAN_PARAMS)
            preparing.extend(more)
            statements.append(execute)
        else:
            statements.append((candidates.sql, candidates.params))
    # a PREPARE is not undone by a rollback: counted as prepared once sent (db.prepared)
    statements = preparing + statements
    with connection.cursor() as cursor:
        results = []
        for _ in in_order(cursor, statements):
            names = result_columns(cursor)
            if names is not None:  # the statements that return rows (not a PREPARE)
                results.append((names, cursor.fetchall()))
    row = results[1 if lock_first else 0][1][0]
    found = read_candidates(*results[-1]) if candidates is not None else None
    fields = len(CONTENT_FIELDS)
    return ResolvedContent(content_row(row[:fields]), bool(row[fields]), row[0] == content_id, found)


#: What a content insert meets when the embedding model was switched after the text was embedded.
MODEL_SWITCH_ERRORS = ("dimensions, not", "different vector dimensions", "different halfvec dimensions")


def model_switched(exc: DataError) -> bool:
    """Whether a content insert failed because the embedding model (its dimension) was switched
    between the embedder call and the insert (docs/embeddings.md)."""
    return any(reason in str(exc) for reason in MODEL_SWITCH_ERRORS)
