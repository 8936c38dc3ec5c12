"""Recall across tiers (docs/memory.md, *Tiers and subjects*): an agent's turn fans out over the
subject's user store, the agent's own store and the institutional stores of its knowledge_config
in one statement; tier half-lives and precedence weigh the fused ranking; facets and expiry
filter inside the SQL (real MiniLM)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memory_engine.conf import engine_settings
from memory_engine.exceptions import FacetInvalid, SubjectInvalid
from memory_engine.models import Agent, Memory, MemoryStore
from memory_engine.policy import SYSTEM
from memory_engine.selectors.search import USER_FOR_AGENT, Actor, SearchRequest, knowledge_search
from memory_engine.services.agents import agent_create
from memory_engine.services.stores import subject_store_get_or_create
from tests.factories import MemoryStoreFactory

from .helpers import write

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("lexical_backend")]

TEA = "The customer drinks green tea every morning."


@pytest.fixture
def agent(project: Any, store: Any) -> Agent:
    """An agent whose knowledge_config names one institutional store (``store``)."""
    return agent_create(project=project, name="support", knowledge_config={"memory_store_ids": [store.pk]},
                        caller=SYSTEM)


def own_store(agent: Agent) -> MemoryStore:
    return MemoryStore.objects.get(tier="agent", agent=agent)


def user_store(project: Any, subject: str) -> MemoryStore:
    return subject_store_get_or_create(project=project, external_id=subject)[0]


def set_fields(memory: Memory, **fields: Any) -> Memory:
    """Lifecycle fields set directly (the write funnel's own tests cover how writes set them)."""
    Memory.objects.filter(pk=memory.pk).update(**fields)
    memory.refresh_from_db()
    return memory


def twin(memory: Memory, **fields: Any) -> Memory:
    """A second memory on the same content row: the same cosine and lexical score."""
    return Memory.objects.create(store=memory.store, content=memory.content, **fields)


def recall(project: Any, agent: Agent, query: str, subject: str | None = "alice", **kwargs: Any) -> list[Any]:
    kwargs.setdefault("memory_store_ids", agent.knowledge_config.get("memory_store_ids"))
    return knowledge_search(SearchRequest(project=project, query=query, actor=Actor(agent=agent, subject=subject),
                                          **kwargs)).results


def rrf(hit: Any, k: float) -> float:
    weights = {"vector": engine_settings.SEARCH_VECTOR_WEIGHT, "lexical": engine_settings.SEARCH_LEXICAL_WEIGHT}
    return sum(weights[channel] / (k + rank) for channel, rank in hit.ranks.items() if rank is not None)


def test_one_statement_recalls_all_three_tiers(project, store, agent, lexical_backend):
    institutional = write(store, "The customer's company pays invoices by bank transfer.")
    mine = write(own_store(agent), "Customers asking about invoices usually want the PDF copy.")
    theirs = write(user_store(project, "alice"), "The customer wants invoices sent to accounting@alice.example.")
    with CaptureQueriesContext(connection) as queries:
        hits = recall(project, agent, "how does the customer want invoices")
    assert {(h.id, h.tier) for h in hits} == {(institutional.pk, "institutional"), (mine.pk, "agent"),
                                              (theirs.pk, "user")}
    ranked = [q["sql"] for q in queries.captured_queries if "cand AS" in q["sql"]]
    assert len(ranked) == 1  # the fan-out is one ranked statement, not one per tier


def test_a_subject_never_sees_another_subjects_memories(project, store, agent):
    write(user_store(project, "alice"), "The customer's dog is called Rex.")
    bobs = write(user_store(project, "bob"), "The customer's dog is called Bello.")
    # Even a knowledge_config that names bob's store does not put it in alice's recall.
    named = [store.pk, bobs.store_id]
    for subject in ("alice", None):
        hits = recall(project, agent, "what is the customer's dog called", subject=subject, memory_store_ids=named)
        assert bobs.pk not in {h.id for h in hits}
    assert bobs.pk in {h.id for h in recall(project, agent, "what is the customer's dog called", subject="bob")}
    # Without an actor (an operator's search) the store is searched as named.
    plain = knowledge_search(SearchRequest(project=project, query="dog", memory_store_ids=[bobs.store_id])).results
    assert [h.id for h in plain] == [bobs.pk]


def test_a_subjects_memories_of_this_agent_are_user_for_agent(project, store, agent, settings):
    # three memories of one preference, all live: the third would be a new value of the second's
    # (VALUE_CHANGE_GATE) and supersede it
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "VALUE_CHANGE_GATE": False}
    other = agent_create(project=project, name="sales", caller=SYSTEM)
    alice = user_store(project, "alice")
    for_us = set_fields(write(alice, "The customer prefers phone calls."), agent=agent)
    for_them = set_fields(write(alice, "The customer prefers phone calls in the afternoon."), agent=other)
    untagged = write(alice, "The customer prefers phone calls on Mondays.")
    tiers = {h.id: h.tier for h in recall(project, agent, "how does the customer like to be contacted")}
    assert tiers == {for_us.pk: USER_FOR_AGENT, for_them.pk: "user", untagged.pk: "user"}
    tiers = {h.id: h.tier for h in recall(project, other, "how does the customer like to be contacted")}
    assert tiers[for_us.pk] == "user" and tiers[for_them.pk] == USER_FOR_AGENT


