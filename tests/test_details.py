"""Changed-detail extraction (memory_engine.details): pure functions, no database."""

from __future__ import annotations

import json

import pytest

from memory_engine.details import (
    DETAIL_KINDS,
    DetailChange,
    Details,
    changed_details,
    compare_details,
    extract_details,
    normalize_text,
)

pytestmark: list = []


def kinds(old: str, new: str) -> set[str]:
    return {change.kind for change in changed_details(old, new)}


# --------------------------------------------------------------------------- #
# Numbers and numerals
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PostgreSQL 15 is installed", {"15"}),
        ("PostgreSQL 15.0 is installed", {"15"}),
        ("We store 1,200 rows", {"1200"}),
        ("We have fifteen servers", {"15"}),
        ("We have twenty-one servers", {"21"}),
        ("We have twenty one servers", {"21"}),
        ("We need a hundred licences", {"100"}),
        ("The table has three thousand rows", {"3000"}),
        ("She owns two hundred and fifty books", {"250"}),
        ("The city has 1.2 million people", {"1200000"}),
        ("The third attempt worked", {"3"}),
        ("The 3rd attempt worked", {"3"}),
        ("He came twenty-first", {"21"}),
        ("The machines came in a dozen boxes", {"12"}),
        ("Pick one card", {"1"}),
        ("It ran twice", {"2"}),
    ],
)
def test_numbers_are_normalised(text: str, expected: set[str]) -> None:
    assert extract_details(text).numbers == expected


@pytest.mark.parametrize(
    "text",
    [
        "She is the one who knows",
        "One of the servers is slow",
        "We use a third-party provider",
        "It was a one-off fix",
        "Wait a second",
        "Someone often lists tons of stones",
    ],
)
def test_numeral_words_that_are_not_counts(text: str) -> None:
    assert extract_details(text).numbers == frozenset()


def test_number_inside_identifier_is_not_a_number() -> None:
    details = extract_details("The host db-stage-2 serves api_v2 on ec2")
    assert details.numbers == frozenset()
    assert {"db-stage-2", "api_v2", "ec2"} <= details.names


def test_fractions_and_negative_numbers() -> None:
    assert extract_details("Support is 24/7").numbers == {"24/7"}
    assert extract_details("The balance is -40").numbers == {"-40"}
    assert extract_details("Pages 3-5 are missing").numbers == {"3", "5"}


# --------------------------------------------------------------------------- #
# Dates and times
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize(
    "text",
    [
        "The release is on March 3, 2024",
        "The release is on 3 March 2024",
        "The release is on the 3rd of March, 2024",
        "The release is on 2024-03-03",
        "The release is on 03/03/2024",
        "The release is on the third of March 2024",
    ],
)
def test_date_formats_agree(text: str) -> None:
    assert extract_details(text).dates == {"2024-03-03"}


def test_dates_without_year_months_weekdays_and_years() -> None:
    assert extract_details("Due March 3").dates == {"--03-03"}
    assert extract_details("Due in March").dates == {"--03"}
    assert extract_details("Due in March 2024").dates == {"2024-03"}
    assert extract_details("Standup is on Tuesdays").dates == {"tuesday"}
    assert extract_details("Alice moved in 2021").dates == {"2021"}
    assert extract_details("Music of the 1990s").dates == {"1990s"}
    assert extract_details("The review is next week").dates == {"next week"}


def test_may_the_verb_is_not_a_month() -> None:
    assert extract_details("We may ship it later").dates == frozenset()
    assert extract_details("May I ask a question?").dates == frozenset()
    assert extract_details("We ship in May").dates == {"--05"}


