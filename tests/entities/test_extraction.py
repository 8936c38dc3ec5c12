"""services.entities: reading memories and chunks into the graph, resolution, history, merge."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from memory_engine.mentions import Mention
from memory_engine.models import Document, Entity, EntityEdge, Memory
from memory_engine.providers.entities import EntityExtractor
from memory_engine.services.documents import document_create_text, document_ingest
from memory_engine.services.entities import (
    entities_extract_documents,
    entities_extract_memories,
    entities_sweep,
    entity_merge,
)
from memory_engine.services.memories import memory_write
from memory_engine.services.memory_lifecycle import memory_forget, memory_restore
from tests.factories import MemoryStoreFactory, ProjectFactory

pytestmark = pytest.mark.django_db


def write(store: Any, text: str) -> Memory:
    return memory_write(store=store, content=text, principal="test").memory


def edges_of(memory: Memory) -> set[tuple[str, str, str, str]]:
    return {(e.entity.name, e.relation, e.attribute, e.value)
            for e in EntityEdge.objects.filter(memory=memory, other__isnull=True).select_related("entity")}


def test_a_memory_is_read_into_entities_and_edges(project: Any) -> None:
    store = MemoryStoreFactory(project=project)
    memory = write(store, "Ana leads the Lisbon office since May 2021.")
    report = entities_extract_memories(memory_ids=[memory.pk])
    assert report.memories == 1 and report.entities_created == 3
    assert edges_of(memory) == {("Ana", "about", "leads", "the Lisbon office since May 2021"),
                                ("Lisbon", "mentions", "", ""), ("2021-05", "mentions", "", "")}
    assert {(e.entity.name, e.other.name) for e in EntityEdge.objects.filter(relation="involves")
            .select_related("entity", "other")} == {("Ana", "Lisbon"), ("Ana", "2021-05")}
    memory.refresh_from_db()
    assert memory.entities_at is not None
    assert entities_extract_memories(memory_ids=[memory.pk]).memories == 0  # read once


def test_names_resolve_by_key_and_alias_within_a_project(project: Any) -> None:
    store = MemoryStoreFactory(project=project)
    first = write(store, "Caroline: I went to the support group in Boston.")
    second = write(store, "Melanie: Caroline told me the Boston trip was great.")
    entities_extract_memories()
    assert Entity.objects.filter(project=project).count() == 3  # Caroline, Boston, Melanie
    caroline = Entity.objects.get(project=project, key="caroline")
    assert {(e.memory_id, e.relation) for e in caroline.edges.filter(other__isnull=True)} == {
        (first.pk, "authored_by"), (first.pk, "about"), (second.pk, "mentions")}
    other = ProjectFactory()
    entities_extract_memories(memory_ids=[write(MemoryStoreFactory(project=other), "Caroline is here.").pk])
    assert Entity.objects.filter(key="caroline").count() == 2  # one per project
    Entity.objects.filter(pk=caroline.pk).update(aliases=["carrie"])
    third = write(store, "Carrie moved to Porto.")
    entities_extract_memories(memory_ids=[third.pk])
    assert caroline.edges.filter(memory=third, relation="about").exists()


def test_a_supersede_retires_the_old_memorys_edges_and_forget_restore_follow(project: Any) -> None:
    store = MemoryStoreFactory(project=project)
    old = write(store, "Marco works at Acme Corp in Lisbon.")
    entities_extract_memories()
    new = memory_write(store=store, content="Marco works at Acme Corp in Porto.", principal="test",
                       about=None, supersede_threshold=0.5, duplicate_threshold=0.99)
    assert new.action == "superseded"
    entities_extract_memories()
    assert not EntityEdge.objects.filter(memory=old, invalid_at__isnull=True).exists()
    assert EntityEdge.objects.filter(memory=new.memory, invalid_at__isnull=True).exists()
    memory_forget(memory=new.memory, principal="test")
    assert not EntityEdge.objects.filter(memory=new.memory, invalid_at__isnull=True).exists()
    memory_restore(memory=Memory.objects.get(pk=new.memory.pk), principal="test")
    assert EntityEdge.objects.filter(memory=new.memory, invalid_at__isnull=True).exists()


def test_chunks_are_read_per_document_after_ingestion(project: Any, django_capture_on_commit_callbacks: Any) -> None:
    document = document_create_text(project=project, content="# Offices\n\nAna Costa runs the Porto office.\n",
                                    content_type="text/markdown", path="/offices.md", enqueue=False)
    with django_capture_on_commit_callbacks(execute=True):
        document_ingest(document_id=document.pk)  # queues the reading (a synchronous task in tests)
    document.refresh_from_db()
    assert document.entities_at is not None
    names = set(EntityEdge.objects.filter(chunk__document=document).values_list("entity__name", flat=True))
    assert names == {"Ana Costa", "Porto"}
    Document.objects.filter(pk=document.pk).update(entities_at=None)
    assert entities_extract_documents(document_ids=[document.pk]).edges == 0  # read again: nothing new


def test_the_sweep_reads_what_was_not_queued(project: Any) -> None:
    store = MemoryStoreFactory(project=project)
    write(store, "Fatima is allergic to shellfish.")
    assert entities_sweep()["memories"] >= 1
    assert Entity.objects.filter(project=project, key="fatima").exists()


def test_merge_moves_edges_and_names(project: Any) -> None:
    store = MemoryStoreFactory(project=project)
    write(store, "Mel painted a sunrise.")
    write(store, "Melanie went camping with Caroline.")
    entities_extract_memories()
    mel, melanie = Entity.objects.get(key="mel"), Entity.objects.get(key="melanie")
    merged = entity_merge(target=melanie, sources=[mel])
    assert merged.aliases == ["mel"]
    assert not Entity.objects.filter(pk=mel.pk).exists()
    assert melanie.edges.filter(relation="about").count() == 2
    third = write(store, "Mel loves pottery.")
    entities_extract_memories(memory_ids=[third.pk])
    assert melanie.edges.filter(memory=third).exists()


class _Named(EntityExtractor):
    """Every text names the organisation it starts with (the words before " hired")."""

    name = "test"

    def extract(self, texts: Sequence[str]) -> list[list[Mention]]:
        return [[Mention(name=text.split(" hired")[0], kind="organization")] for text in texts]


def test_a_name_close_to_a_known_one_joins_it_as_an_alias(project: Any, settings: Any) -> None:
    store = MemoryStoreFactory(project=project)
    first = write(store, "General Electric hired Ana.")
    second = write(store, "General Electrics hired Bruno.")
    third = write(store, "Apex Logistics hired Carla.")
    entities_extract_memories(memory_ids=[first.pk], extractor=_Named())
    entities_extract_memories(memory_ids=[second.pk, third.pk], extractor=_Named())
    ge = Entity.objects.get(project=project, key="general electric")
    assert ge.aliases == ["general electrics"]  # the real embedder: cosine 0.945
    assert set(ge.edges.values_list("memory_id", flat=True)) == {first.pk, second.pk}
    assert Entity.objects.filter(project=project, key="apex logistics").exists()
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "ENTITY_RESOLUTION_SIMILARITY": 0}
    fourth = write(store, "General Electrical hired Dina.")
    entities_extract_memories(memory_ids=[fourth.pk], extractor=_Named())
    assert Entity.objects.filter(project=project, key="general electrical").exists()  # by key only


def test_an_organisations_legal_form_is_not_part_of_its_key(project: Any) -> None:
    store = MemoryStoreFactory(project=project)
    memories = [write(store, f"{name} hired {who}.") for name, who in
                (("Acme Corp", "Ana"), ("Acme Corporation", "Bruno"), ("Acme, Inc.", "Carla"))]
    entities_extract_memories(memory_ids=[m.pk for m in memories], extractor=_Named())
    acme = Entity.objects.get(project=project, key="acme")
    assert acme.name == "Acme Corp"  # as first written
    assert set(acme.edges.values_list("memory_id", flat=True)) == {m.pk for m in memories}
