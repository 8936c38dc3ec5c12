"""The lexical channel scores a project's rows with that project's statistics only
(memory_engine.lexical_statistics): another project's writes move neither its scores nor its
ranks, and the statistics follow every insert, delete and move of a row."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection, transaction

from memory_engine.db import allow_ledger_erasure
from memory_engine.lexical_statistics import install_lexical_statistics
from memory_engine.models import Chunk, LexicalStatistics, LexicalTerm, MemoryContent, Project
from memory_engine.selectors.search import SearchRequest, knowledge_search
from tests.factories import MemoryStoreFactory

from .helpers import FILLER, make_document, write

pytestmark = [pytest.mark.django_db]

QUERY = "zeppelin hangar opening time"
OURS = [
    "The zeppelin hangar opens at nine on weekdays.",
    "Hangar tours start at the north gate.",
    "The opening time on Sundays is eleven.",
    "A zeppelin ride lasts forty minutes.",
]
THEIRS = [f"Zeppelin {i} is parked in hangar {i % 7}; zeppelins and hangars everywhere." for i in range(40)]


def lexical_answer(project: Project, **filters: Any) -> list[tuple[str, float]]:
    result = knowledge_search(SearchRequest(project=project, query=QUERY, channels=("lexical",), limit=10,
                                            **filters))
    return [(hit.text, round(hit.lexical_score, 9)) for hit in result.results]


@pytest.mark.parametrize("exact_scan", [True, False], ids=["small-scope", "index-scan"])
def test_another_projects_memories_move_no_score_and_no_rank(project, other_project, lexical_backend, settings,
                                                              exact_scan):
    """Project B writes 40 memories full of the query's words: project A's lexical answer (ids,
    order and scores) is exactly what it was, whether A's store is scored row by row or read from
    the index."""
    if not exact_scan:
        settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "SEARCH_EXACT_SCAN_MAX": 0}
    ours, theirs = MemoryStoreFactory(project=project), MemoryStoreFactory(project=other_project)
    for text in OURS + FILLER:
        write(ours, text)
    before = lexical_answer(project, memory_store_ids=[ours.pk])
    assert before and before[0][0] == OURS[0]

    for text in THEIRS:
        write(theirs, text)

    assert lexical_answer(project, memory_store_ids=[ours.pk]) == before
    assert lexical_answer(other_project, memory_store_ids=[theirs.pk])  # B's own search finds its rows


def test_another_projects_documents_move_no_score_and_no_rank(project, other_project, lexical_backend):
    make_document(project, "/hangar.txt", OURS + FILLER)
    before = lexical_answer(project)
    assert before and before[0][0] == OURS[0]

    make_document(other_project, "/fleet.txt", THEIRS)

    assert lexical_answer(project) == before


def statistics(project: Project, part: str) -> tuple[int, int]:
    row = LexicalStatistics.objects.filter(project=project, part=part).first()
    return (row.documents, row.tokens) if row else (0, 0)


def term(project: Project, part: str, lexeme: str) -> int:
    row = LexicalTerm.objects.filter(project=project, part=part, term=lexeme).first()
    return row.documents if row else 0


def counted(table: str, project: Project, where: str = "true") -> tuple[int, int]:
    """(rows, tokens) of a project's rows counted from scratch, as the triggers count them."""
    with connection.cursor() as cursor:
        cursor.execute(f"""SELECT count(*), coalesce(sum((SELECT sum(coalesce(array_length(l.positions, 1), 1))
                                  FROM unnest(to_tsvector('english', t.text)) l)), 0)
                           FROM {table} t WHERE t.project_id = %s AND {where}""", [project.pk])
        rows, tokens = cursor.fetchone()
    return rows, tokens