def test_ambiguous_numeric_date_matches_either_reading() -> None:
    assert extract_details("Due 04/03/2024").dates == {"2024-03-04|2024-04-03"}
    assert changed_details("Due 04/03/2024", "Due 4 March 2024") == []
    assert changed_details("Due 04/03/2024", "Due April 3, 2024") == []
    assert kinds("Due 04/03/2024", "Due 5 March 2024") == {"date"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Standup is at 9am", {"09:00"}),
        ("Standup is at 9 a.m.", {"09:00"}),
        ("Standup is at 09:00", {"09:00"}),
        ("Dinner is at 9:30 pm", {"21:30"}),
        ("Dinner is at 9.30pm", {"21:30"}),
        ("The call is at 15:00", {"15:00"}),
        ("The call is at 3 in the afternoon", {"15:00"}),
        ("Lunch is at noon", {"12:00"}),
        ("Lunch is at 12 noon", {"12:00"}),
        ("The job runs at midnight", {"00:00"}),
        ("The job runs at 12am", {"00:00"}),
        ("Office hours are 9am-5pm", {"09:00", "17:00"}),
        ("She runs in the morning", {"morning"}),
        ("Dinner is at half past seven", {"07:30"}),
        ("The show starts at a quarter to nine pm", {"20:45"}),
    ],
)
def test_times_are_24h(text: str, expected: set[str]) -> None:
    assert extract_details(text).times == expected


# --------------------------------------------------------------------------- #
# Quantities, rates, versions, currency
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The trial lasts 5 days", {"5 day"}),
        ("The trial lasts five days", {"5 day"}),
        ("It is a 5-day trial", {"5 day"}),
        ("The trial lasts 2 weeks", {"2 week"}),
        ("The trial lasts 14 days", {"2 week"}),
        ("The build takes 90 minutes", {"90 minute"}),
        ("The build takes 1.5 hours", {"90 minute"}),
        ("The timeout is 30s", {"30 second"}),
        ("The disk holds 10 GB", {"10 GB"}),
        ("The disk holds 10GB", {"10 GB"}),
        ("The disk holds ten gigabytes", {"10 GB"}),
        ("Usage is 5%", {"5 %"}),
        ("Usage is five percent", {"5 %"}),
        ("She runs 3 km", {"3 km"}),
        ("It was -5°C outside", {"-5 °C"}),
        ("Shipping takes 3-5 days", {"3 day", "5 day"}),
    ],
)
def test_quantities_keep_their_unit(text: str, expected: set[str]) -> None:
    assert extract_details(text).quantities == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("We deploy weekly", {"per week"}),
        ("We deploy every week", {"per week"}),
        ("We deploy once a week", {"per week"}),
        ("We deploy every 2 weeks", {"per 2 week"}),
        ("We deploy every other week", {"per 2 week"}),
        ("We deploy biweekly", {"per 2 week"}),
        ("Parking costs $5 per hour", {"per hour"}),
        ("She works 40 hours a week", {"40 hour", "per week"}),
        ("The trial lasts a week", {"1 week"}),
    ],
)
def test_rates(text: str, expected: set[str]) -> None:
    assert extract_details(text).quantities == expected


def test_versions() -> None:
    assert extract_details("Upgrade to v2.3.1").versions == {"2.3.1"}
    assert extract_details("Upgrade to 2.3.1").versions == {"2.3.1"}
    assert extract_details("Install version 16").versions == {"16"}
    assert extract_details("Pin 1.4.0-rc.1").versions == {"1.4.0-rc.1"}
    assert extract_details("Python 3.10 here").numbers == {"3.10"}  # not 3.1
    assert changed_details("PostgreSQL version 15", "PostgreSQL 15") == []
    assert kinds("Upgrade to v2.3.1", "Upgrade to v2.4.0") == {"version"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Rent is $1,200", {"1200 USD"}),
        ("Rent is 1200 USD", {"1200 USD"}),
        ("Rent is USD 1,200.00", {"1200 USD"}),
        ("Rent is 1200 dollars", {"1200 USD"}),
        ("Lunch was €50", {"50 EUR"}),
        ("Lunch was 50€", {"50 EUR"}),
        ("Lunch was 50 euros", {"50 EUR"}),
        ("Lunch was fifty euros", {"50 EUR"}),
        ("A ticket is £25", {"25 GBP"}),
        ("Gum costs 50 cents", {"0.5 USD"}),
        ("The budget is $1.5 million", {"1500000 USD"}),
        ("The budget is $50k", {"50000 USD"}),
        ("Rooms cost $100-150", {"100 USD", "150 USD"}),
    ],
)
def test_currency(text: str, expected: set[str]) -> None:
    assert extract_details(text).currencies == expected


