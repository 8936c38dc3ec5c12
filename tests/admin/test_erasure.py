"""Deleting stores and projects in the admin: through the erasure services, ledger included,
with counts on the confirmation page and delete permission on the erased model required."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from memory_engine.models import (
    Agent,
    ApiKey,
    Chunk,
    Document,
    Generation,
    Memory,
    MemoryAssertion,
    MemoryContent,
    MemoryRule,
    MemoryStore,
    Project,
)
from memory_engine.selectors.erasure import erasure_plan
from memory_engine.services.memories import memory_write

from .conftest import World, staff_user

A = "/admin/memory_engine"


def summary(response: Any) -> dict[str, int]:
    """The confirmation page's per-model counts ("Memory assertions: 3")."""
    return {model: count for model, count in response.context["model_count"]}


def store_rows(store: MemoryStore) -> tuple[int, int, int]:
    return (Memory.objects.filter(store_id=store.pk).count(), MemoryContent.objects.filter(store_id=store.pk).count(),
            MemoryAssertion.objects.filter(store_id=store.pk).count())


def bulk_delete(client: Client, model: str, *pks: str, confirm: bool) -> Any:
    data = {"action": "delete_selected", "_selected_action": list(pks)}
    if confirm:
        data["post"] = "yes"
    return client.post(f"{A}/{model}/", data)


# --------------------------------------------------------------------------- stores


