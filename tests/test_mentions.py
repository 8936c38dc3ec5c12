"""memory_engine.mentions: the rule extractor's names, kinds, roles and date keys, and entity keys."""

from __future__ import annotations

import pytest

from memory_engine.mentions import (
    DATE,
    ORGANIZATION,
    PERSON,
    PLACE,
    PRODUCT,
    SPEAKER,
    SUBJECT,
    entity_key,
    extract_mentions,
)


def found(text: str) -> list[tuple[str, str]]:
    return [(m.name, m.kind) for m in extract_mentions(text)]


def test_a_chat_turn_names_its_speaker_and_the_people_it_speaks_to() -> None:
    mentions = extract_mentions("Caroline: Hey Mel! Good to see you! How have you been?")
    assert [(m.name, m.kind, m.role) for m in mentions] == [("Caroline", PERSON, SPEAKER), ("Mel", PERSON, "mention")]


def test_names_places_organisations_products_and_dates() -> None:
    assert found("Caroline: I went to the LGBTQ support group in Boston on 7 May 2023 with Melanie.") == [
        ("Caroline", PERSON), ("LGBTQ", ORGANIZATION), ("Boston", PLACE), ("2023-05-07", DATE), ("Melanie", PERSON)]
    assert found("Dr. Ana Costa moved to Porto in 2021 and joined Bank of America.") == [
        ("Ana Costa", PERSON), ("Porto", PLACE), ("2021", DATE), ("Bank of America", ORGANIZATION)]
    assert found("We upgraded the database to PostgreSQL 16 on May 3, 2024.") == [
        ("PostgreSQL", PRODUCT), ("2024-05-03", DATE)]


@pytest.mark.parametrize(("text", "key"), [
    ("The sync is on 2024-03-05.", "2024-03-05"),
    ("It shipped on March 5th, 2024.", "2024-03-05"),
    ("It shipped in March 2024.", "2024-03"),
    ("The team never meets on Fridays.", "friday"),
    ("She moved there in 2019.", "2019"),
    ("The peak is around February 2nd.", "--02-02"),
])
def test_dates_are_named_by_their_canonical_form(text: str, key: str) -> None:
    assert [m.name for m in extract_mentions(text) if m.kind == DATE] == [key]


@pytest.mark.parametrize("text", [
    "Inflammation is a fundamental protective response.",
    "Wow, that sounds amazing!",
    "A man is playing the drums.",
    "The API gateway allows 500 requests per minute.",
    "To assess the prevalence of peripheral arterial disease (PAD) we ran a study.",
    "BACKGROUND Increased plasma homocysteine is associated with disease.",
    "Check-in at the lodge opens at 3.",
])
def test_ordinary_capitalised_words_are_not_names(text: str) -> None:
    assert found(text) == []


def test_the_opening_name_is_the_subject_and_a_possessive_is_cut() -> None:
    mentions = extract_mentions("Melanie's kids like dinosaurs and Caroline.")
    assert [(m.name, m.role) for m in mentions] == [("Melanie", SUBJECT), ("Caroline", "mention")]
    assert found("Mohammed prefers trains over planes.") == [("Mohammed", PERSON)]


def test_a_headline_keeps_only_names_it_knows() -> None:
    assert found("Obama Signs Health Care Bill Into Law In Ohio") == [("Ohio", PLACE)]


def test_entity_keys_fold_case_accents_articles_and_possessives() -> None:
    assert entity_key("The Lisbon Office's", PLACE) == "lisbon office"
    assert entity_key("Tomás  Ortega", PERSON) == entity_key("tomas ortega", PERSON) == "tomas ortega"
    assert entity_key("2023-05-07", DATE) == "2023-05-07"


def test_extraction_is_linear_on_long_hostile_text() -> None:
    text = ("Aaa " * 5000) + ("Bbb of " * 3000) + "(" * 2000
    assert isinstance(extract_mentions(text), list)


def test_a_short_sentence_of_names_is_not_a_headline() -> None:
    found = [(m.name, m.kind, m.role) for m in extract_mentions("Fatima works in Lisbon on Fridays.")]
    assert found[:2] == [("Fatima", "person", "subject"), ("Lisbon", "place", "mention")]
    assert [m.name for m in extract_mentions("Marco works at Acme Corporation.")][0] == "Marco"


def test_a_sentence_with_one_lower_case_verb_between_names_is_not_a_headline() -> None:
    assert found("Marco reports to Dana Whitfield.") == [("Marco", PERSON), ("Dana Whitfield", PERSON)]


def test_an_organisations_or_places_last_word_stays_in_its_name() -> None:
    assert found("Marco works at Acme Corporation near Union Station.") == [
        ("Marco", PERSON), ("Acme Corporation", ORGANIZATION), ("Union Station", PLACE)]
    assert found("The Commission said so.") == []  # alone, such a word is an ordinary one


def test_an_organisations_legal_form_is_not_part_of_its_key() -> None:
    keys = {entity_key(name, ORGANIZATION) for name in ("Acme Corporation", "Acme Corp.", "Acme, Inc.", "ACME")}
    assert keys == {"acme"}
    assert entity_key("Acme Corporation", PERSON) == "acme corporation"


def test_a_plural_noun_opening_a_sentence_is_not_a_name() -> None:
    assert found("Invoices are sent on the first business day of each month.") == []
    assert found("Refunds are processed within 5 business days.") == []


def test_two_names_joined_by_and_are_two_entities() -> None:
    assert found("Marco and Ana are married.") == [("Marco", PERSON), ("Ana", PERSON)]


def test_languages_and_nationalities_alone_are_not_entities() -> None:
    assert found("Rafael speaks Portuguese and Spanish.") == [("Rafael", PERSON)]
    assert found("She flew American Airlines to Lisbon.") == [("American Airlines", ORGANIZATION), ("Lisbon", PLACE)]