# --------------------------------------------------------------------------- #
# Negation
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize(
    "text",
    [
        "Bob is not vegetarian",
        "Bob isn't vegetarian",
        "Bob isn’t vegetarian",
        "Bob never eats meat",
        "Bob no longer eats meat",
        "Bob cannot eat meat",
        "Bob can't eat meat",
        "Nobody eats meat",
        "Nothing is left",
        "None of them came",
        "Neither Bob nor Ann came",
        "Bob lives without a car",
        "Bob doesnt eat meat",
    ],
)
def test_negation_cues(text: str) -> None:
    assert extract_details(text).negated is True


def test_no_negation() -> None:
    assert extract_details("Bob is vegetarian").negated is False
    assert extract_details("Ticket No. 5 is open").negated is False
    assert extract_details("Bob knows the noodle shop").negated is False


# --------------------------------------------------------------------------- #
# Names and identifiers
# --------------------------------------------------------------------------- #


def test_names_mid_sentence_and_at_sentence_start() -> None:
    details = extract_details("Maria told Bob that PostgreSQL runs on db-stage-2.")
    assert details.names == {"maria", "bob", "postgresql", "db-stage-2"}


def test_common_sentence_starters_and_pronoun_i_are_not_names() -> None:
    details = extract_details("The team met. We agreed. I will call. After lunch, They left.")
    assert details.names == frozenset()


def test_possessives_acronyms_domains_and_honorifics() -> None:
    details = extract_details("Anna's manager at the U.S. office is Dr. Smith; see example.com and AWS.")
    assert {"anna", "us", "smith", "example.com", "aws"} <= details.names
    assert "anna's" not in details.names
    assert "dr" not in details.names


def test_months_and_weekdays_are_not_names() -> None:
    assert extract_details("We meet on Monday in June").names == frozenset()


def test_urls_and_emails_are_identifiers() -> None:
    details = extract_details("Docs at https://docs.example.com/guide, mail ops@example.com.")
    assert {"docs.example.com/guide", "ops@example.com"} <= details.names


def test_lower_case_compounds_are_identifiers_but_spacing_is_wording() -> None:
    assert extract_details("We deploy to db-stage").names == {"db-stage"}
    assert kinds("Deploy to db-stage", "Deploy to db-prod") == {"name"}
    assert changed_details("The wiki is read-only", "The wiki is read only") == []
    assert changed_details("It is a non-profit", "It is a nonprofit") == []


def test_same_name_in_different_case_is_no_change() -> None:
    assert changed_details("PostgreSQL runs on the host", "postgresql runs on the host") == []
    assert changed_details("Maria leads the team", "The team is led by Maria") == []


# --------------------------------------------------------------------------- #
# Unicode and normalisation
# --------------------------------------------------------------------------- #


def test_unicode_is_normalised() -> None:
    assert normalize_text("a\u00a0b\u200bc") == "a bc"
    assert extract_details("Ｐｏｓｔｇｒｅｓ １５").numbers == {"15"}
    assert extract_details("Room \u0661\u0665").numbers == {"15"}  # Arabic-Indic digits
    assert extract_details("It\u2019s \u201cfine\u201d").names == frozenset()
    assert extract_details("Costs\u00a0$1,200").currencies == {"1200 USD"}
    assert changed_details("Bob isn\u2019t here", "Bob isn't here") == []
    assert changed_details("The range is 3\u20135 days", "The range is 3-5 days") == []
    assert extract_details("Zoë met Łukasz in München").names == {"zoë", "łukasz", "münchen"}


def test_mask_character_in_input_is_harmless() -> None:
    assert extract_details("odd \x1f input 7").numbers == {"7"}


# --------------------------------------------------------------------------- #
# Long texts
# --------------------------------------------------------------------------- #


def test_32kb_text_keeps_details_and_spots_one_change() -> None:
    filler = (
        "The team reviewed the backlog and agreed to keep the current process for now. "
        "Nobody raised concerns about the approach that was discussed earlier. "
    )
    body = (filler * 250)[:16_000]
    old = body + " The staging database runs PostgreSQL 15 on db-stage-2 since March 3, 2024. " + body
    new = old.replace("PostgreSQL 15", "PostgreSQL 16")
    assert len(old) > 32_000
    details = extract_details(old)
    assert details.numbers == {"15"}
    assert details.dates == {"2024-03-03"}
    assert {"postgresql", "db-stage-2"} <= details.names
    assert details.negated is True
    assert [c.as_dict() for c in changed_details(old, new)] == [
        {"kind": "number", "old": ["15"], "new": ["16"]}
    ]


