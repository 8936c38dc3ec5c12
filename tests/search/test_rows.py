"""The search statements and the records that read them agree by column name: every variant of
the ranked statement selects the fields of CandidateRow, the ordered read those of DisplayRow,
and a column a record does not name (or a field no column fills) fails instead of shifting."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from memory_engine.conf import embedding_dimensions, engine_settings
from memory_engine.db import vector_literal
from memory_engine.selectors.search import DOCUMENT, MEMORY, Scope, build_search_sql
from memory_engine.selectors.search.rows import CandidateRow, DisplayRow, fetch_records
from memory_engine.selectors.search.sql import HNSW_SCAN_SQL, ordered_read_sql

from .helpers import make_document, write

pytestmark = pytest.mark.django_db


def scopes(project: Any, store: Any, document: Any) -> list[Scope]:
    """Memories only, documents only, and both narrowed by every filter."""
    return [
        Scope(project_id=project.pk, store_ids=[store.pk], search_documents=False, document_ids=None,
              path_patterns=None, tags=None),
        Scope(project_id=project.pk, store_ids=None, search_documents=True, document_ids=None,
              path_patterns=None, tags=None),
        Scope(project_id=project.pk, store_ids=[store.pk], search_documents=True, document_ids=[document.pk],
              path_patterns=["/a%"], tags={"team": "a"}),
    ]


def test_every_statement_selects_the_fields_of_its_record(project, store, lexical_backend):
    document = make_document(project, "/a/guide.txt", ["Volcanoes erupt lava."], tags={"team": "a"})
    memory = write(store, "The user climbed a volcano.", tags={"team": "a"})
    params = {"qvec": vector_literal([0.1] * embedding_dimensions()), "qtext": "volcano", "bm25_candidates": 10,
              "bm25_k1": 1.2, "bm25_b": 0.75, "bm25_max_df": 0.1, "vec_k": 10, "lex_k": 10}
    config = engine_settings.KNOWLEDGE_TEXT_SEARCH_CONFIG
    with connection.cursor() as cursor:
        # As knowledge_search does: an HNSW scan keeps going past index entries of rows other
        # tests rolled back (without it, ef_search candidates can all be dead and the row is missed).
        cursor.execute(HNSW_SCAN_SQL, {"ef_search": engine_settings.HNSW_EF_SEARCH,
                                       "iterative_scan": engine_settings.HNSW_ITERATIVE_SCAN,
                                       "max_scan_tuples": engine_settings.HNSW_MAX_SCAN_TUPLES})
        for scope in scopes(project, store, document):
            for vector, lexical in ((True, None), (True, lexical_backend), (False, lexical_backend)):
                for exact in (True, False):
                    sql = build_search_sql(scope, vector=vector, lexical=lexical,
                                           exact={MEMORY: exact, DOCUMENT: exact}, config=config)
                    cursor.execute(sql, {**scope.params(), **params})
                    rows = fetch_records(cursor, CandidateRow)
                    assert sorted(column[0] for column in cursor.description) == sorted(CandidateRow.columns())
                    assert {row.key for row in rows} == {(source, pk) for source, pk in (
                        (MEMORY, memory.pk), (DOCUMENT, document.chunks.get().pk)) if source in scope.sources}
            cursor.execute(ordered_read_sql(scope), {**scope.params(), "k": 5})
            assert sorted(column[0] for column in cursor.description) == sorted(DisplayRow.columns())
            assert [row.source for row in fetch_records(cursor, DisplayRow)] == scope.sources


def test_each_value_lands_in_its_field(project, store):
    document = make_document(project, "/a/guide.txt", ["Volcanoes erupt lava."], title="Guide")
    memory = write(store, "The user climbed a volcano.", tags={"k": "v"})
    scope = Scope(project_id=project.pk, store_ids=[store.pk], search_documents=True, document_ids=None,
                  path_patterns=None, tags=None)
    with connection.cursor() as cursor:
        cursor.execute(ordered_read_sql(scope), {**scope.params(), "k": 5})
        first, second = (row.hit() for row in fetch_records(cursor, DisplayRow))
    assert (first.source, first.id, first.text, first.tags, first.memory_store_id, first.memory_store_name,
            first.created_at, first.document_id) == (
        MEMORY, memory.pk, "The user climbed a volcano.", {"k": "v"}, store.pk, store.name, memory.created_at, None)
    assert (second.source, second.document_id, second.document_path, second.document_title, second.chunk_index,
            second.text, second.memory_store_id, second.created_at) == (
        DOCUMENT, document.pk, "/a/guide.txt", "Guide", 0, "Volcanoes erupt lava.", None, None)


@pytest.mark.parametrize(
    ("columns", "named"),
    [([*DisplayRow.columns(), "surplus"], "surplus"), (DisplayRow.columns()[:-1], "created_at")],
    ids=["surplus column", "missing column"],
)
def test_a_column_and_a_field_that_do_not_match_fail(db, columns, named):
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + ", ".join(f"NULL AS {name}" for name in columns))
        with pytest.raises(TypeError, match=named):
            fetch_records(cursor, DisplayRow)
