"""The graph channel of recall (SEARCH_GRAPH_WEIGHT): memories that mention the query's entities
and their neighbours, a third ranked list in the fusion, inside the caller's scope and grants."""

from __future__ import annotations

from typing import Any

import pytest

from memory_engine.selectors.search import SearchRequest, knowledge_search
from memory_engine.services.entities import entities_extract_memories
from memory_engine.services.memories import memory_write
from tests.access.helpers import tag
from tests.factories import MemoryStoreFactory

pytestmark = pytest.mark.django_db

QUESTION = "Who leads the office that tests its generator every Thursday?"
FACTS = ["The Porto office tests its generator every Thursday.", "Ana leads the Porto office.",
         "Bruno leads the Lisbon warehouse.", "The Lisbon warehouse orders paper on Mondays.",
         "Carla leads the design team.", "The canteen serves soup every day."]


@pytest.fixture
def facts(project: Any) -> dict[str, Any]:
    store = MemoryStoreFactory(project=project)
    ids = {text: memory_write(store=store, content=text, principal="test").memory.pk for text in FACTS}
    entities_extract_memories()
    return {"store": store, "ids": ids}


def search(project: Any, store: Any, settings: Any, **knobs: Any) -> list[Any]:
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, **knobs}
    return knowledge_search(SearchRequest(project=project, query=QUESTION, memory_store_ids=[store.pk],
                                          limit=3)).results


def test_off_by_default_and_no_graph_rank(project: Any, facts: dict[str, Any], settings: Any) -> None:
    hits = search(project, facts["store"], settings)
    assert all("graph" not in hit.ranks for hit in hits)


def test_one_hop_brings_the_fact_about_the_office_the_question_names(project: Any, facts: dict[str, Any],
                                                                     settings: Any) -> None:
    ana = facts["ids"]["Ana leads the Porto office."]
    alone = search(project, facts["store"], settings, SEARCH_GRAPH_WEIGHT=1.0, SEARCH_GRAPH_HOPS=0)
    assert "graph" not in next((hit.ranks for hit in alone if hit.id == ana), {})  # Ana names no Thursday
    hops = search(project, facts["store"], settings, SEARCH_GRAPH_WEIGHT=1.0, SEARCH_GRAPH_HOPS=1)
    ranks = {hit.id: hit.ranks.get("graph") for hit in hops}
    assert ranks[facts["ids"]["The Porto office tests its generator every Thursday."]] == 1  # names Thursday
    assert ranks.get(ana) == 2  # Porto: named with Thursday, one hop away, in the top three


def test_the_graph_channel_keeps_to_the_scope(project: Any, facts: dict[str, Any], settings: Any) -> None:
    other = MemoryStoreFactory(project=project)
    tag(other, "team:b")
    tag(facts["store"], "team:a")
    hidden = memory_write(store=other, content="Dora leads the Porto office on Thursday.", principal="test").memory
    entities_extract_memories()
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "SEARCH_GRAPH_WEIGHT": 1.0, "SEARCH_GRAPH_HOPS": 1}
    hits = knowledge_search(SearchRequest(project=project, query=QUESTION, memory_store_ids=[facts["store"].pk],
                                          limit=10,
                                          access_tags=["team:a"])).results
    assert hidden.pk not in {hit.id for hit in hits}


def test_the_graph_channel_keeps_to_the_entity_kinds(project: Any, facts: dict[str, Any], settings: Any) -> None:
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "SEARCH_GRAPH_WEIGHT": 1.0}
    query = "What happens at the Porto office?"
    ids = facts["ids"]
    every = knowledge_search(SearchRequest(project=project, query=query, memory_store_ids=[facts["store"].pk],
                                           limit=10)).results
    assert {hit.id for hit in every if "graph" in hit.ranks} == {
        ids["The Porto office tests its generator every Thursday."], ids["Ana leads the Porto office."]}
    people = knowledge_search(SearchRequest(project=project, query=query, memory_store_ids=[facts["store"].pk],
                                            limit=10,
                                            kinds=["person"])).results
    # the generator's memory names Porto but no person: no channel ranks it
    assert {hit.id for hit in people if "graph" in hit.ranks} == {ids["Ana leads the Porto office."]}
    assert {hit.id for hit in people} <= {ids[text] for text in FACTS if text.split()[0] in ("Ana", "Bruno", "Carla")}