@pytest.mark.parametrize(
    "text",
    [
        "1" * 32_768,
        "1," * 16_384,
        "a-" * 16_384,
        "$1 " * 10_922,
        "one " * 8_192,
        "a.b+c-" * 5_461,
        "9:" * 16_384,
        "x" * 32_768 + "@",
    ],
)
def test_pathological_inputs_complete(text: str) -> None:
    # Every pattern is anchored at token starts and free of nested quantifiers;
    # these inputs would hang a backtracking-prone pattern.
    assert isinstance(extract_details(text), Details)


# --------------------------------------------------------------------------- #
# Restatements and updates
# --------------------------------------------------------------------------- #

RESTATEMENTS = [
    ("The customer prefers email contact", "The customer prefers contact by email"),
    ("Alice moved to Berlin in 2021", "In 2021 Alice moved to Berlin"),
    ("Bob is not vegetarian", "Bob isn't vegetarian"),
    ("The meeting is on Tuesday at 3pm", "The meeting is at 15:00 on Tuesday"),
    ("We have three servers", "We have 3 servers"),
    (
        "The staging database runs PostgreSQL 15 on a host called db-stage-2.",
        "On a host called db-stage-2, the staging database runs PostgreSQL 15.",
    ),
    ("Rent is $1,200 a month", "Monthly rent is $1,200"),
    ("Rent is $1,200 a month", "The rent comes to 1200 USD per month"),
    ("Deploys happen every Tuesday", "Every Tuesday we deploy"),
    ("Currently, Bob lives in Paris", "Bob lives in Paris"),
    ("Anna's flight leaves at 9:30 am on March 3", "On 3 March, Anna's flight departs at 09:30"),
    ("The trial lasts fourteen days", "The trial lasts 2 weeks"),
    ("Backups are kept for 30 days", "We keep backups for thirty days"),
    ("Sam does not drink coffee", "Sam doesn't drink coffee"),
    ("Sam never drinks coffee", "Coffee is something Sam never drinks"),
    ("The API rate limit is 1,000 requests per minute", "The rate limit of the API is 1000 requests each minute"),
    ("Our office is in the U.S.", "Our office is in the US"),
    ("Tom is thirty years old", "Tom is 30"),
    ("The budget is €50,000", "The budget is 50,000 euros"),
    ("Standup happens daily at 9am", "Every day at 9 a.m. there is a standup"),
    ("The team uses Slack for chat", "For chat, the team uses slack"),
    ("The release is planned for 2024-06-01", "The release is planned for June 1, 2024"),
    ("Disk usage is at 85%", "Disk usage is at 85 percent"),
    ("The cluster has 64 GB of RAM", "The cluster has 64GB RAM"),
    ("Jean-Luc manages the Paris office", "The Paris office is managed by Jean-Luc"),
    ("Ling works remotely twice a week", "Ling works remotely two times a week"),
    ("We have one production database", "We have a single production database"),
    ("The contract ends on the 31st of December", "The contract ends on December 31st"),
    ("Karen’s office is on the 5th floor", "Karen's office is on the fifth floor"),
    ("Lunch is at noon", "Lunch is at 12:00"),
    ("The invoice of $99.00 was paid", "The $99 invoice was paid"),
    ("She cannot attend on Mondays", "She can't attend on Monday"),
    ("Nobody on the team uses Windows", "No one on the team uses Windows"),
    ("THE SERVER IS DOWN", "The server is down"),
    ("The   wiki,  as   always, is   read-only.", "the wiki, as always, is read-only"),
    ("Logs are retained for one year.", "Logs are kept for a year."),
    ("Parking costs $5 per hour.", "Parking is $5 an hour."),
    ("Sprint planning is every other Monday.", "Every second Monday we do sprint planning."),
    ("Kofi runs 5 km every morning.", "Every morning Kofi runs five kilometres."),
    ("The lease started on 1 September 2023.", "The lease began September 1st, 2023."),
    ("Jake's standup is at 10.", "Jake has standup at 10 o'clock."),
    ("The bus takes 30 minutes.", "The bus takes half an hour."),
    ("Temperature should stay below 25 degrees.", "The temperature should stay under 25°C."),
    ("E-mail is the preferred channel.", "Email is the preferred channel."),
    ("Dr. Patel is her doctor.", "Her doctor is Doctor Patel."),
    ("We're using Postgres 16.", "We use PostgreSQL 16."),
    ("The gateway allows 500 requests per minute.", "The gateway allows 500 requests a minute."),
    ("Dinner is at 7:30.", "Dinner is at half past seven."),
    ("Version 3 of the API is deprecated.", "API v3 is deprecated."),
]

