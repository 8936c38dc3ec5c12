"""Retention in the admin: legal hold actions, a held memory's forget refused, receipts as JSON."""

from __future__ import annotations

import json

from django.test import Client

from memory_engine.models import DocumentVersion, Memory
from memory_engine.policy import system_principal
from memory_engine.services.erasure import subject_erase

from .conftest import World

A = "/admin/memory_engine"


def test_legal_hold_action_and_forget_refused(member_client: Client, mine: World) -> None:
    response = member_client.post(f"{A}/memory/", {"action": "place_legal_hold",
                                                   "_selected_action": [mine.new.pk]}, follow=True)
    assert "now legal_hold" in response.content.decode()
    assert Memory.objects.get(pk=mine.new.pk).retention_class == "legal_hold"
    response = member_client.post(f"{A}/memory/", {"action": "forget", "_selected_action": [mine.new.pk]},
                                  follow=True)
    assert "LEGAL_HOLD" in response.content.decode()
    assert Memory.objects.get(pk=mine.new.pk).invalidated_at is None

    member_client.post(f"{A}/document/", {"action": "place_legal_hold", "_selected_action": [mine.ready.pk]})
    assert set(DocumentVersion.objects.filter(document=mine.ready).values_list("retention_class", flat=True)) \
        <= {"legal_hold"}


def test_receipts_are_listed_and_downloadable_per_project(member_client: Client, mine: World,
                                                          theirs: World) -> None:
    receipt = subject_erase(project=mine.project, caller=system_principal("test"), tags={"team": "nobody"})
    other = subject_erase(project=theirs.project, caller=system_principal("test"), tags={"team": "nobody"})
    page = member_client.get(f"{A}/erasurereceipt/")
    assert page.status_code == 200
    assert [r.pk for r in page.context["cl"].queryset] == [receipt.pk]
    download = member_client.get(f"{A}/erasurereceipt/{receipt.pk}/download/")
    assert download.status_code == 200 and download["Content-Type"] == "application/json"
    assert json.loads(download.content)["sha256"] == receipt.sha256
    assert member_client.get(f"{A}/erasurereceipt/{other.pk}/download/").status_code == 404


def test_deleting_a_store_with_a_held_memory_is_refused_on_the_confirmation_page(
        member_client: Client, mine: World) -> None:
    Memory.objects.filter(pk=mine.new.pk).update(retention_class="legal_hold")
    page = member_client.get(f"{A}/memorystore/{mine.store.pk}/delete/")
    assert page.status_code == 200 and "under legal hold" in page.content.decode()
    member_client.post(f"{A}/memorystore/{mine.store.pk}/delete/", {"post": "yes"})
    assert Memory.objects.filter(pk=mine.new.pk).exists()
