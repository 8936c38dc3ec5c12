"""Ranking stage two: evidence grades, per-document dedupe, MMR, the degraded vocabulary and the
capabilities endpoint (real PostgreSQL, real MiniLM, both lexical backends)."""

from __future__ import annotations

from typing import Any

import pytest

from memory_engine.injection import WEAK_EVIDENCE_NOTE, inject_knowledge
from memory_engine.policy import SYSTEM
from memory_engine.selectors.search import Degraded, SearchHit, SearchRequest, knowledge_search
from memory_engine.selectors.search.stages import mmr
from tests.conftest import api_client
from tests.factories import AgentFactory, make_key

from .helpers import FILLER, make_document, write

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("lexical_backend")]

LEAVE = ["Employees accrue 25 days of paid vacation per year.",
         "Paid vacation days carry over into the next year up to 5 days.",
         "Unused paid vacation is paid out when employees leave."]
OFFICE = ["The office is closed on public holidays.", "The office opens at 8 am on weekdays."]
EXPENSES = ["Expense reports must be filed within 30 days.", "Receipts are required for every expense."]


def strong_bar(settings: Any, value: float) -> None:
    settings.MEMORY_ENGINE = {**(getattr(settings, "MEMORY_ENGINE", None) or {}), "EVIDENCE_STRONG_RELEVANCE": value}


# --- evidence ----------------------------------------------------------------------------------


def test_evidence_none_without_hits(project, store):
    result = knowledge_search(SearchRequest(project=project, query="paid vacation", memory_store_ids=[store.pk]))
    assert result.results == [] and result.evidence == "none"


def test_evidence_strong_needs_the_first_relevant_hit_above_the_bar(project, settings):
    make_document(project, "/handbook/leave.txt", LEAVE)
    strong_bar(settings, 0.01)
    assert knowledge_search(SearchRequest(project=project, query="paid vacation days")).evidence == "strong"
    strong_bar(settings, 1.0)  # the same hits, the first relevant one now under the bar
    result = knowledge_search(SearchRequest(project=project, query="paid vacation days"))
    assert result.results and result.results[0].relevant
    assert result.evidence == "weak"


def test_evidence_is_never_strong_from_the_vector_channel_alone(project, settings):
    make_document(project, "/handbook/leave.txt", LEAVE)
    make_document(project, "/misc/filler.txt", FILLER)  # more chunks than the limit: the channel ranks
    # No word in common with the passages: the vector channel finds them, the lexical one does not;
    # without lexical evidence the built-in model's relevance stays under 0.7, below the strong bar.
    result = knowledge_search(SearchRequest(project=project, query="holiday allowance for staff"))
    assert result.results and all(h.lexical_score is None for h in result.results)
    assert {h.text for h in result.results[:len(LEAVE)]} == set(LEAVE)
    assert result.evidence == "weak"
    only_vector = knowledge_search(SearchRequest(project=project, query="paid vacation days", channels=("vector",)))
    assert {h.text for h in only_vector.results[:len(LEAVE)]} == set(LEAVE) and only_vector.evidence == "weak"


def test_weak_evidence_is_said_in_the_knowledge_block(project, settings):
    make_document(project, "/handbook/leave.txt", LEAVE)
    agent = AgentFactory(project=project, knowledge_config={"document_paths": ["/handbook/"]})
    messages = [{"role": "user", "content": "holiday allowance for staff"}]
    strong_bar(settings, 1.0)
    injected, result = inject_knowledge(messages, agent=agent, caller=SYSTEM)
    assert result.evidence == "weak" and WEAK_EVIDENCE_NOTE in injected[0]["content"]
    strong_bar(settings, 0.0)
    injected, result = inject_knowledge([{"role": "user", "content": "paid vacation days"}], agent=agent, caller=SYSTEM)
    assert result.evidence == "strong" and WEAK_EVIDENCE_NOTE not in injected[0]["content"]


def test_evidence_in_the_search_tool_and_context_answers(client, project, settings):
    make_document(project, "/handbook/leave.txt", LEAVE)
    strong_bar(settings, 1.0)
    agent = AgentFactory(project=project, knowledge_config={"document_paths": ["/handbook/"]})
    tool = client.post(f"/api/v1/agents/{agent.pk}/tools/search_knowledge", {"query": "paid vacation"},
                       format="json").json()
    assert tool["knowledge"]["evidence"] == "weak" and WEAK_EVIDENCE_NOTE in tool["content"]
    context = client.post(f"/api/v1/agents/{agent.pk}/context",
                          {"messages": [{"role": "user", "content": "paid vacation"}]}, format="json").json()
    assert context["knowledge"]["evidence"] == "weak"
    search = client.post("/api/v1/knowledge/search", {"query": "zzzq", "min_similarity": 0.99},
                         format="json").json()
    assert search["evidence"] == "none"


# --- per-document dedupe -------------------------------------------------------------------------


