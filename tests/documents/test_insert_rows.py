"""insert_rows: a swap's chunks written by one INSERT from unnest, the same rows bulk_create writes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from django.db import DataError, connection, transaction

from memory_engine.db import insert_rows
from memory_engine.models import Chunk, Document
from memory_engine.selectors.search import SearchRequest, knowledge_search
from memory_engine.services.documents import document_create_text, document_ingest_many
from tests.conftest import use_embedder

COLUMNS = "document_id, version_id, generation_id, chunk_index, page, text, embedding::text, embedding_model"


def chunks_of(document: Document, vectors: list[Any]) -> list[Chunk]:
    texts = ["First part.", "Tabs\tand\nnewlines, back\\slash, accents éü and emoji 🦉.", "Third part."]
    return [Chunk(document_id=document.pk, version=None, chunk_index=i, page=i + 1 if i else None, text=text,
                  embedding=vector, embedding_model="m" if vector is not None else "")
            for i, (text, vector) in enumerate(zip(texts, vectors, strict=True))]


def rows(document: Document) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {COLUMNS} FROM memory_engine_chunk WHERE document_id = %s ORDER BY chunk_index",
                       [document.pk])
        return [row[1:] for row in cursor.fetchall()]


def two_documents(project: Any) -> tuple[Document, Document]:
    return tuple(document_create_text(project=project, content=f"Note {name}.", path=f"/{name}.txt",
                                      enqueue=False) for name in ("copied", "inserted"))  # type: ignore[return-value]


def test_copy_writes_the_rows_bulk_create_writes(project: Any) -> None:
    copied, inserted = two_documents(project)
    rng = np.random.default_rng(7)
    vectors = [rng.standard_normal(384).astype(np.float32), None, list(rng.standard_normal(384))]
    insert_rows(chunks_of(copied, vectors), batch_size=2)  # two statements
    Chunk.objects.bulk_create(chunks_of(inserted, vectors))

    assert rows(copied) == rows(inserted) and len(rows(copied)) == 3
    assert rows(copied)[1][5] is None and rows(copied)[1][6] == ""  # the NULL vector stays NULL
    ids = list(Chunk.objects.filter(document=copied).values_list("pk", flat=True))
    assert all(pk.startswith("chk_") and len(pk) == 30 for pk in ids) and len(set(ids)) == 3
    stored = Chunk.objects.get(document=copied, chunk_index=0).embedding
    # halfvec, as migrated: the float32 value rounded to half precision, exactly
    assert np.array_equal(np.asarray(stored, dtype=np.float32), vectors[0].astype(np.float16).astype(np.float32))


def test_a_vector_of_another_dimension_is_a_data_error_and_rolls_back(project: Any) -> None:
    copied, _ = two_documents(project)
    with pytest.raises(DataError, match="expected 384 dimensions, not 256"), transaction.atomic():
        insert_rows(chunks_of(copied, [np.ones(384), np.ones(256), None]))
    assert not Chunk.objects.filter(document=copied).exists()


def test_ingested_chunks_are_found_by_both_channels(project: Any, settings: Any) -> None:
    use_embedder(settings, "tests.providers.HashingEmbeddingProvider", MODEL="all-MiniLM-L6-v2", DIMENSIONS=384)
    documents = [document_create_text(project=project, content=f"The {word} lighthouse keeps its log in {word}.",
                                      path=f"/{word}.txt", enqueue=False) for word in ("amber", "cobalt")]
    document_ingest_many(document_ids=[document.pk for document in documents])
    for word, document in zip(("amber", "cobalt"), documents, strict=True):
        chunk = Chunk.objects.get(document=document)
        assert chunk.embedding is not None and chunk.embedding_model == "all-MiniLM-L6-v2"
        for channel in ("vector", "lexical"):
            hits = knowledge_search(SearchRequest(project=project, query=f"{word} lighthouse",
                                                  channels=(channel,))).results
            assert document.pk in {hit.document_id for hit in hits}, (word, channel)
