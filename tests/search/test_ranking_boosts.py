"""The authority prior and the bounded boosts (memory_engine.selectors.search.boosts): the
authority table in Python and in SQL, the clamp property, and the boosts in real searches
(real PostgreSQL, real MiniLM)."""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from memory_engine.models import Chunk, Document, DocumentVersion, Memory
from memory_engine.ranking_knobs import RankingKnobs
from memory_engine.selectors.search import SearchHit, SearchRequest, knowledge_search
from memory_engine.selectors.search.boosts import (
    BOOST_MAX,
    BOOST_MIN,
    apply_boosts,
    authority_boost,
    recency_boost,
    version_authority,
    version_authority_sql,
)

from .helpers import make_document, write

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("lexical_backend")]

SOURCE_CLASSES = [c.value for c in DocumentVersion.SourceClass]
KINDS = [c.value for c in DocumentVersion.CapturedByKind]
PROVENANCES = [c.value for c in DocumentVersion.Provenance]


def engine(settings: Any, **values: Any) -> None:
    settings.MEMORY_ENGINE = {**(getattr(settings, "MEMORY_ENGINE", None) or {}), **values}


def knobs(**values: Any) -> RankingKnobs:
    """Every ranking stage off but ``values``."""
    return RankingKnobs(**{"dedupe_documents": False, "mmr": False, "authority_weight": 0.0, "boosts": False,
                           "corroboration_support": 0.0, "corroboration_contradict": 0.0, "corroboration_cap": 3,
                           "rerank": False, "rrf_k": 5, "vector_weight": 1.0, "lexical_weight": 1.25, **values})


def hit(id_: str, score: float, authority: float = 0.0) -> SearchHit:
    return SearchHit(source="document", id=id_, text=id_, score=score, similarity_score=None,
                     ranks={"vector": None, "lexical": None}, authority=authority)


# --- the authority table -----------------------------------------------------------------------


def test_version_authority_table_ends_and_default():
    assert version_authority(source_class="native", captured_by_kind="human", provenance="stated") == 1.0
    assert version_authority(source_class="derived", captured_by_kind="agent", provenance="inferred") == 0.0
    assert version_authority(source_class="native", captured_by_kind="system", provenance="unknown") == 0.7
    for combo in itertools.product(SOURCE_CLASSES, KINDS, PROVENANCES):
        assert 0.0 <= version_authority(source_class=combo[0], captured_by_kind=combo[1], provenance=combo[2]) <= 1.0


def test_version_authority_sql_matches_the_python_table():
    combos = list(itertools.product(SOURCE_CLASSES, KINDS, PROVENANCES)) + [(None, None, None)]
    values = ", ".join(["(%s::varchar, %s::varchar, %s::varchar)"] * len(combos))
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {version_authority_sql('dv')} FROM (VALUES {values}) "
                       "dv(source_class, captured_by_kind, provenance)", [v for combo in combos for v in combo])
        got = [row[0] for row in cursor.fetchall()]
    expected = [version_authority(source_class=s, captured_by_kind=k, provenance=p) for s, k, p in combos[:-1]]
    assert got[:-1] == pytest.approx(expected)
    assert got[-1] == pytest.approx(0.7)  # a chunk without a version scores as the model's defaults


# --- the clamp: no boost lifts a weak match over a strong one ----------------------------------


def test_every_boost_is_clamped():
    now = timezone.now()
    assert authority_boost(1.0, 10.0) == BOOST_MAX and authority_boost(0.0, 10.0) == 1.0
    assert authority_boost(1.0, -1.0) == 1.0  # a negative weight is off, never a penalty
    assert recency_boost(now, now=now, half_life_days=30) == pytest.approx(BOOST_MAX)
    assert recency_boost(now - timedelta(days=30), now=now, half_life_days=30) == pytest.approx(1.0)
    assert recency_boost(now - timedelta(days=10_000), now=now, half_life_days=30) == pytest.approx(BOOST_MIN)
    assert recency_boost(None, now=now, half_life_days=30) == 1.0  # a state does not decay


