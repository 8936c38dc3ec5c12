"""Attacks on what configuration makes the server do (docs/security.md, "Guards"): stealing the
operator's LLM key through a rule, running code named by import path, and calls to private
addresses (SSRF). Each test performs the attack through the API against real HTTP servers on
127.0.0.1 and checks what the attacker got: nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from memory_engine.models import Document, Generation, IngestionRule, MemoryRule
from memory_engine.services.rules import memory_rule_fire
from tests.factories import AgentFactory
from tests.httpserver import LocalServer
from tests.rules.servers import FakeLLM, FakeServer

from . import evil

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("hashing_embedder")]

OPERATOR_KEY = "sk-operator-0123456789abcdef"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


def engine(settings: Any, **values: Any) -> None:
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, **values}


@pytest.fixture(autouse=True)
def _fresh_calls() -> Iterator[None]:
    evil.CALLS.clear()
    yield
    evil.CALLS.clear()


@pytest.fixture(autouse=True)
def media_root(settings: Any, tmp_path: Any) -> None:
    settings.MEDIA_ROOT = str(tmp_path / "media")


@pytest.fixture
def operator_llm(settings: Any) -> Iterator[FakeLLM]:
    """The deployment's own LLM endpoint and key."""
    server = FakeLLM()
    engine(settings, LLM={"BASE_URL": server.base_url, "API_KEY": OPERATOR_KEY, "MODEL": "operator-model",
                          "TIMEOUT": 2, "RETRIES": 0}, HTTP_RETRIES=0)
    yield server
    server.close()


@pytest.fixture
def attacker() -> Iterator[FakeLLM]:
    """An OpenAI-compatible endpoint run by the tenant, collecting what it is sent."""
    server = FakeLLM()
    yield server
    server.close()


@pytest.fixture
def agent(project: Any) -> Any:
    return AgentFactory(project=project)


def rules_url(store: Any) -> str:
    return f"/api/v1/memory-stores/{store.pk}/rules"


def complete_turn(client: Any, agent: Any, capture: Any) -> Generation:
    """A completed generation through the API; the rules it fires run inline."""
    with capture(execute=True):
        response = client.post("/api/v1/generations", {
            "agent_id": agent.pk, "input_messages": [{"role": "user", "content": "I prefer tea."}],
            "output": "Noted.", "status": "completed"}, format="json")
    assert response.status_code == 201, response.data
    return Generation.objects.get(pk=response.data["id"])


def sent_headers(server: FakeServer) -> str:
    return json.dumps([request["headers"] for request in server.received])


# --- the operator's LLM key -------------------------------------------------------------------


def test_a_rule_cannot_point_the_operators_key_at_another_server(
        client: Any, store: Any, agent: Any, operator_llm: FakeLLM, attacker: FakeLLM,
        django_capture_on_commit_callbacks: Any) -> None:
    response = client.post(rules_url(store), {"handler": {"type": "builtin",
                                                          "provider": {"BASE_URL": attacker.base_url}}}, format="json")
    complete_turn(client, agent, django_capture_on_commit_callbacks)
    assert OPERATOR_KEY not in sent_headers(attacker)
    assert attacker.received == []
    assert response.status_code == 400 and response.data["code"] == "LLM_OVERRIDE_NOT_ALLOWED"
    assert response.data["details"]["refused"] == ["BASE_URL"]
    assert not MemoryRule.objects.exists()


def test_an_allowed_base_url_never_inherits_the_operators_key(
        client: Any, store: Any, agent: Any, operator_llm: FakeLLM, attacker: FakeLLM, settings: Any,
        django_capture_on_commit_callbacks: Any) -> None:
    engine(settings, LLM_OVERRIDABLE=["BASE_URL", "API_KEY"])
    response = client.post(rules_url(store), {"handler": {"type": "builtin",
                                                          "provider": {"BASE_URL": attacker.base_url}}}, format="json")
    assert response.status_code == 201, response.data
    generation = complete_turn(client, agent, django_capture_on_commit_callbacks)
    assert generation.extraction[response.data["id"]]["error"] is None
    assert len(attacker.received) == 1 and operator_llm.received == []
    assert OPERATOR_KEY not in sent_headers(attacker)
    assert "authorization" not in {name.lower() for name in attacker.received[0]["headers"]}
    # A rule may bring its own key for its own endpoint (when the operator allows API_KEY).
    rule = MemoryRule.objects.get()
    patched = client.patch(f"{rules_url(store)}/{rule.pk}", {"handler": {
        "type": "builtin", "provider": {"BASE_URL": attacker.base_url, "API_KEY": "sk-tenant-own-key"}}},
        format="json")
    assert patched.status_code == 200, patched.data
    complete_turn(client, agent, django_capture_on_commit_callbacks)
    assert attacker.received[-1]["headers"]["Authorization"] == "Bearer sk-tenant-own-key"
    assert OPERATOR_KEY not in sent_headers(attacker)


