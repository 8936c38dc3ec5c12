"""Resident distillers (docs/distillers.md) against a fake OpenAI-compatible server on 127.0.0.1
serving the real LLM client: claims become inferred, derived memories through the funnel; ticks
are idempotent; a failing LLM is recorded and retried; a superseded or forgotten version retires
what only it held; grants bound what a distiller reads and where it writes; a worker killed
mid-tick leaves nothing half-written and the next tick resumes without duplicates."""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from memory_engine.models import (
    Distiller,
    DistillerVersion,
    Document,
    Memory,
    MemoryAssertion,
    MemoryDerivation,
)
from memory_engine.queue import DISTILLERS_SCHEDULE_NAME, DISTILLERS_TASK
from memory_engine.services.distillers import distiller_tick, windows
from memory_engine.services.keys import api_key_create, api_key_revoke
from tests.conftest import api_client, wait_for
from tests.factories import MemoryStoreFactory
from tests.rules.conftest import engine
from tests.rules.servers import FakeServer, chat_reply

pytestmark = [pytest.mark.django_db(transaction=True)]  # the feed shows committed changes only
DISTILLERS = "/api/v1/distillers"


class ClaimsLLM(FakeServer):
    """Answers the claims listed for the first title found in the request's user message;
    ``failing`` makes every call answer 500; ``held`` titles wait for ``release``."""

    def __init__(self) -> None:
        self.claims: dict[str, list[Any]] = {}
        self.failing = False
        self.held: set[str] = set()
        self.release = threading.Event()
        super().__init__(self._respond)

    def _respond(self, request: dict[str, Any]) -> tuple[int, Any, float]:
        if self.failing:
            return 500, {"error": "overloaded"}, 0
        user = request["json"]["messages"][-1]["content"]
        for title, claims in self.claims.items():
            if f"Document: {title} " in user:
                if title in self.held:
                    self.release.wait(timeout=60)
                # prose around the array: the parsing is lenient, as for the builtin rule handler
                return 200, chat_reply(f"Here are the claims:\n{json.dumps(claims)}\nDone."), 0
        return 200, chat_reply("[]"), 0

    def calls(self, title: str) -> int:
        return sum(f"Document: {title} " in r["json"]["messages"][-1]["content"] for r in self.received)

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"


@pytest.fixture
def llm(settings: Any, hashing_embedder: None) -> Iterator[ClaimsLLM]:
    server = ClaimsLLM()
    engine(settings, LLM={"BASE_URL": server.base_url, "MODEL": "test-model", "TIMEOUT": 5, "RETRIES": 0})
    yield server
    server.close()


def capture(client: Any, ref: str, text: str, **extra: Any) -> dict[str, Any]:
    answer = client.put(f"/api/v1/documents/by-ref/wiki/{ref}",
                        {"content": text, "title": ref.title(), "wait": True, **extra}, format="json")
    assert answer.status_code in (200, 201), answer.content
    return answer.json()


def tick(client: Any, distiller_id: str) -> dict[str, Any]:
    answer = client.post(f"{DISTILLERS}/{distiller_id}/tick")
    assert answer.status_code == 200, answer.content
    return answer.json()


def live_texts(store: Any) -> set[str]:
    return {m.content.text for m in Memory.objects.live().filter(store=store).select_related("content")}


def test_claims_become_inferred_derived_memories_and_a_second_tick_writes_nothing(
        llm: ClaimsLLM, project: Any, client: Any) -> None:
    store = MemoryStoreFactory(project=project)
    llm.claims = {"Refunds": ["Refunds over 500 EUR need a manager's approval.",
                              {"content": "Refunds are paid within 14 days.", "tags": {"kind": "fact"}}, 42],
                  "Lunch": ["Lunch is served at noon."]}
    refunds = capture(client, "refunds", "Refunds over 500 EUR need a manager. They are paid within 14 days.")
    capture(client, "lunch", "Lunch is at noon.")
    path = Document.objects.get(pk=refunds["id"]).path
    created = client.post(DISTILLERS, {"memory_store_id": store.pk, "document_paths": [path]}, format="json")
    assert created.status_code == 201, created.content
    distiller = created.json()
    assert distiller["enabled"] and distiller["document_paths"] == [path] and distiller["recent_runs"] == []

    run = tick(client, distiller["id"])
    assert run["counts"] == {"versions": 1, "claims": 2, "created": 2, "superseded": 0, "skipped": 0, "failed": 1,
                             "retired": 0}  # 42 is not a claim: failed, the others written
    assert llm.calls("Refunds") == 1 and llm.calls("Lunch") == 0  # outside the distiller's paths
    assert live_texts(store) == {"Refunds over 500 EUR need a manager's approval.", "Refunds are paid within 14 days."}
    memories = client.get("/api/v1/memories", {"memory_store_id": store.pk, "lineage": "derived"}).json()["results"]
    version_id = Document.objects.get(pk=refunds["id"]).active_version_id
    assert {(m["provenance"], m["lineage"], tuple(m["derived_from"])) for m in memories} == {
        ("inferred", "derived", (version_id,))}
    assert set(MemoryAssertion.objects.filter(memory__store=store).values_list("mechanism", "outcome")) == {
        ("distiller", "created")}
    assert client.get("/api/v1/memories", {"memory_store_id": store.pk, "provenance": "stated"}).json()["results"] == []

    again = tick(client, distiller["id"])
    assert again["counts"]["versions"] == 0 and again["counts"]["created"] == 0 and llm.calls("Refunds") == 1
    shown = client.get(f"{DISTILLERS}/{distiller['id']}").json()
    assert [r["counts"]["created"] for r in shown["recent_runs"]] == [0, 2] and shown["versions"] == {
        "done": 1, "failed": 0}


