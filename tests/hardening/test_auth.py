"""Authentication: revoked/expired keys, keys of a deleted project, throttling of failed
authentication, secrets never logged, and keys stored only as hashes."""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import timedelta
from typing import Any

import pytest
from django.core.cache import cache
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.utils import timezone

from memory_engine.models import ApiKey, Generation, MemoryRule
from memory_engine.services.generations import record_generation
from memory_engine.services.ingestion_rules import ingestion_rule_save
from memory_engine.services.keys import api_key_create, api_key_revoke
from memory_engine.services.rules import memory_rule_fire
from memory_engine.services.stores import project_delete
from tests.conftest import api_client
from tests.factories import AgentFactory, MemoryStoreFactory, ProjectFactory, make_key
from tests.httpserver import LocalServer

pytestmark = pytest.mark.django_db

STORES = "/api/v1/memory-stores"


@pytest.fixture(autouse=True)
def _clean_throttle_cache() -> None:
    cache.clear()


def assert_auth_failed(response: Any) -> None:
    body = response.json()
    assert response.status_code == 401, body
    assert body["code"] == "AUTHENTICATION_FAILED" and body["message"]


# --------------------------------------------------------------------------- keys


def test_revoked_key_is_refused(project: Any) -> None:
    key, raw = api_key_create(project=project)
    client = api_client(raw)
    assert client.get(STORES).status_code == 200
    api_key_revoke(key=key)
    assert_auth_failed(client.get(STORES))


def test_expired_key_is_refused(project: Any) -> None:
    _, raw = api_key_create(project=project, expires_at=timezone.now() - timedelta(seconds=1))
    assert_auth_failed(api_client(raw).get(STORES))
    _, fresh = api_key_create(project=project, expires_at=timezone.now() + timedelta(hours=1))
    assert api_client(fresh).get(STORES).status_code == 200


def test_key_of_a_deleted_project_is_refused() -> None:
    project = ProjectFactory()
    MemoryStoreFactory(project=project)
    raw = make_key(project)
    client = api_client(raw)
    assert client.get(STORES).json()["count"] == 1
    project_delete(project=project)
    assert_auth_failed(client.get(STORES))
    assert not ApiKey.objects.filter(prefix=raw.split("_")[1]).exists()


@pytest.mark.parametrize("header", [
    "Bearer me_nope_nope", "Bearer not-a-key", "Bearer me_x", "Bearer a b", "Bearer \u00e9t\u00e9",
])
def test_malformed_and_unknown_keys_are_401(header: str) -> None:
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    assert_auth_failed(client.get(STORES))


def test_wrong_secret_for_a_real_prefix_is_401(project: Any) -> None:
    raw = make_key(project)
    forged = raw[:-4] + ("AAAA" if not raw.endswith("AAAA") else "BBBB")
    assert_auth_failed(api_client(forged).get(STORES))


# --------------------------------------------------------------------------- throttling


def test_failed_authentication_is_throttled_per_address(settings: Any, project: Any) -> None:
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "AUTH_FAILURE_RATE": "5/min"}
    bad = api_client("me_deadbeef_wrong")
    for _ in range(5):
        assert_auth_failed(bad.get(STORES))
    throttled = bad.get(STORES)
    body = throttled.json()
    assert throttled.status_code == 429 and body["code"] == "THROTTLED", body
    assert 0 < int(throttled["Retry-After"]) <= 60
    # Failing keys from the address stay refused until the window passes; a valid key never is.
    assert bad.get(STORES).status_code == 429
    good = make_key(project)
    assert api_client(good).get(STORES).status_code == 200
    assert_auth_failed(api_client("me_deadbeef_other").get(STORES, REMOTE_ADDR="10.0.0.7"))
    # Requests without credentials are not counted as failures.
    cache.clear()
    from rest_framework.test import APIClient

    for _ in range(10):
        assert APIClient().get(STORES).status_code in (401, 403)
    assert api_client(good).get(STORES).status_code == 200


def test_rotating_x_forwarded_for_does_not_bypass_the_throttle(settings: Any) -> None:
    """Without trusted proxies (NUM_PROXIES 0, the default) the header is the client's word."""
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "AUTH_FAILURE_RATE": "5/min"}
    bad = api_client("me_deadbeef_wrong")
    for n in range(5):
        assert_auth_failed(bad.get(STORES, HTTP_X_FORWARDED_FOR=f"198.51.100.{n}"))
    rotated = bad.get(STORES, HTTP_X_FORWARDED_FOR="203.0.113.99")
    assert rotated.status_code == 429 and rotated.json()["code"] == "THROTTLED"


