"""The admin trash: forgotten agent/institutional memories, restored through the service."""

from __future__ import annotations

from datetime import timedelta

from django.test import Client
from django.utils import timezone

from memory_engine.models import Memory, MemoryAssertion
from memory_engine.services.memory_lifecycle import memory_forget

from .conftest import World, staff_user

A = "/admin/memory_engine"


def test_trash_lists_only_this_projects_trash_and_restores(member_client: Client, mine: World,
                                                            theirs: World) -> None:
    memory_forget(memory=mine.new, principal="test")
    memory_forget(memory=theirs.new, principal="test")
    page = member_client.get(f"{A}/memory/trash/")
    assert page.status_code == 200
    assert [m.pk for m in page.context["cl"].queryset] == [mine.new.pk]
    assert "restorable until" in page.content.decode().lower()

    response = member_client.post(f"{A}/memory/trash/", {"action": "restore", "_selected_action": [mine.new.pk]},
                                  follow=True)
    assert "Restored 1 memory(ies)" in response.content.decode()
    memory = Memory.objects.get(pk=mine.new.pk)
    assert memory.trashed_at is None and memory.invalidated_at is None
    assert MemoryAssertion.objects.get(memory_id=memory.pk, outcome="restored").principal == "user:member"


def test_restore_past_the_window_is_reported(member_client: Client, mine: World) -> None:
    memory_forget(memory=mine.new, principal="test")
    Memory.objects.filter(pk=mine.new.pk).update(trashed_at=timezone.now() - timedelta(days=30))
    response = member_client.post(f"{A}/memory/trash/", {"action": "restore", "_selected_action": [mine.new.pk]},
                                  follow=True)
    assert "TRASH_EXPIRED" in response.content.decode()
    assert Memory.objects.get(pk=mine.new.pk).trashed_at is not None


def test_restore_needs_the_delete_memory_permission(mine: World) -> None:
    memory_forget(memory=mine.new, principal="test")
    user = staff_user("viewer", codenames=["view_memory"])
    mine.project.members.add(user)
    client = Client()
    client.force_login(user)
    page = client.get(f"{A}/memory/trash/")
    form = page.context["action_form"]
    assert page.status_code == 200 and (form is None or "restore" not in str(form.fields["action"].choices))
    refused = client.post(f"{A}/memory/trash/", {"action": "restore", "_selected_action": [mine.new.pk]})
    assert Memory.objects.get(pk=mine.new.pk).trashed_at is not None and refused.status_code in (200, 302, 403)
