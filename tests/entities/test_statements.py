"""memory_engine.mentions.statements and the LLM extractor's answer reading."""

from __future__ import annotations

import pytest

from memory_engine.mentions import changed_value, extract_mentions, statement
from memory_engine.providers.entities import parse_entities


def test_a_statement_is_split_into_subject_attribute_and_value() -> None:
    text = "Marco is allergic to shellfish."
    said = statement(text, extract_mentions(text))
    assert said is not None
    assert (said.subject.name, said.attribute, said.value) == ("Marco", "is allergic to", "shellfish")
    spoken = "Caroline: I moved to Boston last year."
    said = statement(spoken, extract_mentions(spoken))
    assert said is not None and (said.subject.name, said.attribute) == ("Caroline", "moved to")
    assert statement("the weather is fine", extract_mentions("the weather is fine")) is None


@pytest.mark.parametrize(("old", "new", "expected"), [
    ("Marco is allergic to shellfish.", "Marco is allergic to peanuts.",
     ("marco is allergic to", "shellfish", "peanuts")),
    ("The Lisbon office opens at 8am on Mondays.", "The Lisbon office opens at 9am on Mondays.",
     ("the lisbon office opens at", "8am", "9am")),
])
def test_one_changed_span_is_the_new_value(old: str, new: str, expected: tuple[str, str, str]) -> None:
    change = changed_value(old, new)
    assert change is not None and (change.attribute, change.old, change.new) == expected


@pytest.mark.parametrize(("old", "new"), [
    ("Marco is allergic to shellfish.", "marco is allergic to shellfish"),  # a restatement
    ("Marco is allergic to shellfish.", "Marco is allergic to shellfish and dust."),  # detail added
    ("Marco is allergic to shellfish.", "Ana is allergic to shellfish."),  # another subject
    ("Marco likes tea in the morning.", "Marco drinks coffee in the evening."),  # two places
])
def test_no_value_change(old: str, new: str) -> None:
    assert changed_value(old, new) is None


def test_an_llm_answer_is_read_leniently() -> None:
    found = parse_entities('Sure: [{"name": "Ana  Costa", "kind": "person", "subject": true}, '
                           '{"name": "7 May 2023", "kind": "date"}, {"name": "last week", "kind": "date"}, '
                           '"Acme", {"name": "x", "kind": "planet"}, {"kind": "place"}] done')
    assert [(m.name, m.kind, m.role) for m in found] == [
        ("Ana Costa", "person", "subject"), ("2023-05-07", "date", "mention"), ("Acme", "other", "mention"),
        ("x", "other", "mention")]
    with pytest.raises(ValueError):
        parse_entities("no entities here")