def test_forged_failures_never_lock_out_a_valid_key(settings: Any, project: Any) -> None:
    """Bad keys sent "from" 127.0.0.1 (by header or for real) cannot refuse the real client there."""
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "AUTH_FAILURE_RATE": "5/min"}
    bad = api_client("me_deadbeef_wrong")
    for _ in range(25):
        bad.get(STORES, REMOTE_ADDR="10.6.6.6", HTTP_X_FORWARDED_FOR="127.0.0.1")
        bad.get(STORES, REMOTE_ADDR="127.0.0.1")
    assert bad.get(STORES, REMOTE_ADDR="127.0.0.1").status_code == 429
    good = api_client(make_key(project))
    for _ in range(3):
        assert good.get(STORES, REMOTE_ADDR="127.0.0.1").status_code == 200
        assert good.get(STORES, REMOTE_ADDR="10.6.6.6", HTTP_X_FORWARDED_FOR="127.0.0.1").status_code == 200


def test_behind_trusted_proxies_the_proxy_appended_hop_counts(settings: Any) -> None:
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "AUTH_FAILURE_RATE": "3/min", "NUM_PROXIES": 1}
    bad = api_client("me_deadbeef_wrong")
    proxy = {"REMOTE_ADDR": "10.0.0.1"}  # every request arrives from the proxy
    for n in range(3):  # the client rotates what it writes; the proxy appends the real address
        assert_auth_failed(bad.get(STORES, HTTP_X_FORWARDED_FOR=f"192.0.2.{n}, 198.51.100.7", **proxy))
    assert bad.get(STORES, HTTP_X_FORWARDED_FOR="192.0.2.200, 198.51.100.7", **proxy).status_code == 429
    # Another client behind the same proxy keeps its own budget.
    assert_auth_failed(bad.get(STORES, HTTP_X_FORWARDED_FOR="198.51.100.8", **proxy))


def test_successful_requests_do_not_use_the_failure_budget(settings: Any, project: Any) -> None:
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "AUTH_FAILURE_RATE": "3/min"}
    client = api_client(make_key(project))
    for _ in range(10):
        assert client.get(STORES).status_code == 200


def test_failed_auth_throttle_can_be_disabled(settings: Any) -> None:
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "AUTH_FAILURE_RATE": None}
    bad = api_client("me_deadbeef_wrong")
    for _ in range(30):
        assert_auth_failed(bad.get(STORES))


def test_project_rate_falls_back_to_engine_setting(settings: Any, project: Any,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from memory_engine.api.throttling import ProjectRateThrottle

    monkeypatch.setattr(ProjectRateThrottle, "THROTTLE_RATES", {})  # a host that names no 'project' rate
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "PROJECT_RATE": "3/min"}
    client = api_client(make_key(project))
    statuses = [client.get(STORES).status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]


# --------------------------------------------------------------------------- secrets never logged

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 64


def all_logged(caplog: Any) -> str:
    parts = []
    for record in caplog.records:
        parts.append(record.getMessage())
        parts.append(json.dumps({k: str(v) for k, v in record.__dict__.items()
                                 if k not in ("msg", "args", "exc_info")}))
        if record.exc_info:
            parts.append(logging.Formatter().formatException(record.exc_info))
    return "\n".join(parts)


