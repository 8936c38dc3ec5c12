"""Creating and changing memory rules: the handler configuration checked once, here."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import transaction

from memory_engine.exceptions import AgentNotFound, HandlerInvalid
from memory_engine.models import Agent, MemoryRule, MemoryStore
from memory_engine.policy import Principal, visible
from memory_engine.providers.rule_handlers import COMMON_KEYS, HANDLER_CLASSES, get_rule_handler
from memory_engine.text import contains_nul


def validate_rule_handler(*, handler_type: str, config: dict[str, Any], trusted: bool = False) -> dict[str, Any]:
    """Check a handler's configuration and return it cleaned.

    The guards of :mod:`memory_engine.guards` apply: API keys and staff (``trusted=False``)
    may only name callables under ``RULE_CALLABLE_PREFIXES`` (superusers any); a builtin
    handler may only change the LLM settings in ``LLM_OVERRIDABLE``; URLs (``url``, the
    provider's ``BASE_URL``) must pass the outbound guard, for everyone.
    """
    if handler_type not in HANDLER_CLASSES:
        raise HandlerInvalid(f"Unknown handler type {handler_type!r}.",
                             details={"type": handler_type, "allowed": sorted(HANDLER_CLASSES)})
    handler = get_rule_handler(handler_type)
    config = {k: v for k, v in (config or {}).items() if v is not None}
    if contains_nul(config):
        raise HandlerInvalid("The handler configuration must not contain NUL characters.")
    unknown = set(config) - handler.config_keys - COMMON_KEYS
    if unknown:
        raise HandlerInvalid(f"Unknown keys for a {handler_type} handler: {', '.join(sorted(unknown))}.",
                             details={"unknown": sorted(unknown)})
    for key in ("prompt", "model", "path", "url", "secret", "agent_id"):
        if key in config and not isinstance(config[key], str):
            raise HandlerInvalid(f"`{key}` must be a string.", details={"field": key})
    for key in ("timeout", "max_tokens", "retries"):
        if key in config and (isinstance(config[key], bool) or not isinstance(config[key], (int, float))
                              or config[key] < 0):
            raise HandlerInvalid(f"`{key}` must be a non-negative number.",
                                 details={"field": key})
    return handler.validate_config(config, trusted=trusted)


def _project_agents(*, project_id: str, agent_ids: Iterable[str], caller: Principal) -> list[Agent]:
    """The agents named, each in the caller's reach (else AGENT_NOT_FOUND, as for an unknown id)."""
    wanted = list(dict.fromkeys(agent_ids))
    agents = list(visible(caller, Agent.objects.filter(project_id=project_id, pk__in=wanted)))
    missing = sorted(set(wanted) - {a.pk for a in agents})
    if missing:
        raise AgentNotFound("Some agent ids do not exist in your project.",
                            details={"agent_ids": missing})
    return agents


def _clean_handler(store: MemoryStore, handler_type: str, config: dict[str, Any], trusted: bool,
                   caller: Principal) -> dict[str, Any]:
    config = validate_rule_handler(handler_type=handler_type, config=config, trusted=trusted)
    if config.get("agent_id"):
        _project_agents(project_id=store.project_id, agent_ids=[config["agent_id"]], caller=caller)
    return config


@transaction.atomic
def memory_rule_create(
    *,
    store: MemoryStore,
    handler_type: str,
    handler_config: dict[str, Any] | None = None,
    source_agent_ids: Iterable[str] = (),
    enabled: bool = True,
    on: str = MemoryRule.On.GENERATION_COMPLETED,
    trusted: bool = False,
    caller: Principal,
) -> MemoryRule:
    """A rule on ``store`` acting as ``caller`` (its firings write only where the caller's grants
    allow ``add``, checked again at each firing); ``trusted`` (superusers) may name any callable.
    The caller's ``add`` on the store is the door's check."""
    config = _clean_handler(store, handler_type, handler_config or {}, trusted, caller)
    agents = _project_agents(project_id=store.project_id, agent_ids=source_agent_ids, caller=caller)
    rule = MemoryRule.objects.create(store=store, project_id=store.project_id, on=on, enabled=enabled,
                                     handler_type=handler_type, handler_config=config, acting_as=caller.reference[:200])
    _set_source_agents(rule, agents)
    return rule


def _set_source_agents(rule: MemoryRule, agents: Iterable[Agent]) -> None:
    """The rule's source agents are ``agents``: its rows in the through table replaced, each
    statement naming the project (``source_agents.set()`` reads them by a join on the rule's id
    alone, which a distributed PostgreSQL refuses, docs/scaling.md)."""
    through = MemoryRule.source_agents.through
    wanted = {agent.pk for agent in agents}
    rows = through.objects.filter(project_id=rule.project_id, memoryrule_id=rule.pk)
    current = set(rows.values_list("agent_id", flat=True))
    if current - wanted:
        rows.filter(agent_id__in=current - wanted).delete()
    through.objects.bulk_create([through(memoryrule_id=rule.pk, agent_id=agent_id, project_id=rule.project_id)
                                 for agent_id in sorted(wanted - current)])


@transaction.atomic
def memory_rule_update(
    *,
    rule: MemoryRule,
    handler_type: str | None = None,
    handler_config: dict[str, Any] | None = None,
    source_agent_ids: Iterable[str] | None = None,
    enabled: bool | None = None,
    on: str | None = None,
    trusted: bool = False,
    caller: Principal,
) -> MemoryRule:
    """Change what is given; a new handler of the same type keeps its secret when none is sent.
    The rule acts as ``caller`` from now on."""
    if handler_type is not None or handler_config is not None:
        new_type = handler_type or rule.handler_type
        config = dict(handler_config or {})
        old = rule.handler_config or {}
        if new_type == rule.handler_type and "secret" in old and "secret" not in config:
            config["secret"] = old["secret"]
        rule.handler_type = new_type
        rule.handler_config = _clean_handler(rule.store, new_type, config, trusted, caller)
    if enabled is not None:
        rule.enabled = enabled
    if on is not None:
        rule.on = on
    rule.acting_as = caller.reference[:200]
    rule.save()
    if source_agent_ids is not None:
        _set_source_agents(rule, _project_agents(project_id=rule.project_id, agent_ids=source_agent_ids,
                                                 caller=caller))
    return rule
