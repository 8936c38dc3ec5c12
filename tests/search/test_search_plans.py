"""The indexes are really used (HNSW; bm25 or the fallback's GIN), and a selective scope
never leaves either channel short of ``limit`` when enough rows match."""

from __future__ import annotations

import random

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from memory_engine.db import vector_literal
from memory_engine.lexical import BM25, TSVECTOR
from memory_engine.models import MemoryContent
from memory_engine.selectors.search import SearchRequest, knowledge_search
from tests.factories import MemoryStoreFactory

from .helpers import make_document, write

#: ANALYZE after writing: the bm25 tables are held against VACUUM first (tests/conftest.py)
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("bm25_tables_held", "lexical_backend")]

LEXICAL_INDEXES = {
    BM25: ("me_content_text_bm25", "me_chunk_text_bm25"),
    TSVECTOR: ("me_content_text_gin", "me_chunk_text_gin"),
}

WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
         "quebec romeo sierra tango uniform victor whiskey xray yankee zulu amber basil cedar dune ember "
         "fjord grove heath iris jade").split()


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.sample(WORDS, 6))


@pytest.fixture
def many_stores(project, hashing_embedder, settings):
    """20 stores of 25 memories: every store is a small slice of one shared HNSW index."""
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "SEARCH_EXACT_SCAN_MAX": 10}
    rng = random.Random(7)
    stores = [MemoryStoreFactory(project=project) for _ in range(20)]
    for store in stores:
        for i in range(25):
            # the store's name as words: as a code ("store-37") it would be every fact's subject
            write(store, f"{_sentence(rng)} {store.name.replace('-', ' ')} fact {i}")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memory_engine_memorycontent; ANALYZE memory_engine_memory")
    return stores


def force_index_paths(cursor) -> None:
    """Test tables are tiny, so the planner would rather sort them; make it show its index path."""
    cursor.execute("SET LOCAL enable_seqscan = off")
    cursor.execute("SET LOCAL enable_sort = off")


def _main_query(queries: list[dict]) -> str:
    return next(q["sql"] for q in reversed(queries) if q["sql"].lstrip().startswith("WITH"))


def _plan(sql: str) -> str:
    with transaction.atomic(), connection.cursor() as cursor:
        force_index_paths(cursor)
        cursor.execute("EXPLAIN " + sql)
        return "\n".join(row[0] for row in cursor.fetchall())


def test_filtered_hnsw_returns_every_row_that_exists(project, many_stores):
    store = many_stores[13]
    vector = MemoryContent.objects.filter(store=store).first().embedding
    # Without an iterative scan: a plain filtered HNSW scan at a small ef_search loses rows.
    with transaction.atomic(), connection.cursor() as cursor:
        force_index_paths(cursor)
        cursor.execute("SET LOCAL hnsw.ef_search = 40")
        cursor.execute("SET LOCAL hnsw.iterative_scan = off")
        cursor.execute(
            "SELECT id FROM memory_engine_memorycontent WHERE store_id = %s "
            "ORDER BY embedding <=> %s::vector LIMIT 20",
            [store.pk, vector_literal(list(vector))],
        )
        assert len(cursor.fetchall()) < 20, "the test needs a scope the index alone under-fills"
    with connection.cursor() as cursor:
        force_index_paths(cursor)  # until the test's transaction ends: the search takes the HNSW path
    with CaptureQueriesContext(connection) as ctx:
        knowledge_search(SearchRequest(project=project, query="alpha bravo charlie", memory_store_ids=[store.pk],
                                       limit=20))
    main_queries = [q["sql"] for q in ctx.captured_queries if q["sql"].lstrip().startswith("WITH")]
    assert len(main_queries) == 1, "one statement: the iterative scan needs no retry"
    assert "me_content_embedding_hnsw" in _plan(main_queries[0])
    assert any("hnsw.iterative_scan" in q["sql"] for q in ctx.captured_queries)
    for limit in (5, 20, 25, 50):
        hits = knowledge_search(SearchRequest(project=project, query="alpha bravo charlie", memory_store_ids=[store.pk],
                                              limit=limit))
        vector_hits = [h for h in hits.results if h.ranks["vector"] is not None]
        assert len(vector_hits) == min(limit, 25)
        assert {h.memory_store_id for h in hits.results} == {store.pk}


def test_several_stores_at_once(project, many_stores):
    ids = [s.pk for s in many_stores[:3]]
    hits = knowledge_search(SearchRequest(project=project, query="delta echo", memory_store_ids=ids, limit=50))
    assert len([h for h in hits.results if h.ranks["vector"]]) == 50
    assert {h.memory_store_id for h in hits.results} <= set(ids)


def test_selective_scope_fills_the_lexical_limit(project, many_stores):
    """Every memory says "fact": one store of 20 is a 5 % slice of the ranked lexical scan,
    and the scope is applied inside it, so the lexical list is full."""
    store = many_stores[4]
    with connection.cursor() as cursor:
        force_index_paths(cursor)
    for limit in (10, 25, 40):
        hits = knowledge_search(SearchRequest(project=project, query="fact", memory_store_ids=[store.pk], limit=limit,
                                              channels=("lexical",)))
        assert len(hits.results) == min(limit, 25)
        assert {h.memory_store_id for h in hits.results} == {store.pk}


def test_selective_document_scope_fills_the_lexical_limit(project, hashing_embedder):
    rng = random.Random(3)
    docs = [make_document(project, f"/d/{i}.txt", [f"{_sentence(rng)} shared word" for _ in range(12)])
            for i in range(30)]
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memory_engine_chunk")
        force_index_paths(cursor)
    hits = knowledge_search(SearchRequest(project=project, query="shared word", document_ids=[docs[17].pk], limit=10,
                                          channels=("lexical",)))
    assert len(hits.results) == 10 and {h.document_id for h in hits.results} == {docs[17].pk}
    hits = knowledge_search(SearchRequest(project=project, query="shared word", document_paths=["/d/2"], limit=30,
                                          channels=("lexical",)))
    assert len(hits.results) == 30
    assert {h.document_path for h in hits.results} <= {"/d/2.txt"} | {f"/d/{i}.txt" for i in range(20, 30)}


def test_explain_uses_hnsw_and_the_lexical_indexes(project, many_stores, lexical_backend):
    make_document(project, "/plans.txt", [_sentence(random.Random(i)) for i in range(50)])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memory_engine_chunk")
    with CaptureQueriesContext(connection) as ctx:
        knowledge_search(SearchRequest(project=project, query="alpha bravo",
                                       memory_store_ids=[s.pk for s in many_stores],
                                       document_paths=["/"], limit=10))
    plan = _plan(_main_query(ctx.captured_queries))
    content_index, chunk_index = LEXICAL_INDEXES[lexical_backend]
    assert "me_content_embedding_hnsw" in plan, plan
    assert content_index in plan, plan
    assert chunk_index in plan, plan


def test_explain_chunks_use_hnsw_when_the_scope_is_large(project, hashing_embedder, settings, lexical_backend):
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "SEARCH_EXACT_SCAN_MAX": 10}
    make_document(project, "/big.txt", [_sentence(random.Random(i)) for i in range(200)])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memory_engine_chunk")
    with CaptureQueriesContext(connection) as ctx:
        hits = knowledge_search(SearchRequest(project=project, query="alpha bravo", limit=10))
    assert len(hits.results) == 10
    plan = _plan(_main_query(ctx.captured_queries))
    assert "me_chunk_embedding_hnsw" in plan, plan
    assert LEXICAL_INDEXES[lexical_backend][1] in plan, plan
