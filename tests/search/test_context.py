"""Neighbouring turns (SEARCH_CONTEXT_TURNS, docs/retrieval.md): the conversation turns just
before and after a top hit gain a share of its score, so the turn that answers a question comes
with the turn that matches it. Only turns of the same conversation, in the searched scope, written
close in time."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory_engine.models import Memory, MemoryStore, Project
from memory_engine.models.memories import SourceType
from memory_engine.selectors.search import SearchRequest, knowledge_search
from tests.plans import analyze_memory_tables, explain_analyze, fill, rows_read

from .helpers import write

pytestmark = [pytest.mark.django_db]

SEARCH = "/api/v1/knowledge/search"
QUERY = "picnic"
#: A conversation: the second turn answers what the first asks, without the query's word.
TURNS = [
    "Ana: Last weekend we finally had the picnic by the lake.",
    "Ben: Nice! I baked a lemon cake from my grandmother's recipe for it.",
    "Ana: The ducks tried to steal the sandwiches.",
    "Ben: Next month I start a pottery class downtown.",
    "Ana: My sister moves to Lisbon in the spring.",
]


def say(store: MemoryStore, text: str, conversation: str = "c1", **kwargs: Any) -> Memory:
    return write(store, text, conversation_id=conversation, **kwargs)


def answer(project: Project, store: MemoryStore, **options: Any) -> list[tuple[str, dict[str, int | None]]]:
    """The texts and ranks of a lexical search for QUERY (no vector: only the word selects)."""
    result = knowledge_search(SearchRequest(project=project, query=QUERY, memory_store_ids=[store.pk],
                                            channels=("lexical",), limit=10, **options))
    return [(hit.text, hit.ranks) for hit in result.results]


def test_the_turns_around_a_hit_come_with_it(project, store, settings):
    """The picnic turn is found by its word; the two turns after it (up to SEARCH_CONTEXT_TURNS)
    come with it, below it, ranked as its context; the turns further on do not."""
    for text in TURNS:
        say(store, text)
    found = answer(project, store)
    assert [text for text, _ in found] == TURNS[:3]
    assert found[0][1] == {"vector": None, "lexical": 1}
    assert [ranks for _, ranks in found[1:]] == [{"vector": None, "lexical": None, "context": 1}] * 2

    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "SEARCH_CONTEXT_TURNS": 0}
    assert [text for text, _ in answer(project, store)] == TURNS[:1]
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "SEARCH_CONTEXT_TURNS": 1}
    assert [text for text, _ in answer(project, store)] == TURNS[:2]


def test_only_turns_of_the_same_conversation_are_neighbours(project, store):
    """Between the picnic turn and its answer: a turn of another conversation and a memory that
    is no conversation turn. Neither gains; the answer, two turns on in its own conversation, does."""
    say(store, TURNS[0])
    say(store, "Cleo: The train to Porto was late again.", conversation="c2")
    write(store, "The team's standup is at nine.")
    say(store, TURNS[1])
    assert [text for text, _ in answer(project, store)] == TURNS[:2]


def test_a_turn_written_long_after_is_no_neighbour(project, store):
    """A turn written more than SEARCH_CONTEXT_GAP_MINUTES after the hit belongs to another
    sitting of the conversation."""
    first = say(store, TURNS[0])
    later = say(store, TURNS[1])
    Memory.objects.filter(pk=later.pk).update(created_at=first.created_at + timedelta(minutes=61))
    assert [text for text, _ in answer(project, store)] == TURNS[:1]
    Memory.objects.filter(pk=later.pk).update(created_at=first.created_at + timedelta(minutes=59))
    assert [text for text, _ in answer(project, store)] == TURNS[:2]


def test_a_turn_outside_the_searched_scope_stays_out(project, store):
    """The neighbour must pass the search's own filters: a tag filter keeps out an untagged
    answer, a store not searched keeps out its turns, and a retired turn is not brought back."""
    say(store, TURNS[0], tags={"topic": "weekend"})
    answer_turn = say(store, TURNS[1])
    assert [text for text, _ in answer(project, store, tags={"topic": "weekend"})] == TURNS[:1]
    Memory.objects.filter(pk=answer_turn.pk).update(invalidated_at=answer_turn.created_at)
    assert [text for text, _ in answer(project, store)] == TURNS[:1]


def test_the_api_names_a_neighbours_rank(client, store):
    for text in TURNS[:2]:
        say(store, text)
    response = client.post(SEARCH, {"query": QUERY, "memory_store_ids": [store.pk], "lexical_weight": 1.0},
                           format="json")
    assert response.status_code == 200, response.json()
    results = response.json()["results"]
    texts = [hit["text"] for hit in results]
    assert texts.index(TURNS[1]) == texts.index(TURNS[0]) + 1
    assert results[texts.index(TURNS[1])]["ranks"]["context"] == 1
    # Both are top hits here (the vector channel finds the second), and each neighbours the other.
    assert results[texts.index(TURNS[0])]["ranks"]["context"] == 2


@pytest.mark.usefixtures("lexical_backend", "hashing_embedder")
def test_the_turns_around_a_hit_are_read_by_index_in_a_long_conversation(project, store):
    """A conversation of 3,000 turns loaded at one instant: the statement that reads a hit's
    neighbours reads a few memory rows around it (the store's index by time, then id), not the
    whole conversation."""
    fill(store, 3000, "turn", "Ana: more about the weekend", vectors=False)
    with connection.cursor() as cursor:  # 3,000 turns before the hit, loaded at one instant
        cursor.execute("UPDATE memory_engine_memory SET source_type = 'conversation', "
                       "created_at = now() - interval '1 minute' WHERE store_id = %s", [store.pk])
    for text in TURNS[:2]:  # turns without a conversation_id, like the filled ones
        write(store, text, source_type=SourceType.CONVERSATION)
    analyze_memory_tables()

    with CaptureQueriesContext(connection) as ctx:
        found = answer(project, store)
    assert [text for text, _ in found][:2] == TURNS[:2]
    context = [q["sql"] for q in ctx.captured_queries if "near AS" in q["sql"]]
    assert len(context) == 1
    plan = explain_analyze(context[0])
    assert rows_read(plan, "memory_engine_memory") < 200, json.dumps(plan, indent=1)[:4000]
