"""The admin never shows a stored secret: converter secrets, rule HMAC secrets, provider API
keys and tokens in handler URLs stay hidden on change forms, read-only views, lists and
console pages; secrets are write-only (the blank or the mask sent back keeps the old value)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from memory_engine.models import IngestionRule, MemoryRule

from .conftest import World, staff_user

A = "/admin/memory_engine"
CONVERTER_SECRET = "conv-secret-4f8a9c"
HMAC_SECRET = "hmac-secret-77b2e1"
API_KEY = "sk-operator-key-51d0"
URL_TOKEN = "url-token-9e3c2a"
SECRETS = (CONVERTER_SECRET, HMAC_SECRET, API_KEY, URL_TOKEN)


@pytest.fixture
def secret_rules(mine: World) -> tuple[IngestionRule, MemoryRule, MemoryRule]:
    converter = IngestionRule.objects.create(
        project=mine.project, name="ocr", content_type_glob="image/png", converter_type="http",
        converter_url=f"http://127.0.0.1:9/ocr?token={URL_TOKEN}", converter_secret=CONVERTER_SECRET)
    http_rule = MemoryRule.objects.create(store=mine.store, handler_type="http", handler_config={
        "url": f"http://127.0.0.1:9/facts?token={URL_TOKEN}", "secret": HMAC_SECRET})
    builtin = MemoryRule.objects.create(store=mine.store, handler_type="builtin", handler_config={
        "model": "m", "provider": {"BASE_URL": "http://127.0.0.1:9/v1", "API_KEY": API_KEY}})
    return converter, http_rule, builtin


def login(username: str, codenames: list[str] | None, world: World) -> Client:
    user = staff_user(username, codenames=codenames)
    world.project.members.add(user)
    client = Client()
    client.force_login(user)
    return client


def assert_no_secret(client: Client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, url
    body = response.content.decode()
    leaked = [s for s in SECRETS if s in body]
    assert not leaked, (url, leaked)
    return body


def pages(mine: World, converter: IngestionRule, http_rule: MemoryRule, builtin: MemoryRule) -> list[str]:
    return [
        f"{A}/ingestionrule/", f"{A}/ingestionrule/{converter.pk}/change/",
        f"{A}/memoryrule/", f"{A}/memoryrule/{http_rule.pk}/change/", f"{A}/memoryrule/{builtin.pk}/change/",
        f"{A}/ingestionrule/tester/?project={mine.project.pk}&content_type=image/png",
        f"{A}/project/{mine.project.pk}/overview/", f"{A}/generation/{mine.generation.pk}/change/",
    ]


def test_view_only_user_sees_no_secret(mine: World, theirs: World, secret_rules: Any) -> None:
    viewer = login("viewer", ["view_project", "view_ingestionrule", "view_memoryrule", "view_generation"], mine)
    for url in pages(mine, *secret_rules):
        assert_no_secret(viewer, url)
    converter, http_rule, builtin = secret_rules
    page = viewer.get(f"{A}/ingestionrule/{converter.pk}/change/").content.decode()
    assert "converter secret" in page.lower() and ">set<" in page.replace(" ", "")
    rule_page = viewer.get(f"{A}/memoryrule/{builtin.pk}/change/").content.decode()
    assert "***" in rule_page and "sk-" not in rule_page


def test_editor_sees_masks_not_secrets(member_client: Client, mine: World, secret_rules: Any) -> None:
    for url in pages(mine, *secret_rules):
        if "/memoryrule/" in url and url.endswith("/change/"):
            body = member_client.get(url).content.decode()
            leaked = [s for s in (CONVERTER_SECRET, HMAC_SECRET, API_KEY) if s in body]
            assert not leaked and "***" in body, (url, leaked)  # editors see the URL they may edit
        elif "/ingestionrule/" in url and url.endswith("/change/"):
            body = member_client.get(url).content.decode()
            assert CONVERTER_SECRET not in body and 'name="new_converter_secret"' in body
        else:
            assert_no_secret(member_client, url)


def rule_post(rule: MemoryRule, config: dict[str, Any]) -> dict[str, Any]:
    return {"store": rule.store_id, "on": rule.on, "enabled": "on", "handler_type": rule.handler_type,
            "handler_config": json.dumps(config)}


def test_masked_rule_secrets_are_kept_replaced_or_dropped(superuser_client: Client, mine: World,
                                                          secret_rules: Any) -> None:
    _, http_rule, builtin = secret_rules
    url = f"{A}/memoryrule/{http_rule.pk}/change/"
    shown = superuser_client.get(url).context["adminform"].form.initial["handler_config"]
    assert shown["secret"] == "***"
    # Sent back as shown (an edit of something else): the stored secret stays.
    response = superuser_client.post(url, rule_post(http_rule, {**shown, "timeout": 5}))
    assert response.status_code == 302, response.content.decode()[:2000]
    http_rule.refresh_from_db()
    assert http_rule.handler_config["secret"] == HMAC_SECRET and http_rule.handler_config["timeout"] == 5
    superuser_client.post(url, rule_post(http_rule, {**shown, "secret": "a-new-secret"}))
    http_rule.refresh_from_db()
    assert http_rule.handler_config["secret"] == "a-new-secret"
    superuser_client.post(url, rule_post(http_rule, {"url": shown["url"]}))
    http_rule.refresh_from_db()
    assert "secret" not in http_rule.handler_config
    # The provider key of a builtin rule likewise.
    url = f"{A}/memoryrule/{builtin.pk}/change/"
    shown = superuser_client.get(url).context["adminform"].form.initial["handler_config"]
    assert shown["provider"]["API_KEY"] == "***"
    response = superuser_client.post(url, rule_post(builtin, {**shown, "model": "m2"}))
    builtin.refresh_from_db()
    if response.status_code == 302:  # (an operator setting may forbid provider overrides altogether)
        assert builtin.handler_config["provider"]["API_KEY"] == API_KEY and builtin.handler_config["model"] == "m2"
    else:
        assert builtin.handler_config["provider"]["API_KEY"] == API_KEY


def test_converter_secret_is_write_only(superuser_client: Client, mine: World, secret_rules: Any) -> None:
    converter, _, _ = secret_rules
    url = f"{A}/ingestionrule/{converter.pk}/change/"
    form = {"project": mine.project.pk, "name": "ocr", "content_type_glob": "image/png", "converter_type": "http",
            "converter_path": "", "converter_url": converter.converter_url, "new_converter_secret": "",
            "converter_timeout": "60", "native_extraction": "first", "file_delivery": "base64",
            "chunk_strategy": "", "chunk_size": "", "chunk_overlap": "", "enabled": "on"}
    response = superuser_client.post(url, form)
    assert response.status_code == 302, response.content.decode()[:3000]
    converter.refresh_from_db()
    assert converter.converter_secret == CONVERTER_SECRET  # blank keeps it
    superuser_client.post(url, {**form, "new_converter_secret": "rotated-secret"})
    converter.refresh_from_db()
    assert converter.converter_secret == "rotated-secret"
    # A failed validation does not echo the typed secret back either.
    bad = superuser_client.post(url, {**form, "converter_url": "", "new_converter_secret": "typed-99"})
    assert bad.status_code == 200 and "typed-99" not in bad.content.decode()
    superuser_client.post(url, {**form, "clear_converter_secret": "on"})
    converter.refresh_from_db()
    assert converter.converter_secret == ""
