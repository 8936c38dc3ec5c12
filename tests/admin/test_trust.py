"""Only superusers may name code in the admin: a staff member with every change permission goes
through the same allow-lists as an API key, so neither a rule's dry run nor an upload can run a
callable of their choosing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from memory_engine.models import IngestionRule, MemoryRule
from tests.hardening import evil

from .conftest import World

A = "/admin/memory_engine"
EVIL = "tests.hardening.evil.record"


@pytest.fixture(autouse=True)
def _fresh_calls() -> Iterator[None]:
    evil.CALLS.clear()
    yield
    evil.CALLS.clear()


def memory_rule_form(world: World, path: str) -> dict[str, Any]:
    return {"store": world.store.pk, "on": "generation.completed", "enabled": "on", "handler_type": "callable",
            "handler_config": f'{{"path": "{path}"}}'}


def ingestion_rule_form(world: World, path: str) -> dict[str, Any]:
    return {"project": world.project.pk, "name": "", "content_type_glob": "image/png", "converter_type": "callable",
            "converter_path": path, "converter_url": "", "converter_secret": "", "converter_timeout": "60",
            "native_extraction": "first", "file_delivery": "base64", "chunk_strategy": "", "chunk_size": "",
            "chunk_overlap": "", "enabled": "on"}


def test_staff_cannot_name_a_callable_outside_the_allow_lists(member_client: Client, mine: World) -> None:
    rules = set(MemoryRule.objects.values_list("pk", flat=True))
    added = member_client.post(f"{A}/memoryrule/add/", memory_rule_form(mine, EVIL))
    assert added.status_code == 200 and "CALLABLE_NOT_ALLOWED" in added.content.decode()
    changed = member_client.post(f"{A}/memoryrule/{mine.rule.pk}/change/", memory_rule_form(mine, EVIL))
    assert changed.status_code == 200 and "CALLABLE_NOT_ALLOWED" in changed.content.decode()
    assert set(MemoryRule.objects.values_list("pk", flat=True)) == rules
    mine.rule.refresh_from_db()
    assert mine.rule.handler_config == {"path": "tests.admin.handlers.fact_lines"}
    # The dry run runs the stored rule, which still names the superuser's callable.
    member_client.post(f"{A}/memoryrule/{mine.rule.pk}/dry-run/", {"transcript": "user: fact x"})
    converter = member_client.post(f"{A}/ingestionrule/add/", ingestion_rule_form(mine, EVIL))
    assert converter.status_code == 200 and "CONVERTER_NOT_ALLOWED" in converter.content.decode()
    assert not IngestionRule.objects.filter(content_type_glob="image/png").exists()
    assert evil.CALLS == []


def test_staff_may_name_allow_listed_callables(member_client: Client, mine: World, settings: Any) -> None:
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "RULE_CALLABLE_PREFIXES": ["tests.hardening.evil"],
                              "CONVERTER_CALLABLE_PREFIXES": ["tests.hardening.evil"]}
    assert member_client.post(f"{A}/memoryrule/add/", memory_rule_form(mine, EVIL)).status_code == 302
    assert member_client.post(f"{A}/ingestionrule/add/", ingestion_rule_form(mine, EVIL)).status_code == 302


def test_superusers_may_name_any_callable(superuser_client: Client, mine: World) -> None:
    assert superuser_client.post(f"{A}/memoryrule/add/", memory_rule_form(mine, EVIL)).status_code == 302
    assert superuser_client.post(f"{A}/ingestionrule/add/", ingestion_rule_form(mine, EVIL)).status_code == 302
    assert MemoryRule.objects.filter(handler_config__path=EVIL).exists()
    assert evil.CALLS == []  # validated by importing, never by calling