def test_user_tier_decays_with_its_half_life_institutional_does_not(project, store, agent):
    k = engine_settings.SEARCH_RRF_K
    old = timezone.now() - timedelta(days=60)
    fresh_user = write(user_store(project, "alice"), TEA)
    old_user = twin(fresh_user, created_at=old)
    fresh_inst = write(store, TEA)
    old_inst = twin(fresh_inst, created_at=old)
    hits = {h.id: h for h in recall(project, agent, "what does the customer drink in the morning", rrf_k=k)}
    user_days = engine_settings.TIER_HALF_LIFE_DAYS["user"]
    precedence = engine_settings.TIER_PRECEDENCE
    assert hits[old_user.pk].score == pytest.approx(rrf(hits[old_user.pk], k) * precedence["user"]
                                                    * 0.5 ** (60 / user_days), rel=1e-3)
    assert hits[fresh_user.pk].score == pytest.approx(rrf(hits[fresh_user.pk], k) * precedence["user"], rel=1e-3)
    for memory in (old_inst, fresh_inst):  # institutional: no half-life by default
        assert hits[memory.pk].score == pytest.approx(rrf(hits[memory.pk], k) * precedence["institutional"])
    order = list(hits)
    assert order.index(fresh_user.pk) < order.index(old_user.pk)


def test_precedence_puts_the_user_tier_first_and_keeps_order_within_a_tier(project, store, agent):
    user = write(user_store(project, "alice"), TEA)
    institutional = write(store, TEA)
    weaker = write(user_store(project, "alice"), "The customer sometimes has coffee after lunch.")
    # rrf_k=60: two equal matches differ by one rank (~1.6%), less than the user tier's precedence.
    hits = recall(project, agent, "what does the customer drink in the morning", rrf_k=60)
    ids = [h.id for h in hits]
    assert ids.index(user.pk) < ids.index(institutional.pk)
    assert ids.index(user.pk) < ids.index(weaker.pk)
    assert [h.id for h in hits if h.tier == "user"] == [
        h.id for h in knowledge_search(SearchRequest(project=project,
                                                     query="what does the customer drink in the morning",
                                                     memory_store_ids=[user.store_id], rrf_k=60)).results]


def test_a_stores_half_life_overrides_its_tiers(project, store, agent, client):
    k = engine_settings.SEARCH_RRF_K
    response = client.patch(f"/api/v1/memory-stores/{store.pk}", {"recency_half_life_days": 10}, format="json")
    assert response.status_code == 200 and response.json()["recency_half_life_days"] == 10
    alice = user_store(project, "alice")
    alice.recency_half_life_days = 0  # 0: this user store does not decay
    alice.save()
    inst = write(store, TEA)
    old_inst = twin(inst, created_at=timezone.now() - timedelta(days=20))
    user = write(alice, TEA)
    old_user = twin(user, created_at=timezone.now() - timedelta(days=300))
    hits = {h.id: h for h in recall(project, agent, "what does the customer drink in the morning")}
    assert hits[old_inst.pk].score == pytest.approx(rrf(hits[old_inst.pk], k) * 0.25, rel=1e-3)
    assert hits[old_user.pk].score == pytest.approx(rrf(hits[old_user.pk], k) * engine_settings.TIER_PRECEDENCE["user"])
    bad = client.patch(f"/api/v1/memory-stores/{store.pk}", {"recency_half_life_days": -1}, format="json")
    assert bad.status_code == 400 and bad.json()["code"] == "VALIDATION_ERROR"