def test_a_strong_match_with_the_worst_boosts_beats_a_weak_match_with_the_best():
    """Strong vs weak, precisely: the strong hit's fused score is more than BOOST_MAX / BOOST_MIN
    (≈ 1.86) times the weak hit's. Then whatever the boosts, the strong hit stays first."""
    now = timezone.now()
    ratio = BOOST_MAX / BOOST_MIN
    fresh, stale = now, now - timedelta(days=100_000)
    for weight, strong_authority, weak_authority, strong_at, weak_at in itertools.product(
            (0.0, 0.3, 100.0), (0.0, 1.0), (0.0, 1.0), (stale, None, fresh), (stale, None, fresh)):
        strong, weak = hit("strong", 1.0, strong_authority), hit("weak", 1.0 / ratio - 1e-9, weak_authority)
        ranked = apply_boosts([weak, strong], {("document", "strong"): strong_at, ("document", "weak"): weak_at},
                              knobs=knobs(authority_weight=weight, boosts=True), half_life_days=30, now=now)
        assert [h.id for h in ranked] == ["strong", "weak"]
    # Inside the ratio the boosts may reorder: the bound is the clamp, not a wider one.
    strong, weak = hit("strong", 1.0), hit("weak", 1.0 / ratio + 0.01, authority=1.0)
    ranked = apply_boosts([strong, weak], {("document", "strong"): stale, ("document", "weak"): fresh},
                          knobs=knobs(authority_weight=0.3, boosts=True), half_life_days=30, now=now)
    assert [h.id for h in ranked] == ["weak", "strong"]


def test_no_boost_leaves_the_fused_order_and_scores():
    hits = [hit("a", 0.5, 1.0), hit("b", 0.4, 0.0)]
    assert apply_boosts(hits, {}, knobs=knobs(), half_life_days=30, now=timezone.now()) == hits
    assert [h.score for h in hits] == [0.5, 0.4]


# --- in the search -----------------------------------------------------------------------------


def versioned_document(project: Any, path: str, text: str, **version: Any) -> Document:
    document = make_document(project, path, [text])
    dv = DocumentVersion.objects.create(document=document, number=1, sha256="0" * 64, status="active", **version)
    Document.objects.filter(pk=document.pk).update(active_version=dv)
    Chunk.objects.filter(document=document).update(version=dv)
    return document


def scores(result: Any) -> dict[str, float]:
    return {h.document_path or h.id: h.score for h in result.results}


def test_authority_comes_from_the_version_and_the_memory_confidence(project, store, settings):
    versioned_document(project, "/a/handbook.txt", "Employees accrue 25 days of paid vacation per year.",
                       source_class="native", captured_by_kind="human", provenance="stated")
    versioned_document(project, "/a/summary.txt", "Paid vacation is 25 days a year for employees.",
                       source_class="derived", captured_by_kind="agent", provenance="inferred")
    make_document(project, "/a/legacy.txt", ["Vacation days: employees get 25 paid days per year."])
    memory = write(store, "Employees get 25 days of paid vacation every year.", confidence=0.4)
    query = dict(project=project, query="paid vacation days", memory_store_ids=[store.pk], document_paths=["/a/"])
    off = knowledge_search(SearchRequest(**query))
    authority = {h.document_path or h.id: h.authority for h in off.results}
    assert authority == {"/a/handbook.txt": 1.0, "/a/summary.txt": 0.0, "/a/legacy.txt": pytest.approx(0.7),
                         memory.pk: pytest.approx(0.4)}
    engine(settings, SEARCH_AUTHORITY_WEIGHT=0.2)
    on = knowledge_search(SearchRequest(**query))
    before, after = scores(off), scores(on)
    for key, value in authority.items():
        assert after[key] == pytest.approx(before[key] * (1 + 0.2 * value))


def test_recency_boost_decays_events_not_states(project, store, settings):
    event = write(store, "The user visited the Lisbon office last spring.", kind="observation")
    state = write(store, "The user works from the Lisbon office.", kind="fact")
    Memory.objects.filter(pk__in=[event.pk, state.pk]).update(created_at=timezone.now() - timedelta(days=60))
    versioned_document(project, "/news/lisbon.txt", "The Lisbon office moved to a new building.",
                       occurred_at=timezone.now() - timedelta(days=60))
    make_document(project, "/guide/lisbon.txt", ["The Lisbon office is open on weekdays."])
    query = dict(project=project, query="Lisbon office", memory_store_ids=[store.pk],
                 document_paths=["/news/", "/guide/"])
    before = scores(knowledge_search(SearchRequest(**query)))
    engine(settings, SEARCH_BOOSTS=True, SEARCH_BOOST_HALF_LIFE_DAYS=30.0)
    after = scores(knowledge_search(SearchRequest(**query)))
    two_half_lives = BOOST_MIN + (BOOST_MAX - BOOST_MIN) * 0.25
    assert after[event.pk] == pytest.approx(before[event.pk] * two_half_lives, rel=1e-3)
    assert after["/news/lisbon.txt"] == pytest.approx(before["/news/lisbon.txt"] * two_half_lives, rel=1e-3)
    assert after[state.pk] == pytest.approx(before[state.pk])  # a fact is a state: no decay
    assert after["/guide/lisbon.txt"] == pytest.approx(before["/guide/lisbon.txt"])  # undated document
