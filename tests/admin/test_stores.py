"""Memory stores edited in the admin pass the same checks as the API
(memory_engine.services.stores): a valid threshold pair and a name unique per project."""

from __future__ import annotations

from typing import Any

from django.test import Client

from memory_engine.models import MemoryStore

from .conftest import World

A = "/admin/memory_engine/memorystore"


def store_form(project: Any, **values: Any) -> dict[str, Any]:
    return {"project": project.pk, "name": "notes", "description": "", "tags": "{}", "duplicate_threshold": "",
            "supersede_threshold": "", "require_about_for_kinds": "[]", **values}


def test_admin_store_add_refuses_an_inverted_threshold_pair(member_client: Client, mine: World) -> None:
    response = member_client.post(f"{A}/add/", store_form(mine.project, duplicate_threshold="0.9",
                                                         supersede_threshold="0.95"))
    assert response.status_code == 200 and "THRESHOLDS_INVALID" in response.content.decode()
    assert not MemoryStore.objects.filter(name="notes").exists()


def test_admin_store_names_are_unique_per_project(member_client: Client, mine: World, theirs: World) -> None:
    taken = member_client.post(f"{A}/add/", store_form(mine.project, name=mine.store.name))
    assert taken.status_code == 200 and "NAME_TAKEN" in taken.content.decode()
    assert MemoryStore.objects.filter(project=mine.project, name=mine.store.name).count() == 1
    # The name of a store of another project is free.
    free = member_client.post(f"{A}/add/", store_form(mine.project, name=theirs.store.name))
    assert free.status_code == 302
    assert MemoryStore.objects.filter(project=mine.project, name=theirs.store.name).count() == 1


def test_admin_store_change_saves_through_the_service(member_client: Client, mine: World) -> None:
    url = f"{A}/{mine.store.pk}/change/"
    inverted = member_client.post(url, store_form(mine.project, name=mine.store.name, duplicate_threshold="0.5",
                                                  supersede_threshold="0.6"))
    assert inverted.status_code == 200 and "THRESHOLDS_INVALID" in inverted.content.decode()
    saved = member_client.post(url, store_form(mine.project, name="renamed", duplicate_threshold="0.97",
                                               supersede_threshold="0.9"))
    assert saved.status_code == 302
    mine.store.refresh_from_db()
    assert (mine.store.name, mine.store.duplicate_threshold, mine.store.supersede_threshold) == ("renamed", 0.97, 0.9)