def test_a_new_version_keeps_what_it_repeats_and_retires_what_only_the_old_held(
        llm: ClaimsLLM, project: Any, client: Any, settings: Any) -> None:
    # the hotel cap's new value would supersede the old one (VALUE_CHANGE_GATE): off here, where the
    # old version's claim is to be retired with it
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "VALUE_CHANGE_GATE": False}
    store = MemoryStoreFactory(project=project)
    distiller = client.post(DISTILLERS, {"memory_store_id": store.pk}, format="json").json()
    llm.claims = {"Travel": ["Trains are booked in second class.", "Hotels are capped at 120 EUR a night."]}
    travel = capture(client, "travel", "Travel policy, 2025 edition.")
    assert tick(client, distiller["id"])["counts"]["created"] == 2
    # a stated memory the distiller's claim repeats is kept and never retired with the document
    client.post("/api/v1/memories", {"memory_store_id": store.pk, "content": "Taxis need a receipt.",
                                     "provenance": "stated"}, format="json")

    llm.claims = {"Travel": ["Trains are booked in second class.", "Taxis need a receipt.",
                             "Hotels are capped at 150 EUR a night."]}
    capture(client, "travel", "Travel policy, 2026 edition.")
    run = tick(client, distiller["id"])["counts"]
    assert (run["versions"], run["created"], run["skipped"], run["retired"]) == (1, 1, 2, 1)
    assert live_texts(store) == {"Trains are booked in second class.", "Taxis need a receipt.",
                                 "Hotels are capped at 150 EUR a night."}
    retired = Memory.objects.get(store=store, content__text="Hotels are capped at 120 EUR a night.")
    assert retired.invalidated_at is not None
    assert MemoryAssertion.objects.filter(memory_id=retired.pk, outcome="forgotten",
                                          mechanism="distiller").exists()
    stated = Memory.objects.get(store=store, content__text="Taxis need a receipt.")
    assert (stated.provenance, stated.lineage, stated.derivations.count()) == ("stated", "native", 0)

    forgotten = client.post(f"/api/v1/documents/{travel['id']}/forget", {"reason": "outdated"}, format="json")
    assert forgotten.status_code == 200, forgotten.content
    assert tick(client, distiller["id"])["counts"]["retired"] == 2
    assert live_texts(store) == {"Taxis need a receipt."}


def test_a_failing_llm_is_recorded_retried_and_then_left(llm: ClaimsLLM, settings: Any, project: Any,
                                                          client: Any) -> None:
    engine(settings, DISTILLER_MAX_ATTEMPTS=3)
    store = MemoryStoreFactory(project=project)
    distiller = client.post(DISTILLERS, {"memory_store_id": store.pk}, format="json").json()
    llm.claims = {"Badges": ["Badges are renewed every January."], "Desks": ["Desks are booked a day ahead."]}
    badges = capture(client, "badges", "Badge rules.")
    llm.failing = True
    run = tick(client, distiller["id"])
    version_id = Document.objects.get(pk=badges["id"]).active_version_id
    assert run["counts"]["failed"] == 1 and run["errors"] == [
        {"version_id": version_id, "code": "LLM_HTTP_ERROR", "message": run["errors"][0]["message"]}]
    assert live_texts(store) == set()
    llm.failing = False
    retried = tick(client, distiller["id"])["counts"]
    assert (retried["versions"], retried["created"]) == (1, 1)
    assert DistillerVersion.objects.get(version_id=version_id).status == "done"

    desks = capture(client, "desks", "Desk rules.")
    llm.failing = True
    for _ in range(4):  # three attempts, then the version is left as failed
        tick(client, distiller["id"])
    assert llm.calls("Desks") == 3
    row = DistillerVersion.objects.get(version_id=Document.objects.get(pk=desks["id"]).active_version_id)
    assert (row.status, row.attempts, row.error["code"]) == ("failed", 3, "LLM_HTTP_ERROR")
    assert client.get(f"{DISTILLERS}/{distiller['id']}").json()["versions"] == {"done": 1, "failed": 1}


