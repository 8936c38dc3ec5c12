"""Decision reasons of the funnel: the changed-detail gate, `about` keys and the same-fact judge.

Real default embedder (the cosines decide); a real HTTP server on 127.0.0.1 stands in for the LLM.
"""

from __future__ import annotations

import json
import time

import pytest

from memory_engine.exceptions import AboutRequired, ValidationFailed
from memory_engine.models import Memory
from memory_engine.services.memories import memory_write
from tests.httpserver import LocalServer

pytestmark = pytest.mark.django_db

PG15 = "The staging database runs PostgreSQL 15 on a host called db-stage-2."
PG16 = "The staging database runs PostgreSQL 16 on a host called db-stage-2."


def write(store, text, **kwargs):
    return memory_write(store=store, content=text, principal="test", **kwargs)


def test_changed_detail_above_duplicate_threshold_supersedes(store):
    first = write(store, PG15)
    result = write(store, PG16)  # cosine ~0.97: a cosine-only funnel would skip it
    assert result.similarity >= 0.95
    assert result.action == "superseded" and result.decision_reason == "changed_detail"
    assert result.changed_details and result.changed_details[0]["kind"] == "number"
    assert result.assertion.details["changed_details"] == result.changed_details
    assert Memory.objects.get(pk=first.memory.pk).superseded_by_id == result.memory.pk


def test_rewording_without_changed_detail_is_still_skipped(store):
    write(store, "The customer prefers email contact")
    result = write(store, "The customer prefers contact by email")
    assert result.action == "skipped" and result.decision_reason == "duplicate"


def test_gate_can_be_turned_off(store, settings):
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "CHANGED_DETAIL_GATE": False}
    write(store, PG15)
    assert write(store, PG16).action == "skipped"


def test_similar_reason_in_the_supersede_band(store):
    write(store, "Our main database is hosted in Frankfurt")
    result = write(store, "Our main database is now hosted in Frankfurt and Paris")
    assert (result.action, result.decision_reason) == ("superseded", "similar")


def test_below_threshold_reason(store):
    write(store, "The customer prefers email contact")
    result = write(store, "The quarterly revenue grew 5%")
    assert (result.action, result.decision_reason) == ("created", "below_threshold")


def test_about_key_supersedes_whatever_the_cosine(store):
    about = {"kind": "preference", "key": "contact_channel"}
    first = write(store, "The customer prefers email contact", about=about)
    result = write(store, "Please call them on the phone from now on", about=about)
    assert (result.action, result.decision_reason) == ("superseded", "about_key")
    assert result.similarity is not None and result.similarity < 0.9
    assert Memory.objects.get(pk=first.memory.pk).invalidated_at is not None
    assert (result.memory.about_kind, result.memory.about_key) == ("preference", "contact_channel")
    same = write(store, "Please call them on the phone  from now on", about=about)
    assert (same.action, same.decision_reason) == ("skipped", "duplicate")


def test_different_about_keys_are_different_facts(store):
    write(store, "The user likes green tea in the morning", about={"kind": "preference", "key": "morning_drink"})
    result = write(store, "The user likes green tea in the evening", about={"kind": "preference",
                                                                            "key": "evening_drink"})
    assert result.action == "created" and result.decision_reason == "about_key"


def test_supersede_inherits_the_about_key(store):
    write(store, "Our main database is hosted in Frankfurt", about={"kind": "infra", "key": "db_region"})
    result = write(store, "Our main database is now hosted in Frankfurt and Paris")
    assert result.action == "superseded"
    assert result.memory.about_key == "db_region"


def test_store_can_require_about_for_kinds(store):
    store.require_about_for_kinds = ["preference"]
    store.save()
    with pytest.raises(AboutRequired):
        write(store, "The customer prefers email contact", tags={"kind": "preference"})
    assert write(store, "The customer prefers email contact", tags={"kind": "preference"},
                 about={"kind": "preference", "key": "contact"}).action == "created"
    assert write(store, "The office closes at 6pm", tags={"kind": "hours"}).action == "created"