def test_a_stored_rule_is_checked_again_when_it_runs(store: Any, agent: Any, operator_llm: FakeLLM,
                                                     attacker: FakeLLM) -> None:
    """A rule saved before the operator narrowed LLM_OVERRIDABLE (or before the upgrade)."""
    rule = MemoryRule.objects.create(store=store, handler_type="builtin",
                                     handler_config={"provider": {"BASE_URL": attacker.base_url}})
    generation = Generation.objects.create(project=store.project, agent=agent, output="I prefer tea.",
                                           status="completed")
    counts = memory_rule_fire(rule_id=rule.pk, generation_id=generation.pk)
    assert attacker.received == [] and operator_llm.received == []
    assert counts["error"]["code"] == "LLM_OVERRIDE_NOT_ALLOWED"


def test_the_operator_decides_what_a_rule_may_spend(client: Any, store: Any, operator_llm: FakeLLM,
                                                     settings: Any) -> None:
    model = client.post(rules_url(store), {"handler": {"type": "builtin", "model": "the-priciest-model"}},
                        format="json")
    assert model.status_code == 400 and model.data["code"] == "LLM_OVERRIDE_NOT_ALLOWED"
    retries = client.post(rules_url(store), {"handler": {"type": "builtin", "provider": {"RETRIES": 500}}},
                          format="json")
    assert retries.status_code == 400 and retries.data["details"]["refused"] == ["RETRIES"]
    default = client.post(rules_url(store), {"handler": {"type": "builtin", "prompt": "Only names.",
                                                         "max_tokens": 200}}, format="json")
    assert default.status_code == 201, default.data
    engine(settings, LLM_OVERRIDABLE=["MODEL"])
    assert client.post(rules_url(store), {"handler": {"type": "builtin", "model": "m"}},
                       format="json").status_code == 201


# --- code named by import path ----------------------------------------------------------------


def test_an_http_rule_cannot_be_turned_into_arbitrary_code(client: Any, project: Any, settings: Any) -> None:
    engine(settings, CONVERTER_CALLABLE_PREFIXES=["tests.documents"])
    parked = client.post("/api/v1/ingestion-rules", {
        "content_type_glob": "image/*", "converter_type": "http", "converter_url": "http://127.0.0.1:9/",
        "converter_path": "tests.hardening.evil.record"}, format="json")
    assert parked.status_code == 400 and parked.json()["code"] == "INGESTION_RULE_INVALID"
    # A row that already carries a path (saved before this check) cannot switch type either.
    rule = IngestionRule.objects.create(project=project, content_type_glob="image/*", converter_type="http",
                                        converter_url="http://127.0.0.1:9/",
                                        converter_path="tests.hardening.evil.record")
    swapped = client.patch(f"/api/v1/ingestion-rules/{rule.pk}", {"converter_type": "callable"}, format="json")
    assert swapped.status_code == 400 and swapped.json()["code"] == "CONVERTER_NOT_ALLOWED"
    rule.refresh_from_db()
    assert rule.converter_type == "http"
    client.post("/api/v1/documents/ingest", {"file": SimpleUploadedFile("scan.png", PNG, content_type="image/png"),
                                             "wait": "true"}, format="multipart")
    assert evil.CALLS == []


@pytest.mark.parametrize("path, allowed", [
    ("tests.hardening.evil.conv", True),
    ("tests.hardening.evil.conv_evil", False),
])
def test_allow_lists_end_on_a_dot(client: Any, store: Any, settings: Any, path: str, allowed: bool) -> None:
    engine(settings, CONVERTER_CALLABLE_PREFIXES=["tests.hardening.evil.conv"],
           RULE_CALLABLE_PREFIXES=["tests.hardening.evil.conv"])
    converter = client.post("/api/v1/ingestion-rules", {"content_type_glob": "image/*", "converter_type": "callable",
                                                        "converter_path": path}, format="json")
    rule = client.post(rules_url(store), {"handler": {"type": "callable", "path": path}}, format="json")
    if allowed:
        assert (converter.status_code, rule.status_code) == (201, 201)
    else:
        assert converter.status_code == 400 and converter.json()["code"] == "CONVERTER_NOT_ALLOWED"
        assert rule.status_code == 400 and rule.json()["code"] == "CALLABLE_NOT_ALLOWED"
    assert evil.CALLS == []


# --- outbound addresses (SSRF) ------------------------------------------------------------------


PRIVATE_URLS = [
    "http://127.0.0.1:{port}/x",
    "http://localhost:{port}/x",
    "http://[::1]:{port}/x",
    "http://[::ffff:127.0.0.1]:{port}/x",
    "http://0.0.0.0:{port}/x",
    "http://10.1.2.3/x",
    "http://192.168.0.10/x",
    "http://169.254.169.254/latest/meta-data/",
]


