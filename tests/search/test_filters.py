"""knowledge_search filters that combine (tags with store ids or document paths narrow each
other, docs/retrieval.md) and memories a supersede retired (real MiniLM)."""

from __future__ import annotations

import pytest

from memory_engine.selectors.search import SearchRequest, knowledge_search
from memory_engine.services.memories import memory_write
from tests.factories import MemoryStoreFactory

from .helpers import make_document, write

pytestmark = pytest.mark.django_db

TEAM_A = {"team": "a"}


@pytest.fixture
def deploy_notes(project):
    """Two stores and three documents, each memory and document tagged team a or b."""
    first, second = MemoryStoreFactory(project=project), MemoryStoreFactory(project=project)
    rows = {
        "first-a": write(first, "Deploys happen on Tuesdays.", tags=TEAM_A),
        "first-b": write(first, "Deploys need two approvals.", tags={"team": "b"}),
        "second-a": write(second, "Deploys are frozen in December.", tags=TEAM_A),
        "/a/": make_document(project, "/a/deploy.txt", ["Deploy checklist for team A."], tags=TEAM_A),
        "/b/": make_document(project, "/b/deploy.txt", ["Deploy checklist for team B."], tags={"team": "b"}),
        "/c/": make_document(project, "/c/deploy.txt", ["Deploy rollback steps for team A."], tags=TEAM_A),
    }
    return first, second, rows


def found(result) -> set[str]:
    return {hit.id if hit.source == "memory" else hit.document_path for hit in result.results}


def test_tags_with_store_ids_narrow_the_memories_to_those_stores(project, deploy_notes):
    first, _, rows = deploy_notes
    tagged = knowledge_search(SearchRequest(project=project, query="deploys", tags=TEAM_A))
    assert found(tagged) == {rows["first-a"].pk, rows["second-a"].pk, "/a/deploy.txt", "/c/deploy.txt"}
    stored = knowledge_search(SearchRequest(project=project, query="deploys", memory_store_ids=[first.pk]))
    assert found(stored) == {rows["first-a"].pk, rows["first-b"].pk}
    both = knowledge_search(SearchRequest(project=project, query="deploys", memory_store_ids=[first.pk], tags=TEAM_A))
    # memories: the named store's tagged ones only; documents: the tagged ones (no path named)
    assert found(both) == {rows["first-a"].pk, "/a/deploy.txt", "/c/deploy.txt"}


def test_tags_with_document_paths_narrow_the_documents_to_those_prefixes(project, deploy_notes):
    _, _, rows = deploy_notes
    by_path = knowledge_search(SearchRequest(project=project, query="deploy", document_paths=["/a/", "/b/"]))
    assert found(by_path) == {"/a/deploy.txt", "/b/deploy.txt"}
    both = knowledge_search(SearchRequest(project=project, query="deploy", document_paths=["/a/", "/b/"], tags=TEAM_A))
    # documents: under the prefixes and tagged; memories: every store's tagged ones
    assert found(both) == {"/a/deploy.txt", rows["first-a"].pk, rows["second-a"].pk}
    by_id = knowledge_search(SearchRequest(project=project, query="deploy", document_ids=[rows["/b/"].pk], tags=TEAM_A))
    assert {hit.document_path for hit in by_id.results if hit.source == "document"} == set()


def test_superseded_memories_never_appear(project, store):
    city = {"kind": "profile", "key": "city"}
    old = memory_write(store=store, content="The user lives in Paris.", principal="test", about=city,
                       tags={"kind": "profile"})
    new = memory_write(store=store, content="The user moved to Berlin.", principal="test", about=city)
    assert new.action == "superseded" and new.memory.tags == {"kind": "profile"}
    # "Paris" matches the retired text on both channels; it must still not come back
    for query in ("Paris", "The user lives in Paris.", "where does the user live"):
        ids = [hit.id for hit in knowledge_search(SearchRequest(project=project, query=query,
                                                                memory_store_ids=[store.pk])).results]
        assert ids == [new.memory.pk], query
    tagged = knowledge_search(SearchRequest(project=project, query="Paris", tags={"kind": "profile"}))
    assert [hit.id for hit in tagged.results] == [new.memory.pk]
    assert [hit.id for hit in knowledge_search(SearchRequest(project=project,
                                                             memory_store_ids=[store.pk])).results] == [
        new.memory.pk]
    assert old.memory.pk != new.memory.pk
