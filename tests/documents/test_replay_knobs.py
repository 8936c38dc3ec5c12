"""Ranking knobs on transform configs (memory_engine.ranking_knobs): validated on save, used by a
search of the config's generation, overridden by the request; live search keeps the settings."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from memory_engine.ranking_knobs import CONFIG_KNOBS, ranking_knobs
from memory_engine.services.documents.replay import generation_promote, replay_run, transform_config_create

from .test_replay import CONFIGS, admin_api, corpus, search  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db


def per_document(response: Any) -> Counter[str]:
    assert response.status_code == 200, response.json()
    return Counter(hit["document_id"] for hit in response.json()["results"] if hit["source"] == "document")


@pytest.mark.parametrize(("search", "field"), [
    ({"mmr": "yes"}, "search.mmr"),
    ({"authority_weight": 2}, "search.authority_weight"),
    ({"corroboration_cap": 1.5}, "search.corroboration_cap"),
    ({"rrf_k": 0}, "search.rrf_k"),
    ({"corroboration_support": -0.1}, "search.corroboration_support"),
    ({"rerank_top_n": 5}, "search.rerank_top_n"),
    (["mmr"], "search"),
])
def test_config_knobs_are_validated_on_save(client, search, field):
    response = client.post(CONFIGS, {"name": "knobs", "search": search}, format="json")
    assert (response.status_code, response.json()["code"], response.json()["details"]["field"]) == (
        400, "TRANSFORM_CONFIG_INVALID", field)


def test_every_knob_is_accepted(client):
    knobs = {"dedupe_documents": True, "mmr": False, "authority_weight": 0.2, "boosts": True,
             "corroboration_support": 0.1, "corroboration_contradict": 0.1, "corroboration_cap": 3, "rerank": False,
             "rrf_k": 10, "vector_weight": 1.0, "lexical_weight": 0.5}
    assert set(knobs) == set(CONFIG_KNOBS)
    response = client.post(CONFIGS, {"name": "knobs", "search": knobs}, format="json")
    assert response.status_code == 201 and response.json()["search"] == knobs


def test_knob_precedence_settings_then_config_then_request(settings):
    settings.MEMORY_ENGINE = {**(getattr(settings, "MEMORY_ENGINE", None) or {}), "SEARCH_MMR": True}
    assert ranking_knobs().mmr is True
    assert ranking_knobs({"mmr": False}).mmr is False
    assert ranking_knobs({"mmr": False}, mmr=True).mmr is True
    assert ranking_knobs({"mmr": False}, mmr=None).mmr is False


def test_generation_search_uses_its_config_knobs_and_the_request_overrides(client, admin_api, corpus,  # noqa: F811
                                                                           project):
    config = transform_config_create(project=project, name="dedupe", chunk_strategy="size", chunk_size=60,
                                     chunk_overlap=10, search={"dedupe_documents": True})
    run = replay_run(config=config)
    query = "breakfast lunch salad bar cafeteria"
    deduped = per_document(search(admin_api, query, generation=run.pk))
    assert deduped and max(deduped.values()) == 1
    assert max(per_document(search(admin_api, query, generation=run.pk, dedupe_documents=False)).values()) > 1
    # Live search keeps the settings (SEARCH_DEDUPE_DOCUMENTS off), before and after the promote.
    generation_promote(run=run, by="test")
    assert max(per_document(search(admin_api, query)).values()) > 1