@pytest.mark.parametrize("about", [{"kind": "x"}, {"kind": "", "key": "y"}, "preference", {"kind": 1, "key": 2}])
def test_malformed_about(store, about):
    with pytest.raises(ValidationFailed):
        write(store, "The customer prefers email contact", about=about)


def test_about_over_the_api(client, store):
    store.require_about_for_kinds = ["preference"]
    store.save()
    response = client.post("/api/v1/memories", {"memory_store_id": store.pk, "content": "Prefers email",
                                                 "tags": {"kind": "preference"}}, format="json")
    assert response.status_code == 400 and response.json()["code"] == "ABOUT_REQUIRED"
    response = client.post("/api/v1/memories", {"memory_store_id": store.pk, "content": "Prefers email",
                                                 "tags": {"kind": "preference"},
                                                 "about": {"kind": "preference", "key": "channel"}}, format="json")
    assert response.status_code == 201 and response.json()["about"] == {"kind": "preference", "key": "channel"}
    response = client.post("/api/v1/memories", {"memory_store_id": store.pk, "content": "Prefers phone calls",
                                                 "about": {"kind": "preference", "key": "channel"}}, format="json")
    body = response.json()
    assert body["action"] == "superseded" and body["decision_reason"] == "about_key"


# --- the same-fact judge -------------------------------------------------------------

BAND_OLD = "The customer prefers email contact"
BAND_NEW = "Customer prefers phone contact"  # cosine ~0.79: inside [0.75, 0.90)


def llm(answer=None, status=200, delay=0.0):
    def handler(method, path, headers, body):
        if delay:
            time.sleep(delay)
        request = json.loads(body)
        assert path.endswith("/chat/completions") and request["temperature"] == 0
        if status != 200:
            return status, {"error": "boom"}
        return 200, {"choices": [{"message": {"role": "assistant", "content": answer}}]}
    return LocalServer(handler)


def enable_judge(settings, store, url, timeout=2.0):
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "LLM": {"BASE_URL": url, "MODEL": "judge", "RETRIES": 0},
                              "JUDGE_TIMEOUT": timeout}
    store.judge_enabled = True
    store.save()


def test_judge_yes_supersedes(settings, store):
    with llm("YES") as server:
        enable_judge(settings, store, server.url)
        write(store, BAND_OLD)
        result = write(store, BAND_NEW)
    assert (result.action, result.decision_reason) == ("superseded", "judge")
    assert result.assertion.details["judge"]["same_fact"] is True
    assert len(server.requests) == 1


def test_judge_no_creates(settings, store):
    with llm("No.") as server:
        enable_judge(settings, store, server.url)
        write(store, BAND_OLD)
        result = write(store, BAND_NEW)
    assert (result.action, result.decision_reason) == ("created", "judge")
    assert result.assertion.details["judge"]["same_fact"] is False


@pytest.mark.parametrize("kind", ["timeout", "error", "garbage"])
def test_judge_failure_falls_back_to_cosine(settings, store, kind):
    server = {"timeout": llm("YES", delay=1.5), "error": llm(status=500), "garbage": llm("perhaps?")}[kind]
    with server:
        enable_judge(settings, store, server.url, timeout=0.3)
        write(store, BAND_OLD)
        result = write(store, BAND_NEW)
    assert (result.action, result.decision_reason) == ("created", "below_threshold")
    verdict = result.assertion.details["judge"]
    assert verdict["same_fact"] is None and verdict["fallback"] == "cosine" and verdict["error_code"]


def test_judge_not_asked_outside_its_band_or_when_disabled(settings, store):
    with llm("YES") as server:
        enable_judge(settings, store, server.url)
        write(store, BAND_OLD)
        write(store, "The quarterly revenue grew 5%")  # far below the floor
        store.judge_enabled = False
        store.save()
        assert write(store, BAND_NEW).action == "created"
    assert server.requests == []
