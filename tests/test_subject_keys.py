"""memory_engine.mentions.subject_keys (who or what a fact is about) and .attributes (whether two
facts about one subject state the same attribute): rules only, no database."""

from __future__ import annotations

import pytest

from memory_engine.mentions.attributes import same_attribute, value_types
from memory_engine.mentions.subject_keys import primary, shares_subject, sharing_keys, subject_keys


@pytest.mark.parametrize(("text", "keys"), [
    ("Customer account ACME-19 renews its contract every September.", ["id:acme-19"]),
    ("Support ticket #48213 is assigned to Maya Lindqvist.", ["id:#48213"]),
    ("db-prod-3 was upgraded to PostgreSQL 18.", ["id:db-prod-3"]),
    ("SKU-B417 is priced at $24.99.", ["id:sku-b417"]),
    ("The status of INV-2231 changed to paid.", ["id:inv-2231"]),
    ("Flight LH 454 departs at 10:35.", ["id:lh454"]),
    ("Flight AF1180 from Paris lands at 9:40.", ["id:af1180", "~name:paris"]),
    ("Shipment 1Z999AA10123456784 is expected on 20 March.", ["id:1z999aa10123456784"]),
    ("Order 88123 ships from Leeds.", ["id:#88123"]),
    ("dana@example.com is on the Pro plan.", ["id:dana@example.com"]),
    ("The repository https://github.com/acme/api is archived.", ["id:github.com/acme/api"]),
    ("Feature flag `new-checkout-flow` is rolled out to 25% of users.", ["id:new-checkout-flow"]),
    ("Dana Whitfield works in the Berlin office.", ["name:dana whitfield"]),
    ("Our payment terms with Northwind Traders are net 30.", ["name:northwind traders"]),
    ("The Lisbon office has 45 desks.", ["name:lisbon"]),
    ("Marco: I moved to Porto last week", ["name:marco"]),
    ("Priya now handles ticket OPS-512.", ["name:priya", "~id:ops-512"]),
    ("We restocked BIN-C-12 with AAA batteries.", ["id:bin-c-12"]),
])
def test_subject_keys(text: str, keys: list[str]) -> None:
    assert subject_keys(text) == keys


@pytest.mark.parametrize("text", [
    "A man is playing a guitar.",
    "The office is in Lisbon.",  # a place named as a value
    "We meet in Q3 2026 for a 3-day workshop.",
    "Customer accounts renew every March.",
])
def test_no_subject(text: str) -> None:
    assert primary(subject_keys(text)) == set()


def test_the_about_key_is_a_subject() -> None:
    assert subject_keys("Prefers email.", about=("preference", "Contact Channel")) == [
        "about:preference/contact channel"]


def test_sharing() -> None:
    record = subject_keys("Ticket OPS-512 is assigned to Dana.")
    assert shares_subject(subject_keys("Priya now handles ticket OPS-512."), record)
    assert not shares_subject(subject_keys("Ticket OPS-518 is assigned to Dana."), record)
    # an aircraft type two flights are operated with is no subject of either
    assert not shares_subject(subject_keys("Flight QR 70 is operated with an A330-300."),
                              subject_keys("Flight KL1002 is operated with an A330-300."))
    assert "~id:ops-512" in sharing_keys(record)


@pytest.mark.parametrize(("old", "new"), [
    ("Host db-prod-3 runs PostgreSQL 16.", "db-prod-3 was upgraded to PostgreSQL 18."),
    ("SKU-C220 is priced at $8.99.", "SKU-C220 now costs $9.49."),
    ("Invoice INV-2247 is marked as overdue.", "Invoice INV-2247 has been paid in full."),
    ("Ticket #48230 is assigned to Aiko Tanaka.", "Jonas Weber took over ticket #48230."),
    ("Dana Whitfield works in the Finance department.", "Dana Whitfield moved to the Legal department."),
    ("The Lisbon office has 45 desks.", "The Lisbon office now has 60 desks."),
    ("Customer account ACME-19 renews its contract every December.", "ACME-19 moved its renewal to October."),
])
def test_same_attribute(old: str, new: str) -> None:
    assert same_attribute(old, new)


@pytest.mark.parametrize(("old", "new"), [
    ("Host db-prod-3 runs PostgreSQL 16.", "Host db-prod-3 has 64 GB of RAM."),
    ("The endpoint https://api.acme.io/v2/refunds allows 30 requests per minute.",
     "The endpoint https://api.acme.io/v2/refunds times out after 30 seconds."),
    ("Invoice INV-2270 is marked as overdue.", "Invoice INV-2270 is due on 14 March 2026."),
    ("Customer account ACME-5 renews its contract every March.",
     "Customer account ACME-5's account manager is Dana Whitfield."),
    ("Patient Jonas Frei has an appointment on 26 June at 15:00.",
     "Patient Jonas Frei's appointment is with Dr. Tanaka."),
])
def test_another_attribute(old: str, new: str) -> None:
    assert not same_attribute(old, new)


def test_value_types() -> None:
    assert value_types("Patient Jonas Frei has an appointment on 26 June at 15:00.") == {"date", "time"}
    assert value_types("SKU-C220 now costs $9.49.") == {"money"}