def test_the_request_half_life_applies_where_no_tier_or_store_one_does(project, store):
    fresh = write(store, TEA)
    old = twin(fresh, created_at=timezone.now() - timedelta(days=5))
    hits = {h.id: h for h in knowledge_search(SearchRequest(project=project, query="green tea",
                                                            memory_store_ids=[store.pk],
                                                            recency_half_life_days=5)).results}
    k = engine_settings.SEARCH_RRF_K
    assert hits[old.pk].score == pytest.approx(rrf(hits[old.pk], k) * 0.5, rel=1e-3)


def test_a_facet_sees_its_own_and_cross_cutting_memories_in_every_tier(project, store, agent):
    alice = user_store(project, "alice")
    rows = {}
    for name, target in (("inst", store), ("agent", own_store(agent)), ("user", alice)):
        for facet in ("billing", "shipping", None):
            memory = write(target, f"The customer's {facet or 'general'} note from {name}: pays on time.")
            rows[(name, facet)] = set_fields(memory, facet=facet)
    query = "what do we know about the customer paying"
    seen = {h.id for h in recall(project, agent, query, facet="billing", limit=20)}
    assert seen == {rows[(n, f)].pk for n in ("inst", "agent", "user") for f in ("billing", None)}
    everything = {h.id for h in recall(project, agent, query, limit=20)}
    assert everything == {m.pk for m in rows.values()}
    # The ordered read (no query) filters the same way.
    listed = knowledge_search(SearchRequest(project=project, memory_store_ids=[store.pk], facet="shipping",
                                            limit=20)).results
    assert {h.id for h in listed} == {rows[("inst", "shipping")].pk, rows[("inst", None)].pk}
    with pytest.raises(FacetInvalid):
        recall(project, agent, query, facet="no spaces allowed")


def test_expired_memories_are_never_recalled(project, store, agent):
    gone = set_fields(write(store, TEA), expires_at=timezone.now() - timedelta(hours=1))
    later = set_fields(write(store, "The customer drinks green tea every evening."),
                       expires_at=timezone.now() + timedelta(days=1))
    for results in (recall(project, agent, "green tea"),
                    knowledge_search(SearchRequest(project=project, query="green tea",
                                                   memory_store_ids=[store.pk])).results,
                    knowledge_search(SearchRequest(project=project, memory_store_ids=[store.pk])).results):
        ids = {h.id for h in results}
        assert gone.pk not in ids and later.pk in ids


def test_a_bad_subject_is_refused(project, agent):
    for subject in ("", "x" * 201, " padded"):
        with pytest.raises(SubjectInvalid):
            recall(project, agent, "anything", subject=subject)


def test_an_agent_without_its_own_store_still_recalls(project, store):
    legacy = Agent.objects.create(project=project, name="legacy", knowledge_config={"memory_store_ids": [store.pk]})
    memory = write(store, TEA)
    assert [h.id for h in recall(project, legacy, "green tea")] == [memory.pk]


def test_an_agent_with_an_empty_config_still_searches_documents(project):
    from .helpers import make_document

    empty = agent_create(project=project, name="docs-only", caller=SYSTEM)
    document = make_document(project, "/handbook/tea.txt", ["The office kitchen stocks green tea."])
    write(own_store(empty), "The office manager orders tea on Fridays.")
    hits = recall(project, empty, "green tea in the kitchen", subject=None)
    assert {h.source for h in hits} == {"document", "memory"}
    assert document.chunks.get().pk in {h.id for h in hits}


def test_another_projects_stores_stay_out(project, other_project, agent):
    foreign = MemoryStoreFactory(project=other_project, tier="user", subject_external_id="alice")
    write(foreign, TEA)
    assert recall(project, agent, "green tea") == []