UPDATES = [
    (
        "The staging database runs PostgreSQL 15 on a host called db-stage-2.",
        "The staging database runs PostgreSQL 16 on a host called db-stage-2.",
        "number",
    ),
    ("Bob is vegetarian", "Bob is not vegetarian", "negation"),
    ("Bob isn't vegetarian", "Bob is vegetarian", "negation"),
    ("Rent is $1,200 a month", "Rent is $1,350 a month", "currency"),
    ("We have three servers", "We have four servers", "number"),
    ("Maria leads the team", "Sofia leads the team", "name"),
    ("The meeting is on Tuesday at 3pm", "The meeting is on Wednesday at 3pm", "date"),
    ("The meeting is on Tuesday at 3pm", "The meeting is on Tuesday at 4pm", "time"),
    ("The trial lasts 14 days", "The trial lasts 14 weeks", "quantity"),
    ("Backups are kept for 30 days", "Backups are kept for 60 days", "quantity"),
    ("The budget is €50,000", "The budget is $50,000", "currency"),
    ("Alice moved to Berlin in 2021", "Alice moved to Berlin in 2022", "date"),
    ("Alice moved to Berlin in 2021", "Alice moved to Munich in 2021", "name"),
    ("Upgrade to v2.3.1", "Upgrade to v2.4.0", "version"),
    ("The host is db-stage-2", "The host is db-stage-3", "name"),
    ("The release is planned for June 1, 2024", "The release is planned for June 8, 2024", "date"),
    ("Disk usage is at 85%", "Disk usage is at 95%", "quantity"),
    ("The cluster has 64 GB of RAM", "The cluster has 64 TB of RAM", "quantity"),
    ("Sam drinks coffee", "Sam never drinks coffee", "negation"),
    ("Ling works remotely twice a week", "Ling works remotely three times a week", "number"),
    ("Standup is daily", "Standup is weekly", "quantity"),
    ("Use Python 3.11", "Use Python 3.12", "number"),
    ("The office is on the 5th floor", "The office is on the sixth floor", "number"),
    ("The job runs at midnight", "The job runs at 2am", "time"),
    ("Ahmed's birthday is on 12 May", "Ahmed's birthday is on 12 June", "date"),
    ("The API is served from api.example.com", "The API is served from api.example.org", "name"),
    ("The contract ends in March", "The contract ends in April", "date"),
    ("She prefers the morning shift", "She prefers the evening shift", "time"),
    ("Tom is 30 years old", "Tom is 31 years old", "quantity"),
    ("The car weighs 1,500 kg", "The car weighs 1,500 lb", "quantity"),
    ("Tickets cost £25 each", "Tickets cost €25 each", "currency"),
    ("He's been at Google since 2018", "He's been at Meta since 2018", "name"),
    ("Our cluster runs in eu-west-1", "Our cluster runs in us-east-1", "name"),
    ("The server room is kept at 18°C", "The server room is kept at 21°C", "quantity"),
    ("Kofi runs 5 km every morning", "Kofi runs 5 miles every morning", "quantity"),
    ("The wifi password changes every 3 months", "The wifi password changes every 6 months", "quantity"),
    ("The build takes about 12 minutes", "The build takes about 12 seconds", "quantity"),
    ("Grace takes the 7:15 train", "Grace takes the 7:45 train", "time"),
    ("The VPN is required", "The VPN is no longer required", "negation"),
    ("The office opens on Monday", "The office opens on Monday, March 4", "date"),
    ("Average latency is 120 ms.", "Average latency is 120 s.", "quantity"),
    ("Backups run at 02:00 UTC.", "Backups run at 02:00 CET.", "name"),
    ("The sprint is two weeks long.", "The sprint is one week long.", "quantity"),
]


