"""Corroboration (docs/retrieval.md, *Ranking stage two*): evidence links between memories and
document versions, their API, and the bounded boost they give a search hit (real PostgreSQL,
real MiniLM)."""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.test import APIClient

from memory_engine.models import Document, EvidenceLink, Memory
from memory_engine.selectors.search import SearchRequest, knowledge_search
from memory_engine.selectors.search.boosts import BOOST_MAX, BOOST_MIN, apply_boosts, corroboration_boost
from memory_engine.services.keys import api_key_create
from memory_engine.services.links import evidence_link_create
from memory_engine.services.memory_lifecycle import memory_forget
from tests.conftest import api_client
from tests.factories import MemoryStoreFactory

from .helpers import write
from .test_ranking_boosts import engine, hit, knobs, scores, versioned_document

pytestmark = [pytest.mark.django_db]
LINKS = "/api/v1/links"


def document(project: Any, path: str, text: str) -> Document:
    return Document.objects.select_related("active_version").get(pk=versioned_document(project, path, text).pk)


def link(project: Any, kind: str, source: Any, target: Any) -> EvidenceLink:
    return evidence_link_create(project=project, kind=kind, source=source, target=target, created_by="test")


# --- the boost alone ---------------------------------------------------------------------------


def test_corroboration_boost_is_capped_and_clamped():
    on = {"support": 0.1, "contradict": 0.1, "cap": 3}
    assert corroboration_boost((0, 0), **on) == 1.0
    assert corroboration_boost((2, 0), **on) == pytest.approx(1.2)
    assert corroboration_boost((0, 2), **on) == pytest.approx(0.8)
    assert corroboration_boost((50, 0), **on) == pytest.approx(BOOST_MAX)  # min(N, cap): 3 count
    assert corroboration_boost((0, 50), **on) == pytest.approx(BOOST_MIN)
    assert corroboration_boost((50, 0), support=5.0, contradict=0.0, cap=100) == BOOST_MAX
    assert corroboration_boost((0, 50), support=0.0, contradict=5.0, cap=100) == BOOST_MIN
    assert corroboration_boost((3, 3), **on) == pytest.approx(1.3 * 0.7)


def test_a_supported_weak_hit_rises_but_never_over_a_hit_more_than_the_clamp_stronger():
    now = timezone.now()
    ratio = BOOST_MAX / BOOST_MIN
    for support, contradict, weak_links, strong_links in itertools.product(
            (0.05, 0.1, 10.0), (0.05, 0.1, 10.0), ((0, 0), (1, 0), (100, 0)), ((0, 0), (0, 1), (0, 100))):
        strong, weak = hit("strong", 1.0), hit("weak", 1.0 / ratio - 1e-9)
        ranked = apply_boosts([weak, strong], {}, now=now, half_life_days=30,
                              knobs=knobs(corroboration_support=support, corroboration_contradict=contradict,
                                          boosts=True, authority_weight=1.0),
                              corroboration={("document", "weak"): weak_links, ("document", "strong"): strong_links})
        assert [h.id for h in ranked] == ["strong", "weak"]
    # Inside the clamp a supported hit does rise over a stronger unlinked one, and a contradicted one sinks.
    strong, weak = hit("strong", 1.0), hit("weak", 0.9)
    on = knobs(corroboration_support=0.1, corroboration_contradict=0.1)
    ranked = apply_boosts([strong, weak], {}, knobs=on, half_life_days=30, now=now,
                          corroboration={("document", "weak"): (2, 0)})
    assert [h.id for h in ranked] == ["weak", "strong"]
    strong, weak = hit("strong", 1.0), hit("weak", 0.9)
    ranked = apply_boosts([strong, weak], {}, knobs=on, half_life_days=30, now=now,
                          corroboration={("document", "strong"): (0, 2)})
    assert [h.id for h in ranked] == ["weak", "strong"]


# --- in the search -----------------------------------------------------------------------------


