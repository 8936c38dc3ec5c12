"""django-q2 entry points: each takes ids only, re-fetches its rows and calls a service."""

from __future__ import annotations

from typing import Any


def memory_rule_fire_task(rule_id: str, generation_id: str) -> dict[str, Any] | None:
    """Run one memory rule on one completed generation (enqueued by the signal receiver)."""
    from memory_engine.services.rules import memory_rule_fire

    return memory_rule_fire(rule_id=rule_id, generation_id=generation_id)