def test_without_a_model_the_tick_records_llm_not_configured_and_reads_later(
        settings: Any, hashing_embedder: None, project: Any, client: Any) -> None:
    engine(settings, LLM=None)
    store = MemoryStoreFactory(project=project)
    distiller = client.post(DISTILLERS, {"memory_store_id": store.pk}, format="json").json()
    capture(client, "parking", "Parking policy.")
    run = tick(client, distiller["id"])
    assert [e["code"] for e in run["errors"]] == ["LLM_NOT_CONFIGURED"] and run["counts"]["versions"] == 0
    assert Distiller.objects.get(pk=distiller["id"]).cursor == ""  # nothing was read: nothing is skipped
    server = ClaimsLLM()
    try:
        server.claims = {"Parking": ["Parking spots are first come, first served."]}
        engine(settings, LLM={"BASE_URL": server.base_url, "MODEL": "m", "TIMEOUT": 5, "RETRIES": 0})
        assert tick(client, distiller["id"])["counts"]["created"] == 1
    finally:
        server.close()


def test_grants_bound_what_a_distiller_reads_and_where_it_writes(llm: ClaimsLLM, project: Any) -> None:
    def key(*grants: tuple[str, list[str]]) -> tuple[Any, Any]:
        row, secret = api_key_create(project=project, grants=[{"pattern": p, "actions": a} for p, a in grants])
        return row, api_client(secret)

    team_a_key, team_a = key(("team:a", ["search", "add"]))
    _, team_b = key(("team:b", ["search", "add"]))
    _, reader = key(("team:a", ["search"]))
    store_a = MemoryStoreFactory(project=project, access_tags=["team:a"])
    llm.claims = {"A-Plan": ["Team a ships on Fridays."], "B-Plan": ["Team b ships on Mondays."]}
    capture(team_a, "a-plan", "Plan of team a.")
    capture(team_b, "b-plan", "Plan of team b.")

    refused = reader.post(DISTILLERS, {"memory_store_id": store_a.pk}, format="json")
    assert (refused.status_code, refused.json()["code"]) == (403, "GRANT_REQUIRED")
    unseen = team_b.post(DISTILLERS, {"memory_store_id": store_a.pk}, format="json")
    assert (unseen.status_code, unseen.json()["code"]) == (400, "UNKNOWN_SCOPE")
    distiller = team_a.post(DISTILLERS, {"memory_store_id": store_a.pk}, format="json").json()
    for answer in (team_b.get(f"{DISTILLERS}/{distiller['id']}"), team_b.post(f"{DISTILLERS}/{distiller['id']}/tick")):
        assert (answer.status_code, answer.json()["code"]) == (404, "DISTILLER_NOT_FOUND")
    assert team_b.get(DISTILLERS).json()["results"] == []

    assert tick(team_a, distiller["id"])["counts"]["created"] == 1
    assert live_texts(store_a) == {"Team a ships on Fridays."} and llm.calls("B-Plan") == 0  # not in its reach

    api_key_revoke(key=team_a_key)  # the principal it acts as is gone: it reads and writes nothing
    capture(team_b, "b-plan", "Plan of team b, revised.")
    run = distiller_tick(distiller_id=distiller["id"], project_id=project.pk)
    assert run is not None and [e["code"] for e in run.errors] == ["PRINCIPAL_INACTIVE"]


def test_input_is_checked(llm: ClaimsLLM, settings: Any, project: Any, client: Any) -> None:
    store = MemoryStoreFactory(project=project)
    for body, code in (({"memory_store_id": store.pk, "paths": ["a/"]}, "UNKNOWN_FIELD"),
                       ({"memory_store_id": store.pk, "document_paths": "a/"}, "VALIDATION_ERROR"),
                       ({"memory_store_id": "mst_nope"}, "UNKNOWN_SCOPE"),
                       ({"memory_store_id": store.pk, "tags": {"team": ["a"]}}, "VALIDATION_ERROR")):
        answer = client.post(DISTILLERS, body, format="json")
        assert answer.json()["code"] == code, (body, answer.content)
    engine(settings, LLM_OVERRIDABLE=["MAX_TOKENS"])
    answer = client.post(DISTILLERS, {"memory_store_id": store.pk, "prompt": "List the rules."}, format="json")
    assert (answer.status_code, answer.json()["code"]) == (400, "LLM_OVERRIDE_NOT_ALLOWED")
    distiller = client.post(DISTILLERS, {"memory_store_id": store.pk}, format="json").json()
    changed = client.patch(f"{DISTILLERS}/{distiller['id']}", {"enabled": False}, format="json")
    assert changed.status_code == 200 and changed.json()["enabled"] is False
    disabled = client.post(f"{DISTILLERS}/{distiller['id']}/tick")
    assert (disabled.status_code, disabled.json()["code"]) == (409, "DISTILLER_DISABLED")
    other = MemoryStoreFactory(project=project)
    # read-only fields are refused, named, instead of a 200 that changed nothing
    for body, named in (({"memory_store_id": other.pk}, ["memory_store_id"]),
                        ({"enabled": True, "cursor": "x", "created_at": "2030-01-01T00:00:00Z"},
                         ["created_at", "cursor"])):
        moved = client.patch(f"{DISTILLERS}/{distiller['id']}", body, format="json")
        assert (moved.status_code, moved.json()["code"]) == (400, "FIELD_READ_ONLY"), moved.json()
        assert moved.json()["details"] == {"fields": named} and named[0] in moved.json()["message"]
    kept = client.get(f"{DISTILLERS}/{distiller['id']}").json()
    assert kept["memory_store_id"] == store.pk and kept["enabled"] is False  # its store is fixed; nothing changed