@pytest.fixture
def victim() -> Iterator[FakeServer]:
    """A service on a private address that must not be reached."""
    server = FakeServer(lambda request: (200, {"facts": ["stolen"], "pages": ["stolen"]}, 0))
    yield server
    server.close()


@pytest.mark.parametrize("template", PRIVATE_URLS)
def test_private_urls_are_refused_when_configured(client: Any, store: Any, settings: Any, victim: FakeServer,
                                                  template: str) -> None:
    engine(settings, OUTBOUND_ALLOW=[], LLM_OVERRIDABLE=["BASE_URL"])
    url = template.format(port=victim.url.rsplit(":", 1)[1])
    for response in (
        client.post(rules_url(store), {"handler": {"type": "http", "url": url}}, format="json"),
        client.post(rules_url(store), {"handler": {"type": "builtin", "provider": {"BASE_URL": url}}}, format="json"),
        client.post("/api/v1/ingestion-rules", {"content_type_glob": "image/*", "converter_type": "http",
                                                "converter_url": url}, format="json"),
    ):
        assert response.status_code == 400 and response.json()["code"] == "URL_NOT_ALLOWED", response.json()
    assert not MemoryRule.objects.exists() and not IngestionRule.objects.exists()
    assert victim.received == []


def test_link_local_needs_an_entry_inside_it(client: Any, store: Any, settings: Any) -> None:
    metadata = {"handler": {"type": "http", "url": "http://169.254.169.254/latest/meta-data/"}}
    engine(settings, OUTBOUND_ALLOW=["0.0.0.0/0", "::/0", "169.254.169.254.example"])
    assert client.post(rules_url(store), {"handler": {"type": "http", "url": "http://10.1.2.3/x"}},
                       format="json").status_code == 201
    refused = client.post(rules_url(store), metadata, format="json")
    assert refused.status_code == 400 and refused.json()["code"] == "URL_NOT_ALLOWED"
    engine(settings, OUTBOUND_ALLOW=["169.254.169.254"])
    assert client.post(rules_url(store), metadata, format="json").status_code == 201


def test_stored_private_urls_are_refused_when_called(client: Any, project: Any, store: Any, agent: Any,
                                                     settings: Any, victim: FakeServer) -> None:
    """Rows saved before the guard, or whose name now resolves elsewhere: checked on connect."""
    engine(settings, OUTBOUND_ALLOW=[], LLM_OVERRIDABLE=["BASE_URL", "MODEL"], HTTP_RETRIES=0)
    port = victim.url.rsplit(":", 1)[1]
    generation = Generation.objects.create(project=project, agent=agent, output="I prefer tea.", status="completed")
    for config in ({"url": f"{victim.url}/extract"}, {"url": f"http://localhost:{port}/extract"}):
        rule = MemoryRule.objects.create(store=store, handler_type="http", handler_config=config)
        counts = memory_rule_fire(rule_id=rule.pk, generation_id=generation.pk)
        assert counts["error"]["code"] == "URL_NOT_ALLOWED" and counts["created"] == 0
    builtin = MemoryRule.objects.create(store=store, handler_type="builtin",
                                        handler_config={"provider": {"BASE_URL": f"{victim.url}/v1", "MODEL": "m"}})
    assert memory_rule_fire(rule_id=builtin.pk, generation_id=generation.pk)["error"]["code"] == "URL_NOT_ALLOWED"
    IngestionRule.objects.create(project=project, content_type_glob="image/*", converter_type="http",
                                 converter_url=victim.url)
    response = client.post("/api/v1/documents/ingest", {
        "file": SimpleUploadedFile("scan.png", PNG, content_type="image/png"), "wait": "true"}, format="multipart")
    assert response.status_code in (200, 201), response.json()
    body = response.json()
    assert body["status"] == "failed" and body["error"]["code"] == "URL_NOT_ALLOWED"
    assert Document.objects.filter(pk=body["id"], status="failed").exists()  # recorded, never lost
    assert victim.received == []


def test_redirects_to_private_addresses_are_not_followed(project: Any, store: Any, agent: Any, settings: Any,
                                                         victim: FakeServer) -> None:
    engine(settings, OUTBOUND_ALLOW=["localhost"], HTTP_RETRIES=0)  # the handler's own host is allowed
    with LocalServer(lambda *request: (307, b"", {"Location": f"{victim.url}/steal"})) as redirector:
        port = redirector.url.rsplit(":", 1)[1]
        rule = MemoryRule.objects.create(store=store, handler_type="http",
                                         handler_config={"url": f"http://localhost:{port}/extract"})
        generation = Generation.objects.create(project=project, agent=agent, output="x", status="completed")
        counts = memory_rule_fire(rule_id=rule.pk, generation_id=generation.pk)
        assert len(redirector.requests) == 1
    assert victim.received == []
    assert counts["error"]["code"] == "HANDLER_HTTP_ERROR" and "redirect" in counts["error"]["message"]
