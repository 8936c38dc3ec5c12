"""Relevance (issue 63) and the evidence grade made of it (issue 57): only what bears on the
question reaches a model, and an exact top hit is strong. Real PostgreSQL, the real default
embedder (all-MiniLM-L6-v2), both lexical backends."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.checks import run_checks

from memory_engine.agent_tools import run_search_knowledge
from memory_engine.injection import NO_KNOWLEDGE_NOTE, WEAK_EVIDENCE_NOTE, inject_knowledge
from memory_engine.policy import SYSTEM
from memory_engine.relevance import BUILTIN_MODEL, answer_features, calibrated_for_embedder, relevance_model
from memory_engine.selectors.search import SearchHit, SearchRequest, knowledge_search
from memory_engine.selectors.search.stages import grade_evidence, judge_relevance
from tests.factories import AgentFactory, make_key

from .helpers import write

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("lexical_backend")]

#: The five memories of issue 63.
FACTS = [
    "The user prefers phone calls, but only after 6 pm.",
    "The user's office is in Lisbon.",
    "The billing project moves to the new invoicing system in March.",
    "Quarterly revenue grew 5% over the last quarter.",
    "The cafeteria serves lasagna on Thursdays.",
]
EVENING = "Can we phone the user in the evening?"
MONGOLIA = "What is the capital of Mongolia?"


def change(settings: Any, **values: Any) -> None:
    settings.MEMORY_ENGINE = {**(getattr(settings, "MEMORY_ENGINE", None) or {}), **values}


@pytest.fixture
def facts(store: Any) -> dict[str, str]:
    """The five memories: text -> id."""
    return {text: write(store, text).pk for text in FACTS}


@pytest.fixture
def agent(project: Any, store: Any, facts: dict[str, str]) -> Any:
    return AgentFactory(project=project, knowledge_config={"memory_store_ids": [store.pk]})


def ask(agent: Any, question: str) -> tuple[list[dict[str, Any]], Any]:
    return inject_knowledge([{"role": "user", "content": question}], agent=agent, caller=SYSTEM)


# --- injection and the tools -----------------------------------------------------------------------


def test_the_evening_question_injects_only_the_phone_fact(agent: Any, facts: dict[str, str]) -> None:
    messages, result = ask(agent, EVENING)
    assert [hit.id for hit in result.results] == [facts[FACTS[0]]]
    assert len(messages) == 2 and messages[0]["role"] == "user"
    block = messages[0]["content"]
    assert FACTS[0] in block and not any(fact in block for fact in FACTS[1:])
    assert result.evidence in ("weak", "strong")
    assert (WEAK_EVIDENCE_NOTE in block) == (result.evidence == "weak")  # the note agrees with the grade


def test_an_off_topic_question_injects_nothing(agent: Any) -> None:
    question = [{"role": "user", "content": MONGOLIA}]
    messages, result = inject_knowledge(question, agent=agent, caller=SYSTEM)
    assert messages == question and result.results == [] and result.evidence == "none"
    content, tool_result = run_search_knowledge(agent, {"query": MONGOLIA}, caller=SYSTEM)
    assert content == NO_KNOWLEDGE_NOTE and tool_result.results == [] and tool_result.evidence == "none"


def test_the_tool_hands_on_only_the_relevant_hits(agent: Any, facts: dict[str, str]) -> None:
    content, result = run_search_knowledge(agent, {"query": EVENING, "limit": 5}, caller=SYSTEM)
    assert [hit.id for hit in result.results] == [facts[FACTS[0]]]
    assert content.startswith("<knowledge>") and FACTS[0] in content and FACTS[1] not in content


def test_context_and_tool_endpoints(client: Any, agent: Any, facts: dict[str, str]) -> None:
    context = client.post(f"/api/v1/agents/{agent.pk}/context",
                          {"messages": [{"role": "user", "content": MONGOLIA}]}, format="json").json()
    assert context["injected"] is False and context["knowledge"]["results"] == []
    assert context["knowledge"]["evidence"] == "none"
    tool = client.post(f"/api/v1/agents/{agent.pk}/tools/search_knowledge", {"query": EVENING},
                       format="json").json()
    assert [hit["id"] for hit in tool["knowledge"]["results"]] == [facts[FACTS[0]]]
    assert tool["knowledge"]["results"][0]["relevant"] is True and FACTS[1] not in tool["content"]


def test_mcp_runs_the_same_path(project: Any, agent: Any, facts: dict[str, str]) -> None:
    from memory_engine.mcp.server import connect, run_tool

    connection = connect(make_key(project), agent_id=agent.pk)
    off_topic = run_tool(connection, "search_knowledge", {"query": MONGOLIA})
    assert off_topic["content"] == NO_KNOWLEDGE_NOTE and off_topic["knowledge"]["evidence"] == "none"
    on_topic = run_tool(connection, "search_knowledge", {"query": EVENING})
    assert [hit["id"] for hit in on_topic["knowledge"]["results"]] == [facts[FACTS[0]]]
    assert FACTS[0] in on_topic["content"] and FACTS[1] not in on_topic["content"]


def test_an_agent_sets_its_own_threshold(project: Any, store: Any, facts: dict[str, str]) -> None:
    everything = AgentFactory(project=project, knowledge_config={"memory_store_ids": [store.pk], "min_relevance": 0})
    _, result = ask(everything, MONGOLIA)
    assert len(result.results) == 5  # 0 lets every hit through, up to the limit
    strict = AgentFactory(project=project, knowledge_config={"memory_store_ids": [store.pk], "min_relevance": 1})
    assert ask(strict, EVENING)[1].results == []
    # A per-generation override wins over the agent's.
    _, result = inject_knowledge([{"role": "user", "content": MONGOLIA}], agent=strict, override={"min_relevance": 0},
                                 caller=SYSTEM)
    assert len(result.results) == 5


def test_the_deployment_default(settings: Any, agent: Any) -> None:
    change(settings, SEARCH_MIN_RELEVANCE=0)
    assert len(ask(agent, MONGOLIA)[1].results) == 5
    change(settings, SEARCH_MIN_RELEVANCE=1)
    assert ask(agent, EVENING)[1].results == []


def test_min_relevance_in_knowledge_config_is_validated(client: Any, store: Any) -> None:
    for bad in (1.5, -0.1, "high", True):
        response = client.post("/api/v1/agents", {"name": f"a{bad}", "knowledge_config": {
            "memory_store_ids": [store.pk], "min_relevance": bad}}, format="json")
        assert response.status_code == 400 and response.json()["code"] == "KNOWLEDGE_CONFIG_INVALID", bad
    ok = client.post("/api/v1/agents", {"name": "ok", "knowledge_config": {"min_relevance": 0.5}}, format="json")
    assert ok.status_code == 201 and ok.json()["knowledge_config"]["min_relevance"] == 0.5


# --- the search API: every hit, marked; the filter keeps the ranking -------------------------------


def test_search_marks_each_hit_and_keeps_the_ranking(client: Any, store: Any, facts: dict[str, str]) -> None:
    body = {"query": EVENING, "memory_store_ids": [store.pk]}
    everything = client.post("/api/v1/knowledge/search", body, format="json").json()
    hits = everything["results"]
    assert len(hits) == 5 and hits[0]["id"] == facts[FACTS[0]]
    assert [hit["relevant"] for hit in hits] == [True, False, False, False, False]
    assert all(0 <= hit["relevance"] <= 1 for hit in hits)
    assert hits[0]["relevance"] > max(hit["relevance"] for hit in hits[1:])
    filtered = client.post("/api/v1/knowledge/search", {**body, "min_relevance": 0.35}, format="json").json()
    assert [hit["id"] for hit in filtered["results"]] == [facts[FACTS[0]]]
    # A low floor keeps more hits, in the ranking's order, each marked at that floor.
    floor = sorted(hit["relevance"] for hit in hits)[1]
    kept = client.post("/api/v1/knowledge/search", {**body, "min_relevance": floor}, format="json").json()["results"]
    assert [hit["id"] for hit in kept] == [hit["id"] for hit in hits if hit["relevance"] >= floor]
    assert len(kept) == 4 and all(hit["relevant"] for hit in kept)
    off_topic = client.post("/api/v1/knowledge/search", {**body, "query": MONGOLIA}, format="json").json()
    assert len(off_topic["results"]) == 5 and not any(hit["relevant"] for hit in off_topic["results"])
    assert off_topic["evidence"] == "none"  # the grade speaks of what is relevant, not of what is ranked


@pytest.mark.parametrize("bad", [-0.01, 1.01, "x"])
def test_min_relevance_out_of_range(client: Any, store: Any, bad: Any) -> None:
    response = client.post("/api/v1/knowledge/search", {"query": EVENING, "memory_store_ids": [store.pk],
                                                        "min_relevance": bad}, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == ("MIN_RELEVANCE_INVALID" if bad != "x" else "VALIDATION_ERROR")


def test_a_read_without_a_query_judges_nothing(project: Any, store: Any, facts: dict[str, str]) -> None:
    result = knowledge_search(SearchRequest(project=project, memory_store_ids=[store.pk], min_relevance=0.9))
    assert len(result.results) == 5 and all(h.relevance is None and h.relevant for h in result.results)
    assert result.evidence == "weak"


# --- evidence (issue 57) ---------------------------------------------------------------------------


def test_an_exact_top_hit_is_strong(project: Any, store: Any, facts: dict[str, str], agent: Any) -> None:
    result = knowledge_search(SearchRequest(project=project, query=FACTS[1], memory_store_ids=[store.pk]))
    top = result.results[0]
    assert top.id == facts[FACTS[1]] and top.ranks == {"vector": 1, "lexical": 1}
    assert top.relevance is not None and top.relevance >= 0.94 and result.evidence == "strong"
    messages, injected = ask(agent, "Where is the user's office?")
    assert injected.evidence == "strong" and WEAK_EVIDENCE_NOTE not in messages[0]["content"]
    assert injected.results[0].id == facts[FACTS[1]]


def test_the_strong_bar_is_a_setting(settings: Any, project: Any, store: Any, facts: dict[str, str]) -> None:
    change(settings, EVIDENCE_STRONG_RELEVANCE=1.0)
    result = knowledge_search(SearchRequest(project=project, query=FACTS[1], memory_store_ids=[store.pk]))
    assert result.results[0].relevant and result.evidence == "weak"


# --- the model ---------------------------------------------------------------------------------------


def _hit(cos: float | None, lex: float | None, vrank: int | None, lrank: int | None) -> SearchHit:
    return SearchHit(source="memory", id=f"mem_{vrank}_{lrank}", text="t", score=0.1, similarity_score=cos,
                     lexical_score=lex, ranks={"vector": vrank, "lexical": lrank})


def test_features_are_relative_to_the_answer() -> None:
    hits = [_hit(0.7, 8.0, 1, 1), _hit(0.3, 2.0, 2, 2), _hit(None, 4.0, None, 3)]
    answer, features = answer_features(hits)  # type: ignore[misc]
    assert answer == {"top_cosine": 0.7}
    assert features[0] == {"cosine": 0.7, "cosine_gap": 0.0, "lexical_share": 1.0, "vector_rank": 1.0,
                           "lexical_rank": 1.0, "rerank": 0.0}
    assert features[1]["cosine_gap"] == pytest.approx(-0.4) and features[1]["lexical_share"] == 0.0625
    # A hit without a stored vector is taken at the answer's best cosine.
    assert features[2]["cosine"] == 0.7 and features[2]["vector_rank"] == 0.0
    assert answer_features([_hit(None, 3.0, None, 1)]) is None  # no query vector: nothing to judge


def test_without_a_cosine_nothing_is_judged() -> None:
    hits = [_hit(None, 3.0, None, 1), _hit(None, 1.0, None, 2)]
    judge_relevance(hits, BUILTIN_MODEL, threshold=0.35)
    assert all(h.relevance is None and h.relevant for h in hits)
    assert grade_evidence(hits, strong=0.94) == "weak" and grade_evidence([], strong=0.94) == "none"


def test_a_deployment_model_replaces_the_builtin(settings: Any, agent: Any) -> None:
    change(settings, RELEVANCE_MODEL={"VERSION": "never", "GATE": {"intercept": -50}, "WEIGHTS": {}})
    assert relevance_model("all-MiniLM-L6-v2").version == "never"  # type: ignore[union-attr]
    assert ask(agent, EVENING)[1].results == []
    change(settings, RELEVANCE_MODEL={"VERSION": "bad", "GATE": {}, "WEIGHTS": {"cosinus": 1}})
    assert [m.id for m in run_checks() if m.id == "memory_engine.E021"] == ["memory_engine.E021"]


def test_another_embedder_is_not_judged_by_the_builtin_model(settings: Any) -> None:
    assert calibrated_for_embedder("all-MiniLM-L6-v2") and calibrated_for_embedder("all-minilm")
    assert calibrated_for_embedder("sentence-transformers/all-MiniLM-L6-v2")
    assert not calibrated_for_embedder("text-embedding-3-small") and relevance_model("nomic-embed-text") is None
    change(settings, EMBEDDING={"PROVIDER": "openai", "MODEL": "text-embedding-3-small", "DIMENSIONS": 384})
    assert "memory_engine.W014" in [m.id for m in run_checks()]
    change(settings, RELEVANCE_MODEL={"VERSION": "mine", "GATE": {"intercept": 0}, "WEIGHTS": {"intercept": 0}})
    assert "memory_engine.W014" not in [m.id for m in run_checks()]