@pytest.fixture
def evidence(project: Any, store: Any) -> dict[str, Any]:
    """Two hits about the office hours (a memory and a document), and evidence memories in
    another store of the project (outside the searched scope)."""
    elsewhere = MemoryStoreFactory(project=project)
    return {
        "memory": write(store, "The office opens at eight in the morning on weekdays."),
        "document": document(project, "/hours/office.txt", "Office hours: weekdays from 8:00 to 17:00."),
        "witnesses": [write(elsewhere, text) for text in (
            "I saw the office open at eight this morning.", "The front desk starts at eight sharp.",
            "Doors were unlocked at 8am on Monday.", "The office was still closed at half past eight.")],
    }


def search_scores(project: Any, store: Any) -> dict[str, float]:
    return scores(knowledge_search(SearchRequest(project=project, query="when does the office open",
                                                 memory_store_ids=[store.pk],
                                                 document_paths=["/hours/"])))


@pytest.mark.usefixtures("lexical_backend")
def test_supported_hits_rise_and_contradicted_sink_by_the_bounded_factor(project, store, settings, evidence):
    memory, version = evidence["memory"], evidence["document"].active_version
    a, b, c, d = evidence["witnesses"]
    for witness in (a, b):
        link(project, "supports", witness, memory)
    link(project, "contradicts", d, version)
    link(project, "supports", version, memory)  # a live document version counts too: 3 supports
    before = search_scores(project, store)
    assert search_scores(project, store) == before  # off by default: links change nothing
    engine(settings, SEARCH_CORROBORATION_SUPPORT=0.05, SEARCH_CORROBORATION_CONTRADICT=0.2,
           SEARCH_CORROBORATION_CAP=3)
    after = search_scores(project, store)
    assert after[memory.pk] == pytest.approx(before[memory.pk] * 1.15)
    assert after["/hours/office.txt"] == pytest.approx(before["/hours/office.txt"] * 0.8)  # through its version


@pytest.mark.usefixtures("lexical_backend")
def test_links_from_forgotten_erased_expired_or_retired_items_do_not_count(project, store, settings, evidence):
    memory = evidence["memory"]
    a, b, c, d = evidence["witnesses"]
    for witness in (a, b, c):
        link(project, "supports", witness, memory)
    other = document(project, "/other/memo.txt", "The office opens at eight.")
    link(project, "supports", other.active_version, memory)
    before = search_scores(project, store)
    engine(settings, SEARCH_CORROBORATION_SUPPORT=0.05, SEARCH_CORROBORATION_CAP=10)
    assert search_scores(project, store)[memory.pk] == pytest.approx(before[memory.pk] * 1.2)
    memory_forget(memory=a, principal="test")  # forgotten: deleted or in the trash
    Memory.objects.filter(pk=b.pk).delete()  # erased / purged: the link goes with it
    # (a day ago: the test's transaction pins PostgreSQL's now() to its start)
    Memory.objects.filter(pk=c.pk).update(expires_at=timezone.now() - timedelta(days=1))
    Document.objects.filter(pk=other.pk).update(forgotten_at=timezone.now())
    assert search_scores(project, store)[memory.pk] == pytest.approx(before[memory.pk])
    assert not EvidenceLink.objects.filter(source_memory_id=b.pk).exists()


# --- the API -----------------------------------------------------------------------------------


def post(client: APIClient, source: Any, target: Any, kind: str = "supports") -> Any:
    return client.post(LINKS, {"kind": kind, "source_id": source, "target_id": target}, format="json")


