"""The write funnel decides by subject: many records of one kind in one store (customer accounts,
tickets, hosts) keep their own facts, and an update retires exactly the record it replaces.

Real default embedder and PostgreSQL: the cosines between these near-identical sentences are what
used to retire other subjects' records.
"""

from __future__ import annotations

from typing import Any

import pytest

from memory_engine.models import Memory, MemoryAssertion
from memory_engine.services.memories import memory_write

pytestmark = pytest.mark.django_db

MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]


def write(store: Any, text: str, **kwargs: Any) -> Any:
    return memory_write(store=store, content=text, principal="test", **kwargs)


def live_texts(store: Any) -> set[str]:
    return set(Memory.objects.filter(store=store, invalidated_at__isnull=True).values_list("content__text", flat=True))


def test_another_accounts_record_is_never_retired(store: Any) -> None:
    acme5 = write(store, "Customer account ACME-5 renews its contract every March.")
    result = write(store, "Customer account ACME-19 renews its contract every September.")
    assert result.action == "created"
    assert result.memory.subjects == ["id:acme-19"]
    acme5.memory.refresh_from_db()
    assert acme5.memory.invalidated_at is None
    if result.similarity is not None and result.similarity >= 0.9:  # similar enough to have retired it
        assert result.decision_reason == "subject_mismatch"
        assert result.assertion.details["subject_mismatch"]["memory_id"] == acme5.memory.pk


def test_twenty_similar_records_stay_and_an_update_retires_exactly_its_own(store: Any) -> None:
    records = {n: write(store, f"Customer account ACME-{n} renews its contract every {MONTHS[n % 12]}.").memory
               for n in range(1, 21)}
    assert len(live_texts(store)) == 20
    update = write(store, "Customer account ACME-7 now renews its contract every November.")
    assert update.action == "superseded"
    assert update.replaced is not None and update.replaced.pk == records[7].pk
    assert update.assertion.details["subject"]["shared"] == ["id:acme-7"]
    live = live_texts(store)
    assert len(live) == 20
    assert "Customer account ACME-7 renews its contract every August." not in live
    assert "Customer account ACME-7 now renews its contract every November." in live


def test_an_update_whose_nearest_neighbour_is_another_subject(store: Any) -> None:
    own = write(store, "Ticket OPS-512 is assigned to Ingrid Larsen.").memory
    other = write(store, "Ticket OPS-518 is assigned to Priya Raman.").memory
    result = write(store, "Ticket OPS-512 is now assigned to Priya Raman.")
    # the nearest text is OPS-518's (same assignee); the update is OPS-512's
    assert result.potential_duplicates == [] or result.potential_duplicates[0]["memory_id"] != own.pk
    assert result.action == "superseded" and result.replaced is not None and result.replaced.pk == own.pk
    assert result.decision_reason in ("subject_update", "value_change")
    other.refresh_from_db()
    assert other.invalidated_at is None


def test_another_attribute_of_one_subject_stays_beside_it(store: Any) -> None:
    write(store, "Host db-prod-3 runs PostgreSQL 16.")
    result = write(store, "Host db-prod-3 has 64 GB of RAM.")
    assert result.action == "created" and result.decision_reason == "new_attribute"
    update = write(store, "db-prod-3 was upgraded to PostgreSQL 18.")
    assert update.action == "superseded" and update.replaced.content.text == "Host db-prod-3 runs PostgreSQL 16."
    assert live_texts(store) == {"Host db-prod-3 has 64 GB of RAM.", "db-prod-3 was upgraded to PostgreSQL 18."}


def test_a_restatement_about_the_same_subject_is_still_a_duplicate(store: Any) -> None:
    first = write(store, "Invoice INV-2231 is due on 14 March 2026.")
    again = write(store, "Invoice INV-2231 is due on 14 March 2026")
    assert again.action == "skipped" and again.memory.pk == first.memory.pk


def test_a_write_without_subjects_keeps_the_cosine_rules(store: Any) -> None:
    write(store, "The staging database runs PostgreSQL 15.")
    result = write(store, "The staging database runs PostgreSQL 16.")
    assert result.action == "superseded"  # no identifier or name: today's cosine rules and gates


def test_subjects_are_recorded_on_the_memory_and_in_the_ledger(store: Any) -> None:
    result = write(store, "Dana Whitfield works in the Finance department.", about={"kind": "employee",
                                                                                  "key": "dana"})
    assert result.memory.subjects == ["about:employee/dana", "name:dana whitfield"]
    assertion = MemoryAssertion.objects.get(pk=result.assertion.pk)
    assert assertion.details["subjects"] == ["about:employee/dana", "name:dana whitfield"]
    stored = Memory.objects.get(pk=result.memory.pk)
    assert stored.subjects == result.memory.subjects


def test_a_value_named_by_two_records_is_not_their_subject(store: Any) -> None:
    write(store, "Flight KL1002 is operated with an A330-300.")
    result = write(store, "Flight QR 70 is operated with an A330-300.")
    assert result.memory.subjects == ["id:qr70", "~id:a330-300"]
    assert len(live_texts(store)) == 2


def test_the_api_answers_the_subjects(client: Any, store: Any) -> None:
    response = client.post("/api/v1/memories", {"memory_store_id": store.pk,
                                                 "content": "SKU-B417 is priced at $24.99."}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["subjects"] == ["id:sku-b417"]


def test_the_subjects_records_are_never_read_through_the_hnsw_index(store: Any) -> None:
    """The memories about the write's subject are found whatever other stores hold: read through
    the HNSW index they could be crowded out by other stores' nearer rows (a large table's index,
    rolled-back and retired rows included, can hold more of them than one scan visits), and the
    update would then retire nothing. However cheap the planner finds the index (sorting disabled
    here, as it can look in a large analysed table), the statement does not use it."""
    from django.db import connection

    from tests.plans import statements_with

    held = write(store, "Northwind Traders' support contract renews on 1 March 2027.").memory
    with statements_with("'subject'") as captured:
        result = write(store, "Northwind Traders' support contract renews on 1 June 2027.")
    assert result.replaced is not None and result.replaced.pk == held.pk
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute("EXPLAIN " + captured[0][0], captured[0][1])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "me_content_embedding_hnsw" not in plan, plan