def test_secrets_never_logged(caplog: Any, settings: Any, hashing_embedder: None, project: Any) -> None:
    """A write with a key, a rule firing with an HTTP handler secret, an HTTP converter with a
    secret and an LLM call with an API key, each answered once with an error that echoes the
    request's headers and once with success: no raw secret in any log record (nor in the
    errors stored on rows)."""
    caplog.set_level(logging.DEBUG)
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "HTTP_RETRIES": 0}
    raw_key = make_key(project)
    handler_secret = "handler-secret-" + "h" * 24
    converter_secret = "converter-secret-" + "c" * 24
    llm_key = "sk-llm-" + "k" * 32
    secrets = [raw_key, raw_key.split("_", 2)[2], handler_secret, converter_secret, llm_key]

    def echo(fail: bool, success: Any) -> Any:
        def answer(method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, Any]:
            if fail:
                return 401, {"error": f"rejected: {json.dumps(headers)}"}
            return 200, success
        return answer

    store = MemoryStoreFactory(project=project)
    agent = AgentFactory(project=project)
    client = api_client(raw_key)
    assert client.post("/api/v1/memories", {"memory_store_id": store.pk, "content": "Tea is green."},
                       format="json").status_code == 201
    assert_auth_failed(api_client(raw_key[:-3] + "xyz").get(STORES))

    chat = {"choices": [{"message": {"role": "assistant", "content": '["The user likes tea."]'}}]}
    for fail in (True, False):
        with LocalServer(echo(fail, {"facts": ["The user drinks tea daily."]})) as handler_server, \
                LocalServer(echo(fail, chat)) as llm_server:
            http_rule = MemoryRule.objects.create(
                store=store, handler_type="http",
                handler_config={"url": f"{handler_server.url}/facts?token=url-secret-abcdef123",
                                "secret": handler_secret})
            llm_rule = MemoryRule.objects.create(
                store=store, handler_type="builtin", handler_config={
                    "model": "m", "provider": {"BASE_URL": f"{llm_server.url}/v1", "API_KEY": llm_key}})
            generation = record_generation(agent=agent, input_messages=[{"role": "user", "content": "I like tea"}],
                                           output="Noted.", status="completed")
            for rule in (http_rule, llm_rule):
                memory_rule_fire(rule_id=rule.pk, generation_id=generation.pk)
            http_rule.delete()
            llm_rule.delete()
        with LocalServer(echo(fail, {"pages": [{"text": "Converted text.", "page": 1}]})) as converter:
            rule = ingestion_rule_save(project=project, content_type_glob="image/png", converter_type="http",
                                       converter_url=converter.url, converter_secret=converter_secret,
                                       converter_timeout=5)
            response = client.post("/api/v1/documents/ingest",
                                   {"file": SimpleUploadedFile(f"scan-{fail}.png", PNG, "image/png"), "wait": True},
                                   format="multipart")
            assert response.status_code == 201, response.content[:300]
            assert response.json()["status"] == ("failed" if fail else "ready"), response.json()
            rule.delete()
    secrets.append("url-secret-abcdef123")

    logged = all_logged(caplog)
    assert "rule" in logged and "memory write" in logged  # the decisions and firings were logged
    stored = json.dumps([list(Generation.objects.values_list("extraction", flat=True)),
                         [str(e) for e in project.documents.values_list("error", flat=True)]])
    for secret in secrets:
        assert secret not in logged, f"a secret was logged: {secret[:12]}…"
        assert secret not in stored, f"a secret was stored in an error: {secret[:12]}…"


def test_write_decisions_and_rule_firings_are_logged_with_ids(caplog: Any, hashing_embedder: None,
                                                              project: Any, store: Any) -> None:
    caplog.set_level(logging.INFO, logger="memory_engine")
    client = api_client(make_key(project))
    body = client.post("/api/v1/memories", {"memory_store_id": store.pk, "content": "Coffee is black."},
                       format="json").json()
    record = next(r for r in caplog.records if r.name == "memory_engine.write")
    assert record.memory_id == body["id"] and record.assertion_id == body["assertion_id"]
    assert record.store_id == store.pk and record.outcome == "created" and record.mechanism == "api"
    assert body["id"] in record.getMessage()


# --------------------------------------------------------------------------- keys at rest


def test_api_keys_are_stored_hashed(project: Any) -> None:
    raws = [make_key(project), make_key(project, read_only=True)]
    with connection.cursor() as cursor:
        cursor.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")
        tables = [row[0] for row in cursor.fetchall()]
        dump = []
        for table in tables:
            cursor.execute(f'SELECT row_to_json(t)::text FROM "{table}" t')
            dump.extend(row[0] for row in cursor.fetchall())
        cursor.execute("SELECT prefix, hashed_key FROM memory_engine_apikey")
        rows = dict(cursor.fetchall())
    text = "\n".join(dump)
    for raw in raws:
        _, prefix, secret = raw.split("_", 2)
        assert raw not in text and secret not in text, "a raw API key is in the database"
        # Only the public prefix and a SHA-256 of 256 random bits are stored: nothing to invert.
        assert rows[prefix] == hashlib.sha256(raw.encode()).hexdigest()
        assert len(secret) >= 43
