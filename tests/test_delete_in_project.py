"""memory_engine.db.delete_in_project: the rows Django's ``delete()`` removes, changes and refuses,
with every statement naming the project (on a distributed PostgreSQL each stays on the project's
node: docs/scaling.md)."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.db.models import RestrictedError
from django.test.utils import CaptureQueriesContext

from memory_engine.db import allow_ledger_erasure, delete_in_project
from memory_engine.models import (
    Entity,
    EntityEdge,
    EvidenceLink,
    Memory,
    MemoryContent,
    MemoryRevision,
    MemoryStore,
    ProjectRow,
)
from memory_engine.services.memories import memory_write
from tests.factories import MemoryStoreFactory, ProjectFactory

pytestmark = pytest.mark.django_db


def world(store: MemoryStore) -> tuple[Memory, Memory]:
    """A memory superseded by a second one; the second with a revision, an entity edge and a link
    from the first: what deleting the second takes along (or clears, for ``superseded_by``)."""
    about = {"kind": "preference", "key": "release_day"}
    first = memory_write(store=store, content="The release train leaves on Tuesdays.", principal="t", about=about)
    second = memory_write(store=store, content="The release train leaves on Thursdays.", principal="t", about=about)
    assert second.action == "superseded"
    older, newer = Memory.objects.get(pk=first.memory.pk), second.memory
    MemoryRevision.objects.create(memory=newer, project_id=store.project_id, content=older.content)
    entity = Entity.objects.create(project_id=store.project_id, name="Release train", kind="other",
                                   key="release train")
    EntityEdge.objects.create(project_id=store.project_id, entity=entity, relation="mentions", memory=newer)
    EvidenceLink.objects.create(project_id=store.project_id, kind="supports", source_memory=older,
                                target_memory=newer)
    return older, newer


def test_it_deletes_and_clears_what_djangos_delete_does():
    ours, theirs = MemoryStoreFactory(), MemoryStoreFactory()
    (ours_older, ours_newer), (_, theirs_newer) = world(ours), world(theirs)

    by_django = Memory.objects.filter(pk=theirs_newer.pk).delete()
    by_project = delete_in_project(Memory.objects.filter(pk=ours_newer.pk), ours.project_id)

    assert by_project == by_django
    assert by_project[1] == {"memory_engine.Memory": 1, "memory_engine.MemoryRevision": 1,
                             "memory_engine.EntityEdge": 1, "memory_engine.EvidenceLink": 1}
    ours_older.refresh_from_db()
    assert ours_older.superseded_by_id is None  # SET_NULL, as Django does


def test_every_statement_names_the_project():
    store = MemoryStoreFactory()
    _, newer = world(store)
    with CaptureQueriesContext(connection) as queries:
        delete_in_project(Memory.objects.filter(pk=newer.pk), store.project_id)
    statements = [query["sql"] for query in queries.captured_queries
                  if not query["sql"].startswith(("SAVEPOINT", "RELEASE SAVEPOINT"))]
    assert len(statements) >= 8  # the memory, then each table that references it
    assert all('"project_id"' in sql for sql in statements), statements


def test_rows_of_another_project_are_left_alone():
    store = MemoryStoreFactory()
    older, newer = world(store)
    other = ProjectFactory()

    assert delete_in_project(Memory.objects.filter(pk__in=[older.pk, newer.pk]), other.pk) == (0, {})
    assert Memory.objects.filter(pk__in=[older.pk, newer.pk]).count() == 2


def test_a_restricted_reference_left_refuses_and_deletes_nothing():
    """A content row a memory still uses (``Memory.content``: RESTRICT) cannot go on its own."""
    store = MemoryStoreFactory()
    _, newer = world(store)

    with pytest.raises(RestrictedError), transaction.atomic():
        delete_in_project(MemoryContent.objects.filter(pk=newer.content_id), store.project_id)

    assert MemoryContent.objects.filter(pk=newer.content_id).exists()


def test_a_restricted_reference_that_goes_too_is_no_obstacle():
    """A store takes its memories and their content rows along: the content's RESTRICT is met
    because the memories using it go in the same delete (as in Django)."""
    store = MemoryStoreFactory()
    world(store)
    allow_ledger_erasure()  # the store's ledger rows go with it

    total, counts = delete_in_project(MemoryStore.objects.filter(pk=store.pk), store.project_id)

    assert counts["memory_engine.Memory"] == 2 and counts["memory_engine.MemoryContent"] == 2, counts
    assert counts["memory_engine.MemoryAssertion"] == 2  # one per write
    assert not Memory.objects.filter(store_id=store.pk).exists()
    assert total == sum(counts.values())


def test_every_model_of_a_project_but_the_api_key_is_a_project_row():
    """A new model with ``project_id`` must address its rows with it (the API keys are a
    reference table: every node holds them all)."""
    from django.apps import apps

    with_project = {model.__name__ for model in apps.get_app_config("memory_engine").get_models()
                    if any(field.attname == "project_id" for field in model._meta.concrete_fields)}
    rows = {name for name in with_project if issubclass(apps.get_model("memory_engine", name), ProjectRow)}
    assert with_project - rows == {"ApiKey"}


def test_a_rows_save_refresh_and_delete_name_its_project():
    store = MemoryStoreFactory()
    with CaptureQueriesContext(connection) as queries:
        store.description = "renamed"
        store.save(update_fields=["description"])
        store.refresh_from_db()
    update, select = (query["sql"] for query in queries.captured_queries)
    assert update.startswith("UPDATE") and '"project_id" = ' in update, update
    assert select.startswith("SELECT") and '"project_id" = ' in select, select
    assert store.description == "renamed"

    _, counts = store.delete()
    assert counts == {"memory_engine.MemoryStore": 1}
    assert store.pk is None