def test_windows_cut_long_text_at_paragraphs_and_stop_at_the_cap() -> None:
    text = "\n\n".join(f"Paragraph {i}. " + "word " * 30 for i in range(40))
    parts = windows(text, 1000, 3)
    assert len(parts) == 3 and all(len(p) <= 1000 for p in parts)
    assert all(p.startswith("Paragraph") and p.endswith("word") for p in parts)  # whole paragraphs
    assert windows("short", 1000, 3) == ["short"]


def test_the_schedule_exists() -> None:
    from django_q.models import Schedule

    assert Schedule.objects.get(name=DISTILLERS_SCHEDULE_NAME).func == DISTILLERS_TASK


@pytest.fixture
def qcluster_env(llm_for_worker: ClaimsLLM) -> dict[str, str]:
    return {"MEMORY_ENGINE_EMBEDDING_PROVIDER": "tests.providers.HashingEmbeddingProvider", "Q_WORKERS": "1",
            "MEMORY_ENGINE_LLM_BASE_URL": llm_for_worker.base_url, "MEMORY_ENGINE_LLM_MODEL": "test-model"}


@pytest.fixture
def llm_for_worker(settings: Any, hashing_embedder: None) -> Iterator[ClaimsLLM]:
    server = ClaimsLLM()
    engine(settings, LLM={"BASE_URL": server.base_url, "MODEL": "test-model", "TIMEOUT": 30, "RETRIES": 0})
    yield server
    server.close()


@pytest.mark.slow
def test_a_worker_killed_mid_tick_leaves_nothing_half_written_and_the_next_tick_resumes(
        qcluster: Any, llm_for_worker: ClaimsLLM) -> None:
    from django_q.tasks import async_task

    from tests.factories import ProjectFactory

    llm = llm_for_worker
    project = ProjectFactory()
    client = api_client(api_key_create(project=project)[1])
    store = MemoryStoreFactory(project=project)
    llm.claims = {"Alpha": ["Alpha is the first rule."], "Beta": ["Beta is the second rule."],
                  "Gamma": ["Gamma is the third rule.", "Gamma has a second claim."]}
    llm.held = {"Gamma"}
    for ref in ("alpha", "beta", "gamma"):
        capture(client, ref, f"The {ref} document.")
    distiller = client.post(DISTILLERS, {"memory_store_id": store.pk}, format="json").json()

    async_task("memory_engine.tasks.distillers_tick_task")
    wait_for(lambda: llm.calls("Gamma") == 1, timeout=90)  # alpha and beta are written, gamma is asked
    assert DistillerVersion.objects.filter(distiller_id=distiller["id"], status="done").count() == 2
    os.killpg(qcluster.pid, signal.SIGKILL)  # the worker dies mid-tick
    qcluster.wait(timeout=20)
    llm.release.set()

    mine = {"distiller_id": distiller["id"], "project_id": project.pk}
    assert distiller_tick(**mine) is None  # its lease still holds the distiller
    Distiller.objects.filter(pk=distiller["id"]).update(leased_until=timezone.now() - timedelta(seconds=1))
    run = distiller_tick(**mine)  # the lease has run out: this tick takes over
    assert run is not None and (run.counts["versions"], run.counts["created"]) == (1, 2)
    assert llm.calls("Alpha") == 1 and llm.calls("Beta") == 1  # nothing done is read again
    texts = [m.content.text for m in Memory.objects.filter(store=store).select_related("content")]
    assert sorted(texts) == sorted(["Alpha is the first rule.", "Beta is the second rule.", "Gamma is the third rule.",
                                    "Gamma has a second claim."])  # each claim once
    assert MemoryDerivation.objects.filter(memory__store=store).count() == 4
    assert MemoryAssertion.objects.filter(memory__store=store, outcome="created").count() == 4
