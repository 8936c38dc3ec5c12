"""The write funnel's updates by subject and attribute (VALUE_CHANGE_GATE), with the real embedder."""

from __future__ import annotations

from typing import Any

import pytest

from memory_engine.mentions import extract_mentions, value_update
from memory_engine.services.memories import memory_write
from tests.factories import MemoryStoreFactory

pytestmark = pytest.mark.django_db


def second_write(project: Any, first: str, second: str) -> Any:
    store = MemoryStoreFactory(project=project)
    memory_write(store=store, content=first, principal="test")
    return memory_write(store=store, content=second, principal="test")


@pytest.mark.parametrize(("first", "second", "attribute"), [
    ("The office is closed on Sundays.", "The office is closed on Saturdays.", "the office is closed on"),
    ("The customer prefers email contact.", "The customer prefers phone contact.", "the customer prefers"),
    ("Redis is not exposed to the public internet.", "Redis is exposed to the public internet.", "redis is"),
    ("The team standup is on Tuesdays at 10am", "The team standup moved to Thursdays at 10am", "the team standup"),
    ("Backups are stored in Frankfurt.", "Backups are stored in Dublin.", "backups are stored in"),
])
def test_a_new_value_of_the_same_subject_and_attribute_supersedes(project: Any, first: str, second: str,
                                                                 attribute: str) -> None:
    result = second_write(project, first, second)
    assert result.action == "superseded"
    assert result.decision_reason == "value_change"
    assert result.assertion.details["value_change"]["attribute"] == attribute
    assert result.similarity is not None and result.similarity < 0.9  # below the supersede threshold


def test_two_statements_stay_two(project: Any) -> None:
    assert second_write(project, "A man is playing a guitar.", "A man is playing a flute.").action == "created"
    # another attribute of one subject: the verb changed with the value
    assert second_write(project, "The parking garage opens at seven.",
                        "The parking garage closes at midnight.").action == "created"


def test_conversation_turns_are_events_not_updates(project: Any) -> None:
    store = MemoryStoreFactory(project=project)
    memory_write(store=store, content="Caroline: I went to the park yesterday.", principal="test",
                 source_type="conversation")
    result = memory_write(store=store, content="Caroline: I went to the museum yesterday.", principal="test",
                          source_type="conversation")
    assert result.action == "created"


def test_a_restatement_is_not_a_value_change(project: Any) -> None:
    assert value_update("Kenji wants summaries under 200 words.", "Kenji wants summaries under 200 words, always.",
                        extract_mentions("Kenji wants summaries under 200 words, always.")) is None
    result = second_write(project, "Marco is allergic to shellfish.", "Marco is allergic to shellfish.")
    assert result.action == "skipped"


def test_the_gate_can_be_switched_off(project: Any, settings: Any) -> None:
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "VALUE_CHANGE_GATE": False}
    result = second_write(project, "The office is closed on Sundays.", "The office is closed on Saturdays.")
    assert result.action == "created"