@pytest.mark.parametrize(("old", "new"), RESTATEMENTS)
def test_restatements_change_nothing(old: str, new: str) -> None:
    assert changed_details(old, new) == []
    assert changed_details(new, old) == []


@pytest.mark.parametrize(("old", "new", "kind"), UPDATES)
def test_updates_are_detected(old: str, new: str, kind: str) -> None:
    changes = changed_details(old, new)
    assert kind in {change.kind for change in changes}
    reverse = changed_details(new, old)
    assert kind in {change.kind for change in reverse}


def test_enough_pairs() -> None:
    assert len(RESTATEMENTS) >= 25
    assert len(UPDATES) >= 25


# --------------------------------------------------------------------------- #
# Result shape
# --------------------------------------------------------------------------- #


def test_change_values_and_ledger_dict() -> None:
    changes = changed_details("Rent is $1,200 a month", "Rent is $1,350 a week")
    assert changes == [
        DetailChange(kind="quantity", old=("per month",), new=("per week",)),
        DetailChange(kind="currency", old=("1200 USD",), new=("1350 USD",)),
    ]
    payload = [change.as_dict() for change in changes]
    assert json.loads(json.dumps(payload)) == payload
    assert payload[1] == {"kind": "currency", "old": ["1200 USD"], "new": ["1350 USD"]}


def test_negation_change_shape() -> None:
    (change,) = changed_details("Bob is vegetarian", "Bob is not vegetarian")
    assert change == DetailChange(kind="negation", old=("affirmative",), new=("negated",))


def test_added_and_removed_details_are_changes() -> None:
    assert kinds("The meeting is on Tuesday", "The meeting is on Tuesday at 3pm") == {"time"}
    assert kinds("The meeting is on Tuesday at 3pm", "The meeting is on Tuesday") == {"time"}


def test_identical_and_empty_texts() -> None:
    assert changed_details("", "") == []
    assert changed_details("Same text 5", "Same text 5") == []
    assert extract_details("").is_empty
    assert not extract_details("Bob is not here").is_empty


def test_compare_details_matches_changed_details_and_kinds_are_known() -> None:
    old, new = "Rent is $1,200 since 2021", "Rent is $1,300 since 2022"
    assert compare_details(extract_details(old), extract_details(new)) == changed_details(old, new)
    assert {c.kind for c in changed_details(old, new)} <= set(DETAIL_KINDS)


def test_details_are_frozen_and_serialisable() -> None:
    details = extract_details("Maria pays $5 on March 3 at 9am for 2 GB of v1.2.3, not 7")
    with pytest.raises(AttributeError):
        details.numbers = frozenset()  # type: ignore[misc]
    data = details.as_dict()
    assert json.loads(json.dumps(data)) == data
    assert data == {
        "numbers": ["7"],
        "dates": ["--03-03"],
        "times": ["09:00"],
        "quantities": ["2 GB"],
        "currencies": ["5 USD"],
        "versions": ["1.2.3"],
        "names": ["maria"],
        "negated": True,
    }


@pytest.mark.parametrize(("old", "new", "changed"), [
    ("Mohammed prefers trains over planes for short trips.", "Mohammed prefers planes over trains for short trips.",
     (("trains over planes",), ("planes over trains",))),
    ("Ana drinks tea rather than coffee.", "Ana drinks coffee rather than tea.",
     (("tea rather than coffee",), ("coffee rather than tea",))),
    ("The night bus goes from Vienna to Prague.", "The night bus goes from Prague to Vienna.",
     (("from vienna to prague",), ("from prague to vienna",))),
])
def test_two_things_set_against_each_other_in_reverse_order_are_a_change(
        old: str, new: str, changed: tuple[tuple[str, ...], tuple[str, ...]]) -> None:
    assert [(c.kind, c.old, c.new) for c in changed_details(old, new)] == [("order", *changed)]


@pytest.mark.parametrize(("old", "new"), [
    ("Mohammed prefers trains over planes for short trips.",
     "For short trips, Mohammed would rather take the train than fly."),
    ("The train from Vienna to Prague takes about four hours.",
     "It takes about four hours by train from Vienna to Prague."),
    ("Ana drinks tea rather than coffee.", "Rather than coffee, Ana drinks tea."),
])
def test_an_order_kept_or_reworded_is_no_change(old: str, new: str) -> None:
    assert changed_details(old, new) == []
