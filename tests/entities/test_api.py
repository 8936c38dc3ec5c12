"""The entity graph over HTTP: list, detail, merge, and search narrowed by entities, each seen
through the access policy."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from memory_engine.exceptions import ValidationFailed
from memory_engine.models import Entity, EntityEdge
from memory_engine.selectors.search import SearchRequest, knowledge_search
from memory_engine.services.documents import document_create_text, document_ingest
from memory_engine.services.entities import entities_extract_documents, entities_extract_memories
from memory_engine.services.memories import memory_write
from tests.access.helpers import ALL, keyed, tag
from tests.factories import MemoryStoreFactory
from tests.hardening.world import nonexistent_id

pytestmark = pytest.mark.django_db


def write(store: Any, text: str) -> str:
    return memory_write(store=store, content=text, principal="test").memory.pk


@pytest.fixture
def graph(project: Any) -> dict[str, Any]:
    """Team a and team b of one project: Lisbon is mentioned by both, Marco by team a only,
    Fatima by team b only; a document of team a names Porto."""
    store_a = MemoryStoreFactory(project=project, name="store-a")
    store_b = MemoryStoreFactory(project=project, name="store-b")
    tag(store_a, "team:a")
    tag(store_b, "team:b")
    ids = {
        "marco": write(store_a, "Marco is allergic to shellfish."),
        "a_lisbon": write(store_a, "Marco moved to Lisbon in May 2021."),
        "b_lisbon": write(store_b, "Fatima works in Lisbon on Fridays."),
    }
    document = document_create_text(project=project, content="# Offices\n\nThe Porto office opens at eight.\n",
                                    content_type="text/markdown", path="/a/offices.md", enqueue=False)
    tag(document, "team:a")
    document_ingest(document_id=document.pk)
    entities_extract_memories()
    entities_extract_documents()
    entity = {key: Entity.objects.get(project=project, key=key).pk for key in ("marco", "lisbon", "fatima", "porto")}
    client_a, _ = keyed(project, [{"pattern": "team:a", "actions": ALL}])
    return {"memories": ids, "entity": entity, "document": document, "a": client_a, "store_a": store_a}


def test_list_filters_by_name_and_kind_and_by_grants(client: Any, graph: dict[str, Any]) -> None:
    listed = client.get("/api/v1/entities").json()
    assert {e["name"] for e in listed["results"]} >= {"Marco", "Lisbon", "Fatima", "Porto"}
    found = client.get("/api/v1/entities", {"q": "lis"}).json()["results"]
    assert [e["name"] for e in found] == ["Lisbon"]
    people = {e["name"] for e in client.get("/api/v1/entities", {"kind": "person"}).json()["results"]}
    assert "Marco" in people and "Lisbon" not in people
    bad = client.get("/api/v1/entities", {"kind": "planet"})
    assert bad.status_code == 400 and bad.json()["code"]
    seen_by_a = {e["name"] for e in graph["a"].get("/api/v1/entities").json()["results"]}
    assert "Fatima" not in seen_by_a and {"Marco", "Lisbon", "Porto"} <= seen_by_a


def test_detail_shows_edges_memories_and_chunks_the_caller_may_see(client: Any, graph: dict[str, Any]) -> None:
    lisbon = graph["entity"]["lisbon"]
    detail = client.get(f"/api/v1/entities/{lisbon}").json()
    assert {m["id"] for m in detail["memories"]} == {graph["memories"]["a_lisbon"], graph["memories"]["b_lisbon"]}
    assert {(e["relation"], e["memory_id"]) for e in detail["edges"] if e["entity_id"] == lisbon} == {
        ("mentions", graph["memories"]["a_lisbon"]), ("mentions", graph["memories"]["b_lisbon"])}
    assert any(e["relation"] == "involves" and e["other_id"] == lisbon and e["entity_name"] == "Marco"
               for e in detail["edges"])
    narrowed = graph["a"].get(f"/api/v1/entities/{lisbon}").json()
    assert [m["id"] for m in narrowed["memories"]] == [graph["memories"]["a_lisbon"]]
    assert "Fatima" not in repr(narrowed)
    porto = client.get(f"/api/v1/entities/{graph['entity']['porto']}").json()
    assert [c["document_path"] for c in porto["chunks"]] == ["/a/offices.md"]


def test_an_entity_out_of_reach_answers_like_none(client: Any, other_client: Any, graph: dict[str, Any]) -> None:
    fatima = graph["entity"]["fatima"]
    unknown = nonexistent_id(fatima)
    hidden = graph["a"].get(f"/api/v1/entities/{fatima}")
    missing = graph["a"].get(f"/api/v1/entities/{unknown}")
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json()["code"] == "ENTITY_NOT_FOUND"
    assert hidden.content.decode().replace(fatima, "X") == missing.content.decode().replace(unknown, "X")
    assert other_client.get(f"/api/v1/entities/{fatima}").status_code == 404  # another project


def test_merge(client: Any, readonly_client: Any, graph: dict[str, Any]) -> None:
    marco, porto = graph["entity"]["marco"], graph["entity"]["porto"]
    refused = readonly_client.post(f"/api/v1/entities/{marco}/merge", {"entity_ids": [porto]}, format="json")
    assert refused.status_code == 403 and refused.json()["code"] == "READ_ONLY_KEY"
    itself = client.post(f"/api/v1/entities/{marco}/merge", {"entity_ids": [marco]}, format="json")
    assert itself.status_code == 400 and itself.json()["code"] == "ENTITY_MERGE_INVALID"
    unknown = client.post(f"/api/v1/entities/{marco}/merge", {"entity_ids": [porto], "why": "x"}, format="json")
    assert unknown.status_code == 400  # unknown fields are refused
    hidden = graph["a"].post(f"/api/v1/entities/{marco}/merge", {"entity_ids": [graph["entity"]["fatima"]]},
                             format="json")
    assert hidden.status_code == 404 and hidden.json()["code"] == "ENTITY_NOT_FOUND"
    merged = client.post(f"/api/v1/entities/{marco}/merge", {"entity_ids": [porto]}, format="json")
    assert merged.status_code == 200, merged.content
    assert merged.json()["aliases"] == ["porto"]
    assert not Entity.objects.filter(pk=porto).exists()
    detail = client.get(f"/api/v1/entities/{marco}").json()
    assert [c["document_path"] for c in detail["chunks"]] == ["/a/offices.md"]


def test_search_narrows_by_entities_and_names_each_hits_entities(client: Any, graph: dict[str, Any]) -> None:
    lisbon, marco = graph["entity"]["lisbon"], graph["entity"]["marco"]
    answer = client.post("/api/v1/knowledge/search", {"query": "Who lives where?", "entity_ids": [lisbon]},
                         format="json").json()
    assert {hit["id"] for hit in answer["results"]} == {graph["memories"]["a_lisbon"], graph["memories"]["b_lisbon"]}
    first = next(hit for hit in answer["results"] if hit["id"] == graph["memories"]["a_lisbon"])
    assert set(first["entity_ids"]) >= {lisbon, marco}
    narrowed = graph["a"].post("/api/v1/knowledge/search", {"query": "Lisbon", "entity_ids": [lisbon]},
                               format="json").json()
    assert [hit["id"] for hit in narrowed["results"]] == [graph["memories"]["a_lisbon"]]
    hidden = graph["a"].post("/api/v1/knowledge/search", {"query": "x", "entity_ids": [graph["entity"]["fatima"]]},
                             format="json")
    assert hidden.status_code == 400 and hidden.json()["code"] == "UNKNOWN_SCOPE"
    listing = client.post("/api/v1/knowledge/search", {"entity_ids": [graph["entity"]["porto"]]}, format="json")
    assert [hit["document_path"] for hit in listing.json()["results"]] == ["/a/offices.md"]
    stores = client.post("/api/v1/knowledge/search", {"query": "shellfish", "entity_ids": [marco],
                                                      "memory_store_ids": [graph["store_a"].pk]}, format="json")
    assert {hit["id"] for hit in stores.json()["results"]} == {graph["memories"]["marco"],
                                                              graph["memories"]["a_lisbon"]}


def _places(project: Any) -> set[str]:
    return set(Entity.objects.filter(project=project, kind="place").values_list("pk", flat=True))


def test_search_narrows_by_entity_kinds(client: Any, project: Any, graph: dict[str, Any]) -> None:
    memories, places = graph["memories"], _places(project)
    answer = client.post("/api/v1/knowledge/search", {"query": "Who lives where?", "kinds": ["place"]},
                         format="json").json()
    hits = answer["results"]
    # alone, kinds searches every store and document: Lisbon's two memories and Porto's chunk
    assert {hit["id"] for hit in hits if hit["source"] == "memory"} == {memories["a_lisbon"], memories["b_lisbon"]}
    assert [hit["document_path"] for hit in hits if hit["source"] == "document"] == ["/a/offices.md"]
    assert all(set(hit["entity_ids"]) & places for hit in hits)
    listing = client.post("/api/v1/knowledge/search", {"kinds": ["place", "product"]}, format="json").json()
    assert {hit["id"] for hit in listing["results"]} == {hit["id"] for hit in hits}
    people = client.post("/api/v1/knowledge/search", {"query": "shellfish", "kinds": ["person"]},
                         format="json").json()
    assert {hit["id"] for hit in people["results"]} == set(memories.values())


def test_search_kinds_with_entity_ids_both_hold(client: Any, graph: dict[str, Any]) -> None:
    marco, lisbon = graph["entity"]["marco"], graph["entity"]["lisbon"]
    both = client.post("/api/v1/knowledge/search", {"query": "Marco", "entity_ids": [marco], "kinds": ["place"]},
                       format="json").json()
    assert [hit["id"] for hit in both["results"]] == [graph["memories"]["a_lisbon"]]
    none = client.post("/api/v1/knowledge/search", {"query": "Lisbon", "entity_ids": [lisbon], "kinds": ["product"]},
                       format="json").json()
    assert none["results"] == []


def test_search_kinds_counts_valid_edges_only(client: Any, graph: dict[str, Any]) -> None:
    a_lisbon = graph["memories"]["a_lisbon"]
    EntityEdge.objects.filter(memory_id=a_lisbon, entity__kind="place").update(invalid_at=timezone.now())
    answer = client.post("/api/v1/knowledge/search", {"query": "Lisbon", "kinds": ["place"]}, format="json").json()
    assert {hit["id"] for hit in answer["results"] if hit["source"] == "memory"} == {graph["memories"]["b_lisbon"]}


def test_search_kinds_refuses_another_kind(client: Any, project: Any, graph: dict[str, Any]) -> None:
    refused = client.post("/api/v1/knowledge/search", {"query": "Lisbon", "kinds": ["place", "planet"]},
                          format="json")
    assert refused.status_code == 400
    body = refused.json()
    assert body["code"] == "VALIDATION_ERROR" and "kinds" in body["details"]["fields"]
    with pytest.raises(ValidationFailed) as raised:  # the Python service checks the same
        knowledge_search(SearchRequest(project=project, query="Lisbon", kinds=["planet"]))
    assert raised.value.details == {"field": "kinds"}


def test_search_kinds_keeps_to_the_grants(graph: dict[str, Any]) -> None:
    memories = graph["memories"]
    people = graph["a"].post("/api/v1/knowledge/search", {"query": "Fatima", "kinds": ["person"]},
                             format="json").json()
    assert {hit["id"] for hit in people["results"]} == {memories["marco"], memories["a_lisbon"]}
    places = graph["a"].post("/api/v1/knowledge/search", {"kinds": ["place"]}, format="json").json()
    assert memories["b_lisbon"] not in {hit["id"] for hit in places["results"]}
    assert "Fatima" not in repr(people) + repr(places)
