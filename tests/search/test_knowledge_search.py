"""knowledge_search: sources, channels, fusion, degradation, bad input (real MiniLM)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from memory_engine.conf import engine_settings
from memory_engine.exceptions import EmbeddingNotConfigured, SearchParameterInvalid, UnknownScope
from memory_engine.models import Memory
from memory_engine.selectors.search import SearchRequest, knowledge_search
from memory_engine.services.memory_lifecycle import memory_forget
from tests.factories import MemoryStoreFactory

from .helpers import FILLER, make_document, write

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("lexical_backend")]

HANDBOOK = [
    "Employees accrue 25 days of paid vacation per year.",
    "The office is closed on public holidays.",
    "Expense reports must be filed within 30 days.",
]


def test_bare_query_searches_documents_never_memories(project, store, lexical_backend):
    make_document(project, "/handbook/leave.txt", HANDBOOK)
    write(store, "The user prefers vacation in Italy.")
    result = knowledge_search(SearchRequest(project=project, query="paid vacation days"))
    assert result.results, result
    assert result.lexical_backend == lexical_backend
    assert {hit.source for hit in result.results} == {"document"}
    top = result.results[0]
    assert top.text == HANDBOOK[0]
    assert top.document_path == "/handbook/leave.txt"
    assert top.ranks["vector"] == 1 and top.ranks["lexical"] is not None
    assert 0.3 < top.similarity_score <= 1.0
    assert result.degraded == []


def test_memory_store_ids_search_memories_only(project, store):
    make_document(project, "/handbook/leave.txt", HANDBOOK)
    memory = write(store, "The user prefers vacation in Italy.")
    write(store, "The user's dog is called Rex.")
    result = knowledge_search(SearchRequest(project=project, query="where does the user like to go on vacation",
                                            memory_store_ids=[store.pk]))
    assert {hit.source for hit in result.results} == {"memory"}
    assert result.results[0].id == memory.pk
    assert result.results[0].memory_store_name == store.name
    assert result.results[0].memory_store_id == store.pk


def test_invalidated_memories_never_appear(project, store, settings):
    # two live memories of one subject: the second is a new value the VALUE_CHANGE_GATE would
    # supersede the first with
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "VALUE_CHANGE_GATE": False}
    kept = write(store, "The user lives in Berlin.")
    gone = write(store, "The user lives in Paris.")
    memory_forget(memory=gone, principal="test")
    for query in ("where does the user live", "Paris"):
        ids = [h.id for h in knowledge_search(SearchRequest(project=project, query=query,
                                                            memory_store_ids=[store.pk])).results]
        assert gone.pk not in ids
        assert ids == [kept.pk], query  # the valid memory is still found: the search did run
    rows = knowledge_search(SearchRequest(project=project, memory_store_ids=[store.pk])).results
    assert [h.id for h in rows] == [kept.pk]


def test_tags_turn_on_both_sources_and_match_store_tags(project):
    tagged_store = MemoryStoreFactory(project=project, tags={"team": "a"})
    plain_store = MemoryStoreFactory(project=project)
    via_store = write(tagged_store, "Deploys happen on Tuesdays.")
    via_memory = write(plain_store, "Deploys are frozen in December.", tags={"team": "a"})
    write(plain_store, "Deploys need two approvals.", tags={"team": "b"})
    make_document(project, "/a/deploy.txt", ["Deploy checklist for team A."], tags={"team": "a"})
    make_document(project, "/b/deploy.txt", ["Deploy checklist for team B."], tags={"team": "b"})
    result = knowledge_search(SearchRequest(project=project, query="deploys", tags={"team": "a"}))
    found = {(h.source, h.id) for h in result.results}
    assert ("memory", via_store.pk) in found and ("memory", via_memory.pk) in found
    assert {h.document_path for h in result.results if h.source == "document"} == {"/a/deploy.txt"}
    assert len(found) == 3


def test_document_paths_are_prefixes_and_ids_union(project):
    a = make_document(project, "/policies/leave.txt", ["Leave policy: 25 days."])
    make_document(project, "/policies_old/leave.txt", ["Old leave policy: 20 days."])
    c = make_document(project, "/notes/misc.txt", ["Leave requests go to HR."])
    result = knowledge_search(SearchRequest(project=project, query="leave", document_paths=["/policies/"]))
    assert {h.document_id for h in result.results} == {a.pk}
    result = knowledge_search(SearchRequest(project=project, query="leave", document_paths=["/policies/"],
                                            document_ids=[c.pk]))
    assert {h.document_id for h in result.results} == {a.pk, c.pk}
    # LIKE wildcards in a prefix are literal.
    assert knowledge_search(SearchRequest(project=project, query="leave", document_paths=["/pol%"])).results == []


def test_no_query_reads_are_deterministic(project, store):
    first = write(store, "first fact")
    second = write(store, "second fact")
    Memory.objects.filter(pk=first.pk).update(created_at=timezone.now() - timedelta(days=2))
    doc = make_document(project, "/d.txt", ["zero", "one", "two"], embed=False)
    result = knowledge_search(SearchRequest(project=project, memory_store_ids=[store.pk], document_ids=[doc.pk]))
    assert [h.id for h in result.results[:2]] == [first.pk, second.pk]
    assert [h.chunk_index for h in result.results[2:]] == [0, 1, 2]
    assert knowledge_search(SearchRequest(project=project, memory_store_ids=[store.pk], document_ids=[doc.pk],
                                          limit=3)).results == result.results[:3]


def test_min_similarity_filters_vector_candidates_only(project):
    make_document(project, "/x.txt", ["Photosynthesis converts light into chemical energy.",
                                      "The quarterly budget meeting is on Friday."])
    loose = knowledge_search(SearchRequest(project=project, query="budget meeting"))
    assert len(loose.results) == 2
    strict = knowledge_search(SearchRequest(project=project, query="budget meeting", min_similarity=0.5))
    texts = [h.text for h in strict.results]
    assert texts == ["The quarterly budget meeting is on Friday."]
    assert strict.results[0].similarity_score >= 0.5
    # A lexical match survives min_similarity: the filter applies to vector candidates only.
    lexical = knowledge_search(SearchRequest(project=project, query="Photosynthesis budget", min_similarity=0.99))
    assert all(h.ranks["vector"] is None for h in lexical.results)


def test_channels_merge_memories_and_chunks_on_their_own_value(project, store):
    write(store, "The user is allergic to peanuts.")
    make_document(project, "/menu.txt", ["The cafeteria menu lists peanut sauce on Mondays."])
    result = knowledge_search(SearchRequest(project=project, query="peanut allergy", memory_store_ids=[store.pk],
                                            document_paths=["/"]))
    vector_ranks = sorted(h.ranks["vector"] for h in result.results if h.ranks["vector"])
    assert vector_ranks == [1, 2]
    by_sim = sorted(result.results, key=lambda h: -h.similarity_score)
    assert [h.ranks["vector"] for h in by_sim] == [1, 2]


def test_rrf_scores_and_recency_decay(project, store, settings):
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "VALUE_CHANGE_GATE": False}  # both colours live
    old = write(store, "The user's favourite colour is blue.")
    new = write(store, "The user's favourite colour is green.")
    Memory.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=60))
    weights = {"vector": engine_settings.SEARCH_VECTOR_WEIGHT, "lexical": engine_settings.SEARCH_LEXICAL_WEIGHT}
    plain = knowledge_search(SearchRequest(project=project, query="favourite colour", memory_store_ids=[store.pk],
                                           rrf_k=60))
    for hit in plain.results:
        expected = sum(weights[ch] / (60 + r) for ch, r in hit.ranks.items() if r)
        assert hit.score == pytest.approx(expected)
    decayed = knowledge_search(SearchRequest(project=project, query="favourite colour", memory_store_ids=[store.pk],
                                             recency_half_life_days=30))
    scores = {h.id: h for h in decayed.results}
    assert decayed.results[0].id == new.pk
    k = engine_settings.SEARCH_RRF_K
    base = sum(weights[ch] / (k + r) for ch, r in scores[old.pk].ranks.items() if r)
    assert scores[old.pk].score == pytest.approx(base * 0.25, rel=1e-3)


def test_limit_cuts(project):
    make_document(project, "/many.txt", [f"note number {i} about search" for i in range(30)])
    assert len(knowledge_search(SearchRequest(project=project, query="note about search", limit=7)).results) == 7


def test_unknown_and_foreign_ids_get_the_same_answer(project, other_project):
    foreign_store = MemoryStoreFactory(project=other_project)
    foreign_doc = make_document(other_project, "/secret.txt", ["secret"], embed=False)
    answers = []
    for ids in ([foreign_store.pk], ["ms_doesnotexist"]):
        with pytest.raises(UnknownScope) as info:
            knowledge_search(SearchRequest(project=project, query="x", memory_store_ids=ids))
        answers.append(info.value)
        assert info.value.details == {"memory_store_ids": ids}
    assert answers[0].code == answers[1].code == "UNKNOWN_SCOPE"
    with pytest.raises(UnknownScope) as info:
        knowledge_search(SearchRequest(project=project, query="x", document_ids=[foreign_doc.pk]))
    assert info.value.details == {"document_ids": [foreign_doc.pk]}


def test_other_projects_rows_never_leak(project, other_project):
    make_document(other_project, "/handbook/leave.txt", HANDBOOK)
    other_store = MemoryStoreFactory(project=other_project, tags={"team": "a"})
    write(other_store, "Vacation is unlimited.")
    assert knowledge_search(SearchRequest(project=project, query="vacation days")).results == []
    assert knowledge_search(SearchRequest(project=project, query="vacation", tags={"team": "a"})).results == []


@pytest.mark.parametrize(
    ("knob", "value", "code"),
    [
        ("limit", 0, "LIMIT_INVALID"), ("limit", 101, "LIMIT_INVALID"), ("limit", 2.5, "LIMIT_INVALID"),
        ("rrf_k", 0, "RRF_K_INVALID"), ("rrf_k", -1, "RRF_K_INVALID"),
        ("min_similarity", 1.5, "MIN_SIMILARITY_INVALID"), ("min_similarity", -1.01, "MIN_SIMILARITY_INVALID"),
        ("recency_half_life_days", -1, "HALF_LIFE_INVALID"),
        ("recency_half_life_days", float("nan"), "HALF_LIFE_INVALID"),
    ],
)
def test_bad_knobs(project, knob, value, code):
    with pytest.raises(SearchParameterInvalid) as info:
        knowledge_search(SearchRequest(project=project, query="x", **{knob: value}))
    assert info.value.code == code


@pytest.mark.parametrize(
    "query",
    ["!", ":*", "a & b | !c", "'\"quoted\" -not or", "x:* & !(y <-> z)", "日本語のテキスト ünïcödé 🚀",
     "\\ ' '' \\'", "word " * 2000, "a\x00b"],
)
def test_hostile_queries_never_error(project, store, query):
    make_document(project, "/d.txt", ["plain text about words"])
    write(store, "plain memory about words")
    result = knowledge_search(SearchRequest(project=project, query=query, memory_store_ids=[store.pk],
                                            document_paths=["/"]))
    assert isinstance(result.results, list)


@pytest.mark.usefixtures("no_embedder")
def test_no_provider_answers_503_when_a_query_needs_a_vector(project, store):
    with pytest.raises(EmbeddingNotConfigured):
        knowledge_search(SearchRequest(project=project, query="anything", memory_store_ids=[store.pk]))
    # Deterministic reads need no vector.
    assert knowledge_search(SearchRequest(project=project, memory_store_ids=[store.pk])).results == []


def test_failing_embedder_degrades_to_lexical(project, store, settings):
    write(store, "The user drinks oat milk.")
    from tests.conftest import use_embedder

    use_embedder(settings, "tests.providers.FailingEmbeddingProvider", MODEL="all-MiniLM-L6-v2")
    result = knowledge_search(SearchRequest(project=project, query="oat milk", memory_store_ids=[store.pk]))
    assert result.degraded == ["embed_unavailable", "lexical_only"]
    assert [h.text for h in result.results] == ["The user drinks oat milk."]
    assert result.results[0].similarity_score is None
    assert result.results[0].ranks == {"vector": None, "lexical": 1}


def test_failing_lexical_channel_degrades_to_vectors(project, store, settings):
    for text in FILLER:  # more memories than the limit: the vector channel must rank the right one first
        write(store, text)
    write(store, "The user drinks oat milk.")
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "KNOWLEDGE_LEXICAL_BACKEND": "tsvector",
                              "KNOWLEDGE_TEXT_SEARCH_CONFIG": "no_such_config"}
    result = knowledge_search(SearchRequest(project=project, query="what milk", memory_store_ids=[store.pk]))
    assert result.degraded == ["lexical_unavailable"]
    assert result.lexical_backend is None
    assert len(result.results) == 10 and all(h.ranks["lexical"] is None for h in result.results)
    assert (result.results[0].text, result.results[0].ranks["vector"]) == ("The user drinks oat milk.", 1)


def test_any_term_matches_and_stems(project):
    make_document(project, "/d.txt", ["apples and pears", "bananas only", "nothing in common"])
    hits = knowledge_search(SearchRequest(project=project, query="apple banana", channels=("lexical",)))
    assert sorted(h.text for h in hits.results) == ["apples and pears", "bananas only"]
    assert sorted(h.ranks["lexical"] for h in hits.results) == [1, 2]
    # Quotes and backslashes in terms stay literal.
    quoted = knowledge_search(SearchRequest(project=project, query="it's a back\\slash 'quote'"))
    assert quoted.degraded == [] and all(h.ranks["lexical"] is None for h in quoted.results)


@pytest.mark.parametrize("query", ["the cats of Rome", "!", "it's a back\\slash 'quote' :* &", "the of and"])
def test_stop_words_alone_never_match(project, query):
    make_document(project, "/d.txt", ["The cats of Rome sleep in the ruins of the Forum.",
                                      "The history of the city and of the empire.",
                                      "Dogs of the countryside."])
    result = knowledge_search(SearchRequest(project=project, query=query))
    lexical = sorted((h for h in result.results if h.ranks["lexical"]), key=lambda h: h.ranks["lexical"])
    assert result.degraded == []  # operators and quotes never break the lexical channel
    if query == "the cats of Rome":
        assert lexical[0].text.startswith("The cats of Rome")
        assert len(lexical) == 1  # stop words alone never make a match
    else:  # punctuation, operators and stop words match no chunk
        assert lexical == []


@pytest.mark.usefixtures("bm25_tables_held")  # ANALYZE after writing (tests/conftest.py)
def test_rare_terms_outrank_common_ones(project):
    """BM25's IDF on both backends: the one row with the rare word beats rows repeating a common one."""
    texts = [f"report report number {i} about the weather" for i in range(30)] + ["a single report on volcanoes"]
    make_document(project, "/r.txt", texts)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memory_engine_chunk")
    hits = knowledge_search(SearchRequest(project=project, query="report volcanoes", channels=("lexical",), limit=5))
    assert hits.results[0].text == "a single report on volcanoes"
