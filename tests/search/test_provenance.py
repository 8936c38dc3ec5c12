"""Search hits say where they come from (a memory's provenance and lineage, a chunk's version's)
and the search keeps only the provenances and lineages asked for (docs/memory.md)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import MemoryStoreFactory

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("hashing_embedder")]
SEARCH = "/api/v1/knowledge/search"


def test_hits_carry_provenance_and_lineage_and_the_search_filters_on_them(client: Any, project: Any) -> None:
    store = MemoryStoreFactory(project=project)
    for content, provenance, lineage in (("The ferry leaves at nine.", "stated", "native"),
                                         ("The ferry is often late.", "inferred", "derived"),
                                         ("The ferry takes bicycles.", "unknown", "imported")):
        made = client.post("/api/v1/memories", {"memory_store_id": store.pk, "content": content,
                                                "provenance": provenance, "lineage": lineage}, format="json")
        assert made.status_code == 201 and made.json()["provenance"] == provenance, made.content
    for path, provenance in (("/ferry/timetable.txt", "stated"), ("/ferry/rumours.txt", "inferred")):
        made = client.post("/api/v1/documents", {"content": f"Ferry notes from {path}.", "path": path,
                                                 "provenance": provenance, "wait": True}, format="json")
        assert made.status_code == 201, made.content

    def search(**filters: Any) -> list[tuple[str, str, str]]:
        answer = client.post(SEARCH, {"query": "ferry", "memory_store_ids": [store.pk], "document_paths": ["/ferry/"],
                                      "limit": 20, **filters}, format="json")
        assert answer.status_code == 200, answer.content
        return sorted((h["text"], h["provenance"], h["lineage"]) for h in answer.json()["results"])

    everything = search()
    assert ("The ferry is often late.", "inferred", "derived") in everything
    assert ("Ferry notes from /ferry/timetable.txt.", "stated", "native") in everything and len(everything) == 5
    assert search(provenance=["stated"]) == [("Ferry notes from /ferry/timetable.txt.", "stated", "native"),
                                             ("The ferry leaves at nine.", "stated", "native")]
    assert search(lineage=["derived", "imported"]) == [("The ferry is often late.", "inferred", "derived"),
                                                       ("The ferry takes bicycles.", "unknown", "imported")]
    assert search(provenance=["inferred"], lineage=["native"]) == [
        ("Ferry notes from /ferry/rumours.txt.", "inferred", "native")]
    refused = client.post(SEARCH, {"query": "ferry", "provenance": ["hearsay"]}, format="json")
    assert (refused.status_code, refused.json()["code"]) == (400, "VALIDATION_ERROR")