def test_links_api_create_list_delete(client, project, store):
    claim, witness = write(store, "The office opens at eight."), write(store, "It opened at eight today.")
    version = document(project, "/hours/office.txt", "Office hours start at 8:00.").active_version
    created = post(client, witness.pk, claim.pk)
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["id"].startswith("lnk_") and body["kind"] == "supports"
    assert (body["source_id"], body["target_id"]) == (witness.pk, claim.pk) and body["created_by"]
    assert post(client, version.pk, claim.pk, "contradicts").status_code == 201  # mixed ends
    assert post(client, witness.pk, claim.pk).json()["code"] == "LINK_EXISTS"
    listed = client.get(LINKS).json()["results"]
    assert {(row["source_id"], row["kind"]) for row in listed} == {(witness.pk, "supports"),
                                                                    (version.pk, "contradicts")}
    assert [row["kind"] for row in client.get(LINKS, {"kind": "contradicts"}).json()["results"]] == ["contradicts"]
    assert client.get(f"{LINKS}/{body['id']}").json()["target_id"] == claim.pk
    assert client.delete(f"{LINKS}/{body['id']}").status_code == 204
    assert client.get(f"{LINKS}/{body['id']}").json()["code"] == "LINK_NOT_FOUND"


def test_links_api_refuses_bad_ends_and_other_projects(client, other_client, project, other_project, store):
    claim, witness = write(store, "The office opens at eight."), write(store, "It opened at eight today.")
    theirs = write(MemoryStoreFactory(project=other_project), "The office opens at nine.")
    cross = post(client, theirs.pk, claim.pk)
    assert (cross.status_code, cross.json()["code"], cross.json()["details"]["field"]) == (
        404, "LINK_END_NOT_FOUND", "source_id")
    assert post(other_client, theirs.pk, claim.pk).json()["details"]["field"] == "target_id"
    for source, target, kind, field in ((witness.pk, claim.pk, "agrees", "kind"), ("doc_1", claim.pk, "supports",
                                        "source_id"), (claim.pk, claim.pk, "supports", "target_id")):
        refused = post(client, source, target, kind)
        assert (refused.status_code, refused.json()["code"], refused.json()["details"]["field"]) == (
            400, "LINK_INVALID", field)
    link_id = link(project, "supports", witness, claim).pk
    assert other_client.get(f"{LINKS}/{link_id}").status_code == 404
    assert other_client.delete(f"{LINKS}/{link_id}").json()["code"] == "LINK_NOT_FOUND"
    assert not EvidenceLink.objects.exclude(pk=link_id).exists()


def test_links_api_needs_add_grants_and_a_writing_caller(project, readonly_client):
    tagged = MemoryStoreFactory(project=project)
    type(tagged).objects.filter(pk=tagged.pk).update(access_tags=["team:a"])
    claim, witness = write(tagged, "The office opens at eight."), write(tagged, "It opened at eight today.")
    reader = api_client(api_key_create(project=project, grants=[{"pattern": "team:a", "actions": ["search"]}])[1])
    writer = api_client(api_key_create(project=project, grants=[{"pattern": "team:a", "actions": ["add"]}])[1])
    assert post(reader, witness.pk, claim.pk).json()["code"] == "GRANT_REQUIRED"
    hidden = write(MemoryStoreFactory(project=project), "The office opens at nine.")  # untagged: unseen by them
    unseen = post(writer, hidden.pk, claim.pk)
    assert (unseen.status_code, unseen.json()["code"]) == (404, "LINK_END_NOT_FOUND")
    assert post(readonly_client, witness.pk, claim.pk).json()["code"] == "READ_ONLY_KEY"
    created = post(writer, witness.pk, claim.pk)
    assert created.status_code == 201
    assert reader.get(LINKS).json()["results"][0]["id"] == created.json()["id"]  # listed: both ends searchable
    assert reader.delete(f"{LINKS}/{created.json()['id']}").json()["code"] == "GRANT_REQUIRED"
    staff = APIClient()
    staff.force_authenticate(user=User.objects.create_superuser("root", "root@example.com", "pw"))
    staff.credentials(HTTP_X_PROJECT_ID=project.pk)
    assert post(staff, claim.pk, witness.pk, "contradicts").status_code == 201
    assert len(staff.get(LINKS).json()["results"]) == 2
