"""Consent revocation (docs/memory.md, *Consent categories*): a subject withdraws consent for
categories; exactly their memories of those categories are erased (live or not, text, contents,
ledger text), nothing else; legal hold refuses the whole revocation; the receipt names the
selector only by its HMAC; the caller's reach and ``purge`` grant decide, as for erasure."""

from __future__ import annotations

from typing import Any

import pytest

from memory_engine.consent_categories import ConsentCategory
from memory_engine.models import ErasureReceipt, Memory, MemoryAssertion, MemoryContent, MemoryMap, Project
from memory_engine.models.retention import RetentionClass
from memory_engine.policy import system_principal
from memory_engine.services.consent import consent_revoke
from memory_engine.services.erasure import selector_hmac
from memory_engine.services.memories import memory_write
from memory_engine.services.memory_map import memory_map_request
from memory_engine.services.retention import REDACTED_TEXT
from memory_engine.services.stores import subject_store_get_or_create
from tests.conftest import api_client
from tests.factories import MemoryStoreFactory

pytestmark = pytest.mark.django_db
H, P, L = ConsentCategory.HEALTH, ConsentCategory.PREFERENCES, ConsentCategory.LOCATION


def remember(store: Any, text: str, category: str, **kwargs: Any) -> Memory:
    memory = memory_write(store=store, content=text, principal="test", **kwargs).memory
    Memory.objects.filter(pk=memory.pk).update(consent_category=category)
    return memory


@pytest.fixture
def subjects(project: Project) -> dict[str, Any]:
    alice = subject_store_get_or_create(project=project, external_id="alice")[0]
    bob = subject_store_get_or_create(project=project, external_id="bob")[0]
    shared = MemoryStoreFactory(project=project)
    city = {"kind": "health", "key": "condition"}
    old = remember(alice, "Alice has a mild asthma.", H, about=city)
    new = remember(alice, "Alice has severe asthma since the winter.", H, about=city)
    assert Memory.objects.get(pk=old.pk).superseded_by_id == new.pk  # a retired version: erased too
    return {
        "alice": alice, "bob": bob,
        "alice_health": [old.pk, new.pk],
        "alice_other": [remember(alice, "Alice prefers tea to coffee.", P).pk,
                        remember(alice, "Alice lives in Leiden.", L).pk],
        "bob_health": [remember(bob, "Bob takes insulin.", H).pk],
        "shared_health": [remember(shared, "Alice's team lead had knee surgery.", H).pk],
    }


def test_revocation_erases_the_subjects_memories_of_those_categories_only(project: Project,
                                                                         subjects: dict[str, Any]) -> None:
    alice = subjects["alice"]
    memory_map_request(store=alice)
    assert MemoryMap.objects.filter(store=alice).exists()
    erased = subjects["alice_health"]
    contents = list(Memory.objects.filter(pk__in=erased).values_list("content_id", flat=True))
    assertions = list(MemoryAssertion.objects.filter(memory_id__in=erased).values_list("pk", flat=True))
    receipt = consent_revoke(project=project, caller=system_principal("dpo"), subject_external_id="alice",
                             categories=[H, ConsentCategory.IDENTITY])
    assert not Memory.objects.filter(pk__in=erased).exists()
    assert not MemoryContent.objects.filter(pk__in=contents).exists()
    for row in MemoryAssertion.objects.filter(pk__in=assertions):
        assert row.content == REDACTED_TEXT and row.details == {"erased": True}
    kept = subjects["alice_other"] + subjects["bob_health"] + subjects["shared_health"]
    assert Memory.objects.filter(pk__in=kept).count() == len(kept)
    assert not MemoryMap.objects.filter(store=alice).exists()  # computed from erased vectors: dropped
    # the receipt: counts, ids, the selector only as its HMAC
    assert receipt.selector_kind == "consent_categories+subject_external_id"
    assert receipt.selector_hmac == selector_hmac({"subject_external_id": "alice",
                                                   "consent_categories": [ConsentCategory.IDENTITY, H]})
    assert receipt.counts["memory"] == 2 and sorted(receipt.ids["memory"]) == sorted(erased)
    assert receipt.counts["memoryassertion"] == len(assertions) and "memorystore" not in receipt.counts
    assert "alice" not in str(receipt.counts) + str(receipt.ids) and receipt.principal == "system:dpo"
    assert alice.memories.count() == 2 and type(alice).objects.get(pk=alice.pk).subject_external_id == "alice"


def test_legal_hold_refuses_the_whole_revocation(project: Project, subjects: dict[str, Any]) -> None:
    held = subjects["alice_health"][1]
    Memory.objects.filter(pk=held).update(retention_class=RetentionClass.LEGAL_HOLD)
    from memory_engine.exceptions import LegalHold

    with pytest.raises(LegalHold) as refused:
        consent_revoke(project=project, caller=system_principal("dpo"), subject_external_id="alice", categories=[H])
    assert refused.value.details["memory_ids"] == [held]
    assert Memory.objects.filter(pk__in=subjects["alice_health"]).count() == 2
    assert not ErasureReceipt.objects.filter(selector_kind__startswith="consent").exists()
    # a category the held memory is not in is revoked as usual
    receipt = consent_revoke(project=project, caller=system_principal("dpo"), subject_external_id="alice",
                             categories=[L])
    assert receipt.ids["memory"] == [subjects["alice_other"][1]]


def test_over_http_as_the_caller_with_its_grants(project: Project, client: Any, subjects: dict[str, Any]) -> None:
    from memory_engine.models import MemoryStore
    from memory_engine.services.keys import api_key_create

    MemoryStore.objects.filter(pk=subjects["alice"].pk).update(access_tags=["team:a"])
    reader = api_client(api_key_create(project=project, grants=[{"pattern": "team:a", "actions": ["search"]}])[1])
    other_team = api_client(api_key_create(project=project, grants=[{"pattern": "team:b",
                                                                     "actions": ["search", "purge"]}])[1])
    body = {"subject_external_id": "alice", "categories": [H]}
    refused = reader.post("/api/v1/consent/revoke", body, format="json")
    assert refused.status_code == 403 and refused.json()["code"] == "GRANT_REQUIRED"
    unseen = other_team.post("/api/v1/consent/revoke", body, format="json")
    assert unseen.status_code == 201 and unseen.json()["counts"]["memory"] == 0  # as an unknown subject
    assert Memory.objects.filter(pk__in=subjects["alice_health"]).count() == 2
    for bad in ({"subject_external_id": "alice", "categories": []},
                {"subject_external_id": "alice", "categories": ["memory:secrets"]},
                {"subject_external_id": "alice"}):
        answer = client.post("/api/v1/consent/revoke", bad, format="json")
        assert answer.status_code == 400 and answer.json()["code"] == "VALIDATION_ERROR", bad
    done = client.post("/api/v1/consent/revoke", body, format="json")
    assert done.status_code == 201, done.content
    receipt = done.json()
    assert receipt["selector_kind"] == "consent_categories+subject_external_id"
    assert sorted(receipt["ids"]["memory"]) == sorted(subjects["alice_health"])
    listed = client.get("/api/v1/erasure-receipts").json()["results"]
    assert receipt["id"] in {row["id"] for row in listed}
    assert not Memory.objects.filter(pk__in=subjects["alice_health"]).exists()
    assert Memory.objects.filter(pk__in=subjects["bob_health"]).exists()