def test_dedupe_keeps_the_best_chunk_of_each_document_and_honours_limit(project, client):
    leave = make_document(project, "/handbook/leave.txt", LEAVE)
    make_document(project, "/handbook/office.txt", OFFICE)
    make_document(project, "/handbook/expenses.txt", EXPENSES)
    plain = knowledge_search(SearchRequest(project=project, query="paid vacation days per year", limit=10))
    assert [h.document_id for h in plain.results].count(leave.pk) == 3
    deduped = knowledge_search(SearchRequest(project=project, query="paid vacation days per year", limit=10,
                                             dedupe_documents=True))
    ids = [h.document_id for h in deduped.results]
    assert len(ids) == len(set(ids)) == 3
    assert deduped.results[0].id == plain.results[0].id  # the document's best chunk stands for it
    assert len(knowledge_search(SearchRequest(project=project, query="paid vacation", limit=2,
                                              dedupe_documents=True)).results) == 2
    body = client.post("/api/v1/knowledge/search", {"query": "paid vacation days", "dedupe_documents": True},
                       format="json").json()
    assert len({h["document_id"] for h in body["results"]}) == len(body["results"]) == 3


def test_dedupe_setting_is_the_default_and_memories_are_kept(project, store, settings):
    make_document(project, "/handbook/leave.txt", LEAVE)
    write(store, "The user takes paid vacation in August.")
    write(store, "The user's paid vacation is 25 days.")
    settings.MEMORY_ENGINE = {**(getattr(settings, "MEMORY_ENGINE", None) or {}), "SEARCH_DEDUPE_DOCUMENTS": True}
    result = knowledge_search(SearchRequest(project=project, query="paid vacation", memory_store_ids=[store.pk],
                                            document_paths=["/handbook/"]))
    assert [h.source for h in result.results].count("document") == 1
    assert [h.source for h in result.results].count("memory") == 2
    both = knowledge_search(SearchRequest(project=project, query="paid vacation", document_paths=["/handbook/"],
                                          dedupe_documents=False))
    assert len(both.results) == 3


def test_bad_stage_option_is_a_validation_error(client):
    response = client.post("/api/v1/knowledge/search", {"query": "x", "mmr": "often"}, format="json")
    assert response.status_code == 400 and response.json()["code"] == "VALIDATION_ERROR"


# --- MMR ----------------------------------------------------------------------------------------


def test_mmr_keeps_items_without_a_vector(project):
    make_document(project, "/handbook/leave.txt", LEAVE)
    make_document(project, "/handbook/unembedded.txt", ["Paid vacation requests go to your manager."],
                  embed=False)
    plain = knowledge_search(SearchRequest(project=project, query="paid vacation", limit=10))
    diverse = knowledge_search(SearchRequest(project=project, query="paid vacation", limit=10, mmr=True))
    assert {h.id for h in diverse.results} == {h.id for h in plain.results}
    assert any(h.document_path == "/handbook/unembedded.txt" for h in diverse.results)


def test_mmr_prefers_a_novel_item_over_a_near_duplicate():
    def hit(id_: str, score: float) -> SearchHit:
        return SearchHit(source="document", id=id_, text=id_, score=score, similarity_score=None,
                         ranks={"vector": None, "lexical": None})

    hits = [hit("a", 1.0), hit("a2", 0.95), hit("b", 0.9), hit("novector", 0.8), hit("tail", 0.1)]
    vectors = {("document", "a"): [1.0, 0.0], ("document", "a2"): [0.99, 0.14], ("document", "b"): [0.0, 1.0],
               ("document", "tail"): [1.0, 0.0]}
    ordered = [h.id for h in mmr(hits, vectors, lambda_=0.7, pool=4)]
    assert ordered == ["a", "b", "a2", "novector", "tail"]


# --- degraded vocabulary and capabilities ------------------------------------------------------


def test_zero_query_vector_is_dense_unavailable(project, store, settings):
    write(store, "The user drinks oat milk.")
    from tests.conftest import use_embedder

    use_embedder(settings, "tests.search.test_ranking_stages.ZeroEmbeddingProvider", MODEL="all-MiniLM-L6-v2")
    result = knowledge_search(SearchRequest(project=project, query="oat milk", memory_store_ids=[store.pk]))
    assert result.degraded == [Degraded.DENSE_UNAVAILABLE, Degraded.LEXICAL_ONLY]
    assert [h.text for h in result.results] == ["The user drinks oat milk."]


def test_capabilities(client, project, lexical_backend):
    body = client.get("/api/v1/capabilities").json()
    assert body == {
        "embeddings_configured": True, "embedding_model": "all-MiniLM-L6-v2", "embedding_dimensions": 384,
        "lexical_backend": lexical_backend, "rerank_configured": False, "rerank_model": None,
        "dedupe_documents": False, "mmr": False, "authority_weight": 0.0, "boosts": False,
        "degraded_reasons": ["embed_unavailable", "dense_unavailable", "lexical_only", "lexical_unavailable",
                             "rerank_unavailable"],
    }
    assert api_client().get("/api/v1/capabilities").status_code == 401
    assert api_client(make_key(project, read_only=True)).get("/api/v1/capabilities").status_code == 200


@pytest.mark.usefixtures("no_embedder")
def test_capabilities_without_an_embedder(client):
    body = client.get("/api/v1/capabilities").json()
    assert body["embeddings_configured"] is False and body["embedding_model"] is None


from memory_engine.providers.embeddings.base import EmbeddingProvider  # noqa: E402


class ZeroEmbeddingProvider(EmbeddingProvider):
    """Answers vectors without a direction (all zeros)."""

    def embed_documents(self, texts: Any) -> list[list[float]]:
        return [[0.0] * self.dimensions for _ in texts]