def test_superuser_deletes_a_store_with_ledger_rows_from_its_page(superuser_client: Client, mine: World,
                                                                   theirs: World) -> None:
    memories, contents, assertions = store_rows(mine.store)
    assert assertions >= 2 and memories >= 2
    page = superuser_client.get(f"{A}/memorystore/{mine.store.pk}/delete/")
    assert page.status_code == 200
    assert not page.context["perms_lacking"] and not page.context["protected"]
    assert summary(page) == {"memory stores": 1, "memories": memories, "memory contents": contents,
                             "memory assertions": assertions, "memory rules": 1}
    assert f"Memory assertions: {assertions}" in re.sub(r"<[^>]+>", "", page.content.decode())

    response = superuser_client.post(f"{A}/memorystore/{mine.store.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not MemoryStore.objects.filter(pk=mine.store.pk).exists()
    assert store_rows(mine.store) == (0, 0, 0)
    assert not MemoryRule.objects.filter(pk=mine.rule.pk).exists()
    assert Agent.objects.get(pk=mine.agent.pk).write_memory_store_id is None  # SET_NULL, not deleted
    assert store_rows(theirs.store)[2] >= 2  # another store's ledger is untouched


def test_superuser_bulk_deletes_stores_with_ledger_rows(superuser_client: Client, mine: World,
                                                         theirs: World) -> None:
    assertions = store_rows(mine.store)[2] + store_rows(theirs.store)[2]
    page = bulk_delete(superuser_client, "memorystore", mine.store.pk, theirs.store.pk, confirm=False)
    assert page.status_code == 200
    assert not page.context["perms_lacking"]
    assert summary(page)["memory stores"] == 2 and summary(page)["memory assertions"] == assertions

    response = bulk_delete(superuser_client, "memorystore", mine.store.pk, theirs.store.pk, confirm=True)
    assert response.status_code == 302
    assert not MemoryStore.objects.filter(pk__in=[mine.store.pk, theirs.store.pk]).exists()
    assert MemoryAssertion.objects.count() == 0 and Memory.objects.count() == 0


def test_staff_without_delete_permission_cannot_delete_a_store(mine: World) -> None:
    user = staff_user("viewer", codenames=["view_memorystore", "change_memorystore", "view_memoryassertion"])
    mine.project.members.add(user)
    client = Client()
    client.force_login(user)
    before = store_rows(mine.store)

    assert client.get(f"{A}/memorystore/{mine.store.pk}/delete/").status_code == 403
    assert client.post(f"{A}/memorystore/{mine.store.pk}/delete/", {"post": "yes"}).status_code == 403
    assert "delete_selected" not in client.get(f"{A}/memorystore/").content.decode()  # not offered
    refused = bulk_delete(client, "memorystore", mine.store.pk, confirm=True)
    # the changelist, or (another action being offered) back to it with "no action selected"
    assert refused.status_code == 200 or refused["Location"] == f"{A}/memorystore/"
    assert MemoryStore.objects.filter(pk=mine.store.pk).exists() and store_rows(mine.store) == before


def test_member_with_delete_permission_erases_own_store_only(mine: World, theirs: World) -> None:
    """Delete permission on stores is enough (nobody holds it on the ledger); project scoping still holds."""
    user = staff_user("eraser", codenames=["view_memorystore", "delete_memorystore"])
    mine.project.members.add(user)
    client = Client()
    client.force_login(user)
    theirs_before = store_rows(theirs.store)

    response = bulk_delete(client, "memorystore", mine.store.pk, theirs.store.pk, confirm=True)
    assert response.status_code == 302
    assert not MemoryStore.objects.filter(pk=mine.store.pk).exists() and store_rows(mine.store) == (0, 0, 0)
    assert client.post(f"{A}/memorystore/{theirs.store.pk}/delete/", {"post": "yes"}).status_code == 302
    assert MemoryStore.objects.filter(pk=theirs.store.pk).exists() and store_rows(theirs.store) == theirs_before


# --------------------------------------------------------------------------- projects


def test_superuser_deletes_a_project_with_everything_in_it(superuser_client: Client, mine: World, theirs: World,
                                                           django_capture_on_commit_callbacks: Any) -> None:
    memories, contents, assertions = store_rows(mine.store)
    chunks = Chunk.objects.filter(document__project=mine.project).count()
    page = superuser_client.get(f"{A}/project/{mine.project.pk}/delete/")
    assert page.status_code == 200 and not page.context["perms_lacking"]
    counts = summary(page)
    assert counts["projects"] == 1 and counts["memory assertions"] == assertions and counts["memories"] == memories
    assert counts["documents"] == 2 and counts["chunks"] == chunks and counts["API keys"] == 1
    assert counts["agents"] == 1 and counts["generations"] == 1

    stored = Path(mine.ready.file.path)
    assert stored.exists()
    with django_capture_on_commit_callbacks(execute=True):
        response = superuser_client.post(f"{A}/project/{mine.project.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not stored.exists()  # the erasure takes the stored files too
    assert Path(theirs.ready.file.path).exists()
    assert not Project.objects.filter(pk=mine.project.pk).exists()
    assert store_rows(mine.store) == (0, 0, 0)
    assert not ApiKey.objects.filter(project_id=mine.project.pk).exists()
    assert not Document.objects.filter(project_id=mine.project.pk).exists()
    assert Project.objects.filter(pk=theirs.project.pk).exists() and store_rows(theirs.store)[2] >= 2


def test_superuser_bulk_deletes_a_project(superuser_client: Client, mine: World) -> None:
    response = bulk_delete(superuser_client, "project", mine.project.pk, confirm=True)
    assert response.status_code == 302
    assert not Project.objects.filter(pk=mine.project.pk).exists() and store_rows(mine.store) == (0, 0, 0)


def test_staff_without_delete_permission_cannot_delete_a_project(mine: World) -> None:
    user = staff_user("projectviewer", codenames=["view_project", "change_project"])
    mine.project.members.add(user)
    client = Client()
    client.force_login(user)
    assert client.post(f"{A}/project/{mine.project.pk}/delete/", {"post": "yes"}).status_code == 403
    bulk_delete(client, "project", mine.project.pk, confirm=True)
    assert Project.objects.filter(pk=mine.project.pk).exists() and store_rows(mine.store)[2] >= 2


# --------------------------------------------------------------------------- rows the ledger only points at


@pytest.mark.parametrize("model", ["agent", "generation", "memoryrule", "document"])
def test_rows_the_ledger_refers_to_delete_and_leave_the_ledger(superuser_client: Client, mine: World,
                                                               model: str) -> None:
    """Assertions keep a generation's and a rule's id (no cascade, no constraint): deleting
    those, or the agent above them, needs no erasure and leaves the ledger as it was."""
    memory_write(store=mine.store, content="The user alphamark owns a red bicycle.", principal="rule:x",
                 mechanism="rule", generation_id=mine.generation.pk, rule_id=mine.rule.pk)
    obj = {"agent": mine.agent, "generation": mine.generation, "memoryrule": mine.rule, "document": mine.ready}[model]
    before = MemoryAssertion.objects.filter(store=mine.store).count()
    page = superuser_client.get(f"{A}/{model}/{obj.pk}/delete/")
    assert page.status_code == 200 and not page.context["perms_lacking"]
    response = superuser_client.post(f"{A}/{model}/{obj.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not type(obj).objects.filter(pk=obj.pk).exists()
    assert MemoryAssertion.objects.filter(store=mine.store).count() == before


# --------------------------------------------------------------------------- the plan


def test_erasure_plan_counts_each_row_once_and_reports_blockers(mine: World) -> None:
    """An assertion reached through its store, its memory and the memory it replaced counts once;
    a memory of another store pointing at an erased content (RESTRICT) blocks the erasure."""
    plan = erasure_plan(queryset=MemoryStore.objects.filter(pk=mine.store.pk))
    assert plan.removed[MemoryAssertion] == MemoryAssertion.objects.filter(store=mine.store).count()
    assert plan.removed[MemoryStore] == 1 and Generation not in plan.removed and not plan.blocking

    other = MemoryStore.objects.create(project=mine.project, name="borrower")
    Memory.objects.create(store=other, content=mine.new.content)
    plan = erasure_plan(queryset=MemoryStore.objects.filter(pk=mine.store.pk))
    assert plan.blocking == {Memory: 1}


def test_blocked_erasure_shows_what_blocks_it_and_deletes_nothing(superuser_client: Client, mine: World) -> None:
    other = MemoryStore.objects.create(project=mine.project, name="borrower")
    Memory.objects.create(store=other, content=mine.new.content)
    before = store_rows(mine.store)
    page = superuser_client.get(f"{A}/memorystore/{mine.store.pk}/delete/")
    assert page.status_code == 200 and page.context["protected"] == ["Referenced by 1 memory outside this deletion"]
    response = superuser_client.post(f"{A}/memorystore/{mine.store.pk}/delete/", {"post": "yes"})
    assert response.status_code == 200  # the stock "cannot delete" page again, nothing deleted
    assert store_rows(mine.store) == before



def test_bulk_document_delete_counts_chunks_and_removes_files(superuser_client: Client, mine: World,
                                                              django_capture_on_commit_callbacks: Any) -> None:
    chunks = Chunk.objects.filter(document=mine.ready).count()
    stored = Path(mine.ready.file.path)
    assert chunks >= 1 and stored.exists()
    page = bulk_delete(superuser_client, "document", mine.ready.pk, mine.failed.pk, confirm=False)
    # The ready document's one version and its raw capture go with it (the failed one, made
    # through the ORM, has neither).
    assert summary(page) == {"documents": 2, "chunks": chunks, "document versions": 1, "raw captures": 1}
    with django_capture_on_commit_callbacks(execute=True):
        response = bulk_delete(superuser_client, "document", mine.ready.pk, mine.failed.pk, confirm=True)
    assert response.status_code == 302
    assert not Document.objects.filter(pk__in=[mine.ready.pk, mine.failed.pk]).exists()
    assert not stored.exists()