def test_statistics_follow_inserts_deletes_and_moves(project, other_project, store):
    for text in OURS:
        write(store, text)
    assert statistics(project, "content") == counted("memory_engine_memorycontent", project)
    assert statistics(project, "content")[0] == 4
    assert term(project, "content", "zeppelin") == 2
    assert term(project, "content", "hangar") == 2
    assert statistics(other_project, "content") == (0, 0)

    # a content row deleted (a purge, an erasure) is uncounted
    orphan = MemoryContent.objects.create(store=store, text="Zeppelin sheds.", content_hash="x" * 64)
    assert term(project, "content", "zeppelin") == 3
    orphan.delete()
    assert statistics(project, "content") == counted("memory_engine_memorycontent", project)
    assert statistics(project, "content")[0] == 4
    assert term(project, "content", "zeppelin") == 2

    document = make_document(project, "/hangar.txt", OURS)
    assert statistics(project, "chunk") == counted("memory_engine_chunk", project)
    assert term(project, "chunk", "zeppelin") == 2

    # a chunk whose text changes is uncounted with its old text and counted with its new one
    Chunk.objects.filter(document=document, chunk_index=0).update(text="Airships only.")
    assert term(project, "chunk", "zeppelin") == 1
    assert term(project, "chunk", "airship") == 1
    assert statistics(project, "chunk") == counted("memory_engine_chunk", project)

    document.delete()
    assert statistics(project, "chunk") == (0, 0)
    assert term(project, "chunk", "airship") == 0


def test_a_deleted_project_takes_its_statistics_with_it(project, store):
    write(store, OURS[0])
    assert LexicalTerm.objects.filter(project=project).exists()
    with transaction.atomic():
        allow_ledger_erasure()  # a project's deletion erases its ledger rows too
        project.delete()
    assert not LexicalStatistics.objects.filter(project_id=project.pk).exists()
    assert not LexicalTerm.objects.filter(project_id=project.pk).exists()


def test_a_reinstall_counts_every_row_afresh(project, store):
    """What migration 0028 and `memory_engine_rebuild_lexical` (a new text search config) run."""
    for text in OURS:
        write(store, text)
    LexicalTerm.objects.filter(project=project).delete()
    install_lexical_statistics()
    assert term(project, "content", "zeppelin") == 2
    assert statistics(project, "content") == counted("memory_engine_memorycontent", project)


def _many_rows(store: Any, text: str, count: int) -> None:
    """``count`` content rows and memories of ``text`` in ``store`` (one statement each; the
    statistics' triggers count them)."""
    with connection.cursor() as cursor:
        cursor.execute("""
            WITH c AS (
                INSERT INTO memory_engine_memorycontent (id, store_id, project_id, content_hash, text,
                                                         embedding_model, created_at)
                SELECT 'mc_' || substr(md5(%(store)s || i), 1, 30), %(store)s, %(project)s, md5(%(store)s || i),
                       %(text)s,
                       '', now() FROM generate_series(1, %(count)s) AS i RETURNING id)
            INSERT INTO memory_engine_memory (id, store_id, project_id, content_id, tags, metadata, source_type,
                                              confidence, evidence_count, kind, summary, title, retention_class,
                                              created_at)
            SELECT 'mem_' || c.id, %(store)s, %(project)s, c.id, '{}', '{}', 'manual', 1, 1, 'fact', '', '',
                   'standard', now() FROM c""", {"store": store.pk, "project": store.project_id, "text": text,
                                                 "count": count})


def test_which_terms_select_candidates_is_decided_by_the_projects_own_rows(project, other_project, settings):
    """tsvector fallback: a query term in more than KNOWLEDGE_BM25_MAX_DF of the rows does not
    select candidates. Which terms those are is read from the project's own statistics: a word
    in every one of another project's 1,200 rows (analysed) still selects our rows, and one in
    every one of ours does not (the rarer word selects)."""
    from memory_engine.lexical import TSVECTOR, build_lexical_indexes

    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "KNOWLEDGE_LEXICAL_BACKEND": TSVECTOR}
    build_lexical_indexes(backend=TSVECTOR)
    ours, theirs = MemoryStoreFactory(project=project), MemoryStoreFactory(project=other_project)
    write(ours, "The zeppelin hangar opens at nine on weekdays.")
    _many_rows(theirs, "A zeppelin is parked in the hangar.", 1200)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memory_engine_memorycontent")

    def found(query: str) -> list[str]:
        result = knowledge_search(SearchRequest(project=project, query=query, channels=("lexical",), limit=10,
                                                memory_store_ids=[ours.pk]))
        return [hit.text for hit in result.results]

    # "balloon" is in no row: only "zeppelin" can select ours
    assert found("zeppelin balloon") == ["The zeppelin hangar opens at nine on weekdays."]

    _many_rows(ours, "A zeppelin flew over the town.", 1200)  # now in all but one of our rows
    assert found("zeppelin weekdays")[0] == "The zeppelin hangar opens at nine on weekdays."
