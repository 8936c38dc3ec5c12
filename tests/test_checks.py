"""System checks on the host's settings: warnings for a task queue that would re-deliver or
kill the engine's long tasks, and for connections that would not recover from a restart."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection

from memory_engine.checks import check_connection_health, check_task_queue

#: The README's recommended Q_CLUSTER (also the example project's).
SAFE = {"name": "memory_engine", "orm": "default", "timeout": 600, "retry": 900,
        "max_attempts": 1, "ack_failures": True}


def ids(messages: list[Any]) -> list[str]:
    return [message.id for message in messages]


def test_the_recommended_q_cluster_gives_no_warning(settings: Any) -> None:
    settings.Q_CLUSTER = SAFE
    assert check_task_queue() == []


@pytest.mark.parametrize("q_cluster", [
    {"name": "memory_engine", "orm": "default"},  # the old README snippet: no timeout, retry 60
    {**SAFE, "retry": 600},                          # retry == timeout: a race at the boundary
    {**SAFE, "retry": 300},
])
def test_retry_not_above_timeout_warns(settings: Any, q_cluster: dict[str, Any]) -> None:
    settings.Q_CLUSTER = q_cluster
    warnings = check_task_queue()
    assert "memory_engine.W001" in ids(warnings)
    assert "run twice" in warnings[0].msg


def test_timeout_reaching_the_rule_firing_timeout_warns(settings: Any) -> None:
    settings.Q_CLUSTER = {**SAFE, "timeout": 900, "retry": 1200}
    assert ids(check_task_queue()) == ["memory_engine.W002"]
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "RULE_FIRING_TIMEOUT": 1800}
    assert check_task_queue() == []


def test_timeout_shorter_than_one_outbound_call_warns(settings: Any) -> None:
    settings.Q_CLUSTER = {**SAFE, "timeout": 120, "retry": 180}
    warnings = check_task_queue()
    assert ids(warnings) == ["memory_engine.W003"]
    assert "HTTP_MAX_SECONDS" in warnings[0].msg
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "HTTP_MAX_SECONDS": 90}
    assert check_task_queue() == []


def test_unlimited_attempts_warn(settings: Any) -> None:
    settings.Q_CLUSTER = {key: value for key, value in SAFE.items() if key != "max_attempts"}
    assert ids(check_task_queue()) == ["memory_engine.W004"]


def test_a_synchronous_queue_is_not_checked(settings: Any) -> None:
    settings.Q_CLUSTER = {"name": "memory_engine", "sync": True}
    assert check_task_queue() == []


@pytest.mark.parametrize(("max_age", "pool", "warns"), [
    (60, None, True),     # persistent connections keep a broken one after a restart
    (None, None, True),   # unlimited persistence too
    (0, {"min_size": 1}, True),  # the pool hands out unchecked connections
    (0, None, False),     # a new connection per request recovers by itself
])
def test_connection_health_checks_off(monkeypatch: pytest.MonkeyPatch, max_age: int | None,
                                      pool: dict[str, Any] | None, warns: bool) -> None:
    monkeypatch.setitem(connection.settings_dict, "CONN_HEALTH_CHECKS", False)
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", max_age)
    monkeypatch.setitem(connection.settings_dict, "OPTIONS", {"pool": pool} if pool else {})
    assert ids(check_connection_health()) == (["memory_engine.W005"] if warns else [])
    monkeypatch.setitem(connection.settings_dict, "CONN_HEALTH_CHECKS", True)
    assert check_connection_health() == []


def test_manage_py_check_prints_the_warning(db: Any, settings: Any, capsys: pytest.CaptureFixture[str]) -> None:
    settings.Q_CLUSTER = {"name": "memory_engine", "orm": "default"}
    call_command("check")
    captured = capsys.readouterr()
    output = captured.out + captured.err
    assert "memory_engine.W001" in output and "memory_engine.W004" in output
