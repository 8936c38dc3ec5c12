"""Consent categories through the write funnel (docs/memory.md, *Consent categories*): every door
that writes (POST /memories, the batch, the write_memory tool, memory_engine_import) takes a claim
that the classifier raises and never lowers; a skip or a supersede keeps the more sensitive
category; the category's expiry caps the memory's; the assertion says why, never with the text.
Default embedder (MiniLM), real PostgreSQL."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone

from memory_engine.consent_categories import ConsentCategory
from memory_engine.models import Memory, MemoryAssertion
from memory_engine.models.memories import Tier
from memory_engine.services.memories import memory_write, memory_write_batch
from tests.factories import AgentFactory, MemoryStoreFactory

pytestmark = pytest.mark.django_db

C, P = ConsentCategory.CONTEXT, ConsentCategory.PREFERENCES
L, ID, HEALTH = ConsentCategory.LOCATION, ConsentCategory.IDENTITY, ConsentCategory.HEALTH
IBAN_TEXT = "The customer's refunds go to IBAN GB82 WEST 1234 5698 7654 32."


def details(memory_id: str) -> dict[str, Any]:
    return MemoryAssertion.objects.filter(memory_id=memory_id).latest("created_at").details["consent"]


def test_the_api_takes_a_claim_and_the_pii_pass_raises_it(client: Any, project: Any) -> None:
    store = MemoryStoreFactory(project=project)
    response = client.post("/api/v1/memories", {"memory_store_id": store.pk, "content": IBAN_TEXT,
                                                "consent_category": P}, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["consent_category"] == ID
    assert Memory.objects.get(pk=body["id"]).consent_category == ID
    why = details(body["id"])
    assert why["category"] == ID and why["claimed"] == P
    assert {"pass": "pii", "pattern": "iban"} in [{k: f[k] for k in ("pass", "pattern")} for f in why["findings"]]
    assert "GB82" not in json.dumps(why) and "5698" not in json.dumps(why)  # names the pattern, never the text
    listed = client.get("/api/v1/memories", {"memory_store_id": store.pk, "consent_category": ID}).json()
    assert [m["id"] for m in listed["results"]] == [body["id"]]
    assert client.get("/api/v1/memories", {"memory_store_id": store.pk,
                                           "consent_category": C}).json()["results"] == []


def test_a_claim_is_never_lowered_and_an_unknown_one_is_refused(client: Any, project: Any) -> None:
    store = MemoryStoreFactory(project=project)
    kept = client.post("/api/v1/memories", {"memory_store_id": store.pk, "content": "The team meets on Tuesdays.",
                                            "consent_category": HEALTH}, format="json")
    assert kept.status_code == 201 and kept.json()["consent_category"] == HEALTH
    plain = client.post("/api/v1/memories", {"memory_store_id": store.pk,
                                             "content": "Invoices are sent on the first working day."},
                        format="json")
    assert plain.status_code == 201 and plain.json()["consent_category"] == C
    for bad in ("memory:secret", "health", 3, ""):
        refused = client.post("/api/v1/memories", {"memory_store_id": store.pk, "content": "The depot opens at six.",
                                                   "consent_category": bad}, format="json")
        assert refused.status_code == 400, bad
        assert refused.json()["code"] == "VALIDATION_ERROR"
    assert Memory.objects.filter(store=store).count() == 2
    with pytest.raises(Exception) as caught:  # the service checks it too, for callers without the API
        memory_write(store=store, content="The depot opens at six.", principal="t", consent_category="memory:x")
    assert getattr(caught.value, "code", None) == "VALIDATION_ERROR"


def test_the_embedding_pass_places_what_no_pattern_names(project: Any) -> None:
    store = MemoryStoreFactory(project=project)
    result = memory_write(store=store, content="She has been seeing a counsellor since the funeral and barely sleeps.",
                          principal="t")
    assert result.memory.consent_category == HEALTH
    assert [f["pass"] for f in details(result.memory.pk)["findings"]] == ["embedding"]


def test_a_skip_raises_the_kept_memory_and_a_later_plain_write_keeps_it(project: Any) -> None:
    store = MemoryStoreFactory(project=project)
    text = "The user would like reports as PDF files."
    first = memory_write(store=store, content=text, principal="t")
    assert first.memory.consent_category in (C, P)
    again = memory_write(store=store, content=text, principal="t", consent_category=HEALTH)
    assert again.action == "skipped" and again.memory.pk == first.memory.pk
    assert Memory.objects.get(pk=first.memory.pk).consent_category == HEALTH
    third = memory_write(store=store, content=text, principal="t")
    assert third.action == "skipped" and Memory.objects.get(pk=first.memory.pk).consent_category == HEALTH
    why = details(first.memory.pk)
    assert why["category"] == HEALTH and why["kept_from_memory"] == HEALTH
    # the text's content row already had its vector: the classifier's embedding pass used it
    assert "embedding_skipped" not in why


def test_a_superseding_memory_keeps_at_least_the_retired_ones_category(project: Any) -> None:
    store = MemoryStoreFactory(project=project)
    old = memory_write(store=store, content="The team meets every Tuesday at 10:00.", principal="t",
                       consent_category=L)
    new = memory_write(store=store, content="The team meets every Thursday at 10:00.", principal="t")
    assert new.action == "superseded" and new.replaced is not None and new.replaced.pk == old.memory.pk
    assert new.memory.consent_category == L
    assert details(new.memory.pk)["kept_from_memory"] == L


def test_the_category_caps_the_expiry_from_settings_then_the_store(project: Any, settings: Any) -> None:
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE,
                              "CONSENT_EXPIRY_DAYS": {HEALTH: {Tier.INSTITUTIONAL: 30}, L: {Tier.USER: 7}}}
    store = MemoryStoreFactory(project=project)
    before = timezone.now()
    health = memory_write(store=store, content="He takes 500 mg of metformin twice a day.", principal="t").memory
    assert health.consent_category == HEALTH
    assert before + timedelta(days=30) <= health.expires_at <= timezone.now() + timedelta(days=30)
    later = memory_write(store=store, content="The warehouse closes at 18:00.", principal="t",
                         expires_at=timezone.now() + timedelta(days=400), consent_category=HEALTH).memory
    assert later.expires_at <= timezone.now() + timedelta(days=30)  # a stated expiry is capped too
    plain = memory_write(store=store, content="Invoices are due within 30 days.", principal="t").memory
    assert plain.consent_category == C and plain.expires_at is None
    # a location memory is not capped here: the setting names the user tier only
    place = memory_write(store=store, content="The client lives at 12 Rue de la Paix, 75002 Paris.",
                         principal="t").memory
    assert place.consent_category == L and place.expires_at is None
    # the store's own entry wins over the setting, null meaning no limit
    store.consent_expiry_days = {HEALTH: None, L: 2}
    store.save()
    unlimited = memory_write(store=store, content="She was diagnosed with asthma as a child.", principal="t").memory
    assert unlimited.consent_category == HEALTH and unlimited.expires_at is None
    near = memory_write(store=store, content="The courier lives at 4 Elm Road, Leeds LS6 2AB.", principal="t").memory
    assert near.expires_at <= timezone.now() + timedelta(days=2)


def test_a_raised_category_caps_the_kept_memorys_expiry(project: Any, settings: Any) -> None:
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "CONSENT_EXPIRY_DAYS": {HEALTH: {Tier.INSTITUTIONAL: 10}}}
    store = MemoryStoreFactory(project=project)
    text = "The customer prefers invoices by post."
    first = memory_write(store=store, content=text, principal="t")
    assert first.memory.expires_at is None
    memory_write(store=store, content=text, principal="t", consent_category=HEALTH)
    kept = Memory.objects.get(pk=first.memory.pk)
    assert kept.consent_category == HEALTH and kept.expires_at <= timezone.now() + timedelta(days=10)


def test_a_batch_classifies_each_item_as_one_by_one_writes_would(client: Any, project: Any) -> None:
    items = [
        {"content": IBAN_TEXT, "consent_category": P},
        {"content": "The team meets on Tuesdays.", "consent_category": HEALTH},
        {"content": "He takes 20 mg of atorvastatin every evening."},
        {"content": "Invoices are sent on the first working day."},
        {"content": "The team meets on Tuesdays."},
    ]
    single, batch = MemoryStoreFactory(project=project), MemoryStoreFactory(project=project)
    expected = [memory_write(store=single, content=item["content"], principal="t",
                             consent_category=item.get("consent_category")).memory for item in items]
    expected_categories = [Memory.objects.get(pk=m.pk).consent_category for m in expected]
    assert expected_categories == [ID, HEALTH, HEALTH, C, HEALTH]
    response = client.post("/api/v1/memories/batch", {"memory_store_id": batch.pk, "memories": items}, format="json")
    assert response.status_code == 200, response.json()
    results = response.json()["results"]
    assert [r["consent_category"] for r in results] == expected_categories
    assert results[4]["action"] == "skipped"
    refused = client.post("/api/v1/memories/batch", {"memory_store_id": batch.pk, "memories": [
        {"content": "The depot opens at six.", "consent_category": "memory:secret"}]}, format="json")
    assert refused.status_code == 400 and refused.json()["code"] == "VALIDATION_ERROR"
    outcomes = memory_write_batch(store=batch, principal="t", items=[
        {"content": "Parcels leave at noon.", "consent_category": "memory:secret"},
        {"content": "Parcels leave at noon.", "consent_category": L}])
    assert outcomes[0].error is not None and outcomes[0].error.code == "VALIDATION_ERROR"
    assert outcomes[1].result is not None and outcomes[1].result.memory.consent_category == L


def test_the_write_memory_tool_takes_a_claim(client: Any, project: Any) -> None:
    store = MemoryStoreFactory(project=project)
    agent = AgentFactory(project=project, write_memory_store=store)
    url = f"/api/v1/agents/{agent.pk}/tools/write_memory"
    response = client.post(url, {"content": "The user prefers window seats.", "consent_category": L}, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["consent_category"] == L
    refused = client.post(url, {"content": "The user prefers aisle seats.", "consent_category": "x"}, format="json")
    assert refused.status_code == 400 and refused.json()["code"] == "VALIDATION_ERROR"
    definition = client.get(f"/api/v1/agents/{agent.pk}/tools").json()
    assert "consent_category" in json.dumps(definition)


def test_the_import_command_classifies_each_record(tmp_path: Path, project: Any) -> None:
    store = MemoryStoreFactory(project=project)
    path = tmp_path / "export.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in [
        {"content": "Her date of birth is 14 March 1985.", "consent_category": P},
        {"content": "The account manager changed in 2021.", "consent_category": HEALTH},
        {"content": "Invoices are sent on the first working day."},
        {"content": "Deliveries go to the south gate.", "consent_category": "memory:nope"},
    ]) + "\n", encoding="utf-8")
    out = StringIO()
    with pytest.raises(SystemExit):  # a record was refused
        call_command("memory_engine_import", str(path), "--store", store.pk, stdout=out, stderr=StringIO())
    assert "line 4: VALIDATION_ERROR" in out.getvalue()
    categories = {m.content.text: m.consent_category for m in Memory.objects.filter(store=store)}
    assert categories == {"Her date of birth is 14 March 1985.": ID, "The account manager changed in 2021.": HEALTH,
                          "Invoices are sent on the first working day.": C}
