"""Memory rules: when a generation completes, extract facts into a store.

The ``generation_completed`` receiver (:func:`enqueue_memory_rules`) only looks up
the matching rules and enqueues one django-q2 task per rule on commit, with ids.
Each task calls :func:`memory_rule_fire`: build the transcript, run the handler
(built-in LLM extractor, a Python callable, or an HTTP tool), write every candidate
through the write funnel (mechanism ``rule``), and record the per-rule counts on
``generation.extraction[rule_id] = {created, superseded, skipped, failed, error}``.

A handler that raises, times out or answers nonsense contributes nothing and records
its error; the turn itself is never blocked or failed. Generations made by a rule
handler (``started_by_rule``), by an agent that handles a rule (``handler_config
["agent_id"]``), or descending from such a generation through ``initiator`` fire no
rules, so a handler that runs an agent cannot loop.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any
from urllib.parse import urlparse

from django.db import DatabaseError, transaction
from django.db.models import Exists, OuterRef
from django.db.models.fields.json import KT
from django.utils import timezone
from django.utils.module_loading import import_string

from memory_engine.conf import engine_settings
from memory_engine.exceptions import MemoryEngineError, NotFound, RuleHandlerFailed, ValidationFailed
from memory_engine.guards import check_callable_allowed, check_llm_overrides, check_outbound_url
from memory_engine.models import Agent, Generation, MemoryAssertion, MemoryRule, MemoryStore
from memory_engine.models.agents import GenerationStatus
from memory_engine.models.memories import Mechanism, SourceType
from memory_engine.providers.http import ProviderHTTPError, post_json
from memory_engine.providers.llm import require_llm_provider
from memory_engine.queue import enqueue_memory_rule_fire
from memory_engine.services.memory_write import memory_write
from memory_engine.text import contains_nul, content_text

logger = logging.getLogger("memory_engine.rules")

#: Names of the headers an ``http`` handler receives.
SIGNATURE_HEADER = "X-Memory-Engine-Signature"
TIMESTAMP_HEADER = "X-Memory-Engine-Timestamp"
RULE_HEADER = "X-Memory-Engine-Rule"

#: How far :func:`fires_rules` follows ``initiator`` links.
MAX_INITIATOR_DEPTH = 32

DEFAULT_PROMPT = """You extract durable memories from a conversation between a user and an AI assistant.

Return the facts worth remembering in later conversations: stable facts about the user \
(identity, preferences, constraints, circumstances, goals) and about the task or project \
(decisions, requirements, names, dates, numbers). Write each fact as one short, \
self-contained sentence in the third person ("The user prefers email over phone."). \
Skip greetings, small talk, questions, the assistant's own suggestions, anything \
temporary, and anything already marked as retrieved knowledge.

Answer with a JSON array only, no prose. Each item is either a string or an object \
{"content": "...", "tags": {"kind": "preference"}}. Return at most 20 items; return [] \
when nothing is worth remembering."""

_KNOWLEDGE_BLOCK = re.compile(r"<knowledge\b[^>]*>.*?</knowledge>", re.DOTALL | re.IGNORECASE)
TRANSCRIPT_ROLES = ("user", "assistant")

#: ``extraction[rule_id]["status"]`` of a firing enqueued and not finished yet.
PENDING = "pending"


@dataclass
class Fact:
    """One candidate memory proposed by a handler."""

    content: str
    tags: dict[str, Any] = field(default_factory=dict)
    about: dict[str, Any] | None = None


def new_counts() -> dict[str, Any]:
    return {"created": 0, "superseded": 0, "skipped": 0, "failed": 0, "error": None}


def _error(code: str, message: str) -> dict[str, str]:
    return {"code": code, "message": message[:500]}


# --- transcript ---------------------------------------------------------------------------

def build_transcript(generation: Generation, *, max_chars: int | None = None) -> str:
    """``role: text`` blocks of the user and assistant messages plus the reply.

    System and tool messages are left out, and so are injected ``<knowledge>`` blocks:
    retrieved knowledge must not be extracted back into memory. Long transcripts keep
    their end (the latest turns).
    """
    limit = int(max_chars or engine_settings.RULE_TRANSCRIPT_MAX_CHARS)
    blocks = []
    messages = [*(generation.input_messages or []), {"role": "assistant", "content": generation.output}]
    for message in messages:
        if not isinstance(message, dict) or message.get("role") not in TRANSCRIPT_ROLES:
            continue
        text = _KNOWLEDGE_BLOCK.sub("", content_text(message.get("content"))).strip()
        if text:
            blocks.append(f"{message['role']}: {text}")
    transcript = "\n\n".join(blocks)
    if len(transcript) > limit:
        transcript = "…" + transcript[-(limit - 1):]
    return transcript


# --- parsing --------------------------------------------------------------------------------

def parse_fact_array(text: str) -> list[Any]:
    """The JSON array between the first ``[`` and the last ``]`` of a model reply."""
    start, end = text.find("["), text.rfind("]")
    if start < 0 or end < start:
        raise RuleHandlerFailed("The model's answer holds no JSON array.", code="UNPARSEABLE_RESPONSE",
                                details={"answer": text[:200]})
    try:
        value = json.loads(text[start:end + 1])
    except ValueError:
        raise RuleHandlerFailed("The model's answer is not a valid JSON array.", code="UNPARSEABLE_RESPONSE",
                                details={"answer": text[:200]}) from None
    if not isinstance(value, list):
        raise RuleHandlerFailed("The model's answer is not a JSON array.", code="UNPARSEABLE_RESPONSE")
    return value


def coerce_fact(item: Any) -> Fact | None:
    """A string, ``{content, tags?, about?}`` or an object with ``.content``; else None."""
    if isinstance(item, Fact):
        return item if isinstance(item.content, str) and item.content.strip() else None
    if isinstance(item, str):
        return Fact(content=item) if item.strip() else None
    if isinstance(item, dict):
        content = item.get("content")
    else:
        content = getattr(item, "content", None)
        item = {"content": content, "tags": getattr(item, "tags", None), "about": getattr(item, "about", None)}
    if not isinstance(content, str) or not content.strip():
        return None
    tags = item.get("tags") if isinstance(item.get("tags"), dict) else {}
    about = item.get("about") if isinstance(item.get("about"), dict) else None
    return Fact(content=content, tags=tags, about=about)


def coerce_facts(items: Iterable[Any]) -> tuple[list[Fact], int]:
    """(valid facts capped at RULE_MAX_FACTS, number of unusable items)."""
    facts: list[Fact] = []
    invalid = 0
    for item in items:
        fact = coerce_fact(item)
        if fact is None:
            invalid += 1
        else:
            facts.append(fact)
    cap = int(engine_settings.RULE_MAX_FACTS)
    if len(facts) > cap:
        logger.info("handler proposed %d facts; keeping the first %d", len(facts), cap)
    return facts[:cap], invalid


# --- handlers --------------------------------------------------------------------------------

def builtin_handler(transcript: str, rule: MemoryRule, generation: Generation) -> list[Any]:
    """A tool-less, temperature-0 completion parsed leniently as a JSON array."""
    config = rule.handler_config or {}
    # Again at call time: the rule may predate the operator narrowing LLM_OVERRIDABLE.
    check_llm_overrides(config)
    provider = require_llm_provider(config.get("provider") or None)
    reply = provider.complete(
        [
            {"role": "system", "content": config.get("prompt") or DEFAULT_PROMPT},
            {"role": "user", "content": f"Conversation:\n\n{transcript}"},
        ],
        model=config.get("model") or None,
        temperature=0.0,
        max_tokens=config.get("max_tokens"),
    )
    return parse_fact_array(reply)


def callable_handler(transcript: str, rule: MemoryRule, generation: Generation) -> list[Any]:
    """``fn(transcript, rule, generation) -> list[Fact | str | dict]`` named by ``path``."""
    path = (rule.handler_config or {}).get("path", "")
    try:
        fn = import_string(path)
    except ImportError as exc:
        raise RuleHandlerFailed(f"Cannot import {path!r}: {exc}", code="HANDLER_NOT_FOUND") from exc
    result = fn(transcript, rule, generation)
    if isinstance(result, dict):
        result = result.get("facts")
    if result is None:
        return []
    if not isinstance(result, (list, tuple)):
        raise RuleHandlerFailed("The callable must return a list of facts.", code="HANDLER_BAD_RESPONSE")
    return list(result)


def sign_body(secret: str, timestamp: str, body: bytes) -> str:
    """``sha256=<hex>`` HMAC of ``timestamp + "." + body`` with the rule's secret."""
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def rule_payload(rule: MemoryRule) -> dict[str, Any]:
    return {"id": rule.pk, "memory_store_id": rule.store_id, "on": rule.on, "handler_type": rule.handler_type}


def generation_payload(generation: Generation) -> dict[str, Any]:
    return {
        "id": generation.pk,
        "agent_id": generation.agent_id,
        "status": generation.status,
        "input_messages": generation.input_messages,
        "output": generation.output,
        "initiator_id": generation.initiator_id,
        "created_at": generation.created_at.isoformat(),
        "completed_at": generation.completed_at.isoformat() if generation.completed_at else None,
    }


def http_handler(transcript: str, rule: MemoryRule, generation: Generation) -> list[Any]:
    """POST ``{transcript, rule, generation}`` (HMAC-signed when a secret is set); the
    answer is ``{"facts": [...]}`` (a bare list is accepted too)."""
    config = rule.handler_config or {}
    url = config.get("url", "")
    body = json.dumps(
        {"transcript": transcript, "rule": rule_payload(rule), "generation": generation_payload(generation)},
        ensure_ascii=False,
    ).encode()
    timestamp = str(int(time.time()))
    headers = {"Content-Type": "application/json", TIMESTAMP_HEADER: timestamp, RULE_HEADER: rule.pk}
    if config.get("secret"):
        headers[SIGNATURE_HEADER] = sign_body(str(config["secret"]), timestamp, body)
    timeout = float(config.get("timeout") or engine_settings.RULE_HANDLER_TIMEOUT)
    retries = int(config.get("retries", engine_settings.HTTP_RETRIES))
    try:
        answer = post_json(url, {}, content=body, headers=headers, timeout=timeout, retries=retries)
    except ProviderHTTPError as exc:
        timed_out = exc.status is None and "timed out" in str(exc)
        raise RuleHandlerFailed(str(exc), code="HANDLER_TIMEOUT" if timed_out else "HANDLER_HTTP_ERROR",
                                details={"status": exc.status}) from exc
    facts = answer.get("facts") if isinstance(answer, dict) else answer
    if not isinstance(facts, list):
        raise RuleHandlerFailed('The handler must answer {"facts": [...]}.', code="HANDLER_BAD_RESPONSE")
    return facts


Handler = Callable[[str, MemoryRule, Generation], list[Any]]
HANDLERS: dict[str, Handler] = {
    MemoryRule.HandlerType.BUILTIN: builtin_handler,
    MemoryRule.HandlerType.CALLABLE: callable_handler,
    MemoryRule.HandlerType.HTTP: http_handler,
}


# --- handler configuration ---------------------------------------------------------------------

HANDLER_KEYS = {
    MemoryRule.HandlerType.BUILTIN: {"prompt", "model", "provider", "max_tokens", "agent_id"},
    MemoryRule.HandlerType.CALLABLE: {"path", "agent_id"},
    MemoryRule.HandlerType.HTTP: {"url", "secret", "timeout", "retries", "agent_id"},
}
PROVIDER_KEYS = {"BASE_URL", "API_KEY", "MODEL", "TIMEOUT", "RETRIES"}


def validate_rule_handler(*, handler_type: str, config: dict[str, Any], trusted: bool = False) -> dict[str, Any]:
    """Check a handler's configuration and return it cleaned.

    The guards of :mod:`memory_engine.guards` apply: API keys and staff (``trusted=False``)
    may only name callables under ``RULE_CALLABLE_PREFIXES`` (superusers any); a builtin
    handler may only change the LLM settings in ``LLM_OVERRIDABLE``; URLs (``url``, the
    provider's ``BASE_URL``) must pass the outbound guard, for everyone.
    """
    if handler_type not in HANDLERS:
        raise ValidationFailed(f"Unknown handler type {handler_type!r}.", code="HANDLER_INVALID",
                               details={"type": handler_type, "allowed": sorted(HANDLERS)})
    config = {k: v for k, v in (config or {}).items() if v is not None}
    if contains_nul(config):
        raise ValidationFailed("The handler configuration must not contain NUL characters.", code="HANDLER_INVALID")
    unknown = set(config) - HANDLER_KEYS[handler_type]
    if unknown:
        raise ValidationFailed(f"Unknown keys for a {handler_type} handler: {', '.join(sorted(unknown))}.",
                               code="HANDLER_INVALID", details={"unknown": sorted(unknown)})
    for key in ("prompt", "model", "path", "url", "secret", "agent_id"):
        if key in config and not isinstance(config[key], str):
            raise ValidationFailed(f"`{key}` must be a string.", code="HANDLER_INVALID", details={"field": key})
    for key in ("timeout", "max_tokens", "retries"):
        if key in config and (isinstance(config[key], bool) or not isinstance(config[key], (int, float))
                              or config[key] < 0):
            raise ValidationFailed(f"`{key}` must be a non-negative number.", code="HANDLER_INVALID",
                                   details={"field": key})
    if handler_type == MemoryRule.HandlerType.BUILTIN and "provider" in config:
        provider = config["provider"]
        if not isinstance(provider, dict) or set(map(str.upper, provider)) - PROVIDER_KEYS:
            raise ValidationFailed("`provider` must be an object with BASE_URL, API_KEY, MODEL, TIMEOUT, RETRIES.",
                                   code="HANDLER_INVALID", details={"field": "provider"})
        config["provider"] = {k.upper(): v for k, v in provider.items()}
    if handler_type == MemoryRule.HandlerType.BUILTIN:
        check_llm_overrides(config)
        base_url = (config.get("provider") or {}).get("BASE_URL")
        if base_url not in (None, ""):
            _validate_url(base_url, field="provider.BASE_URL")
    if handler_type == MemoryRule.HandlerType.CALLABLE:
        _validate_callable(config.get("path", ""), trusted=trusted)
    if handler_type == MemoryRule.HandlerType.HTTP:
        _validate_url(config.get("url", ""), field="url")
    return config


def _validate_url(url: Any, *, field: str) -> None:
    parsed = urlparse(url if isinstance(url, str) else "")
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValidationFailed(f"`{field}` must be an http(s) URL.", code="HANDLER_INVALID", details={"field": field})
    check_outbound_url(url)


def _validate_callable(path: str, *, trusted: bool) -> None:
    if not path:
        raise ValidationFailed("A callable handler needs `path`.", code="HANDLER_INVALID", details={"field": "path"})
    check_callable_allowed(path, setting="RULE_CALLABLE_PREFIXES", trusted=trusted)  # before importing anything
    try:
        fn = import_string(path)
    except ImportError as exc:
        raise ValidationFailed(f"Cannot import {path!r}.", code="HANDLER_INVALID", details={"path": path}) from exc
    if not callable(fn):
        raise ValidationFailed(f"{path!r} is not callable.", code="HANDLER_INVALID", details={"path": path})


# --- selection and loop prevention ---------------------------------------------------------------

def _project_rules(*, project_id: str, agent_id: str) -> list[dict[str, Any]]:
    """Every rule of the project in one query: whether it selects ``agent_id`` and which
    agent handles it (``handler_config.agent_id``)."""
    through = MemoryRule.source_agents.through
    return list(
        MemoryRule.objects.filter(store__project_id=project_id)
        .annotate(
            handler_agent=KT("handler_config__agent_id"),
            selects_agent=Exists(through.objects.filter(memoryrule_id=OuterRef("pk"), agent_id=agent_id)),
            has_agents=Exists(through.objects.filter(memoryrule_id=OuterRef("pk"))),
        )
        .order_by("created_at", "id")
        .values("id", "enabled", "on", "handler_agent", "selects_agent", "has_agents")
    )


def handler_agent_ids(*, project_id: str) -> set[str]:
    """Agents that handle a rule of the project (named in a rule's ``handler_config.agent_id``)."""
    return {r["handler_agent"] for r in _project_rules(project_id=project_id, agent_id="") if r["handler_agent"]}


def fires_rules(generation: Generation, *, handler_agents: set[str] | None = None) -> bool:
    """False for a rule handler's generation, a handler agent's generation, or any
    generation initiated (directly or further up) by one."""
    if handler_agents is None:
        handler_agents = handler_agent_ids(project_id=generation.project_id)
    current: Generation | None = generation
    seen: set[str] = set()
    for _ in range(MAX_INITIATOR_DEPTH):
        if current is None or current.pk in seen:
            return True
        if current.started_by_rule_id or current.agent_id in handler_agents:
            return False
        seen.add(current.pk)
        if current.initiator_id is None:
            return True
        current = Generation.objects.only("id", "agent_id", "initiator_id", "started_by_rule_id").filter(
            pk=current.initiator_id
        ).first()
    return False  # an implausibly deep chain: refuse rather than risk a loop


def matching_rule_ids(*, generation: Generation) -> list[str]:
    """Enabled ``generation.completed`` rules of the generation's project that select its
    agent (no source agents = every agent); none when the generation must not fire.

    One query for the rules (the completion request waits for it), plus one per
    ``initiator`` hop when the generation has an initiator.
    """
    if generation.status != GenerationStatus.COMPLETED:
        return []
    rules = _project_rules(project_id=generation.project_id, agent_id=generation.agent_id)
    handler_agents = {r["handler_agent"] for r in rules if r["handler_agent"]}
    if not fires_rules(generation, handler_agents=handler_agents):
        return []
    return [
        r["id"] for r in rules
        if r["enabled"] and r["on"] == MemoryRule.On.GENERATION_COMPLETED
        and (r["selects_agent"] or not r["has_agents"])
    ]


def enqueue_rule_firing(*, rule_id: str, generation_id: str, attempt: int = 1) -> None:
    """Record the firing as pending on ``generation.extraction`` and queue its task.

    The pending entry (``{"status": "pending", "enqueued_at", "attempts"}``) is what
    :func:`rule_firing_sweep` looks for: a task whose worker died never replaces it with
    counts, so the sweep enqueues it again.
    """
    mark_firing_pending(rule_id=rule_id, generation_id=generation_id, attempt=attempt)
    enqueue_memory_rule_fire(rule_id=rule_id, generation_id=generation_id, resume=attempt > 1)


def enqueue_memory_rules(sender: Any, *, generation_id: str, **kwargs: Any) -> None:
    """``generation_completed`` receiver: one task per matching rule, enqueued on commit."""
    generation = Generation.objects.filter(pk=generation_id).only(
        "id", "project_id", "agent_id", "status", "initiator_id", "started_by_rule_id"
    ).first()
    if generation is None:
        return
    for rule_id in matching_rule_ids(generation=generation):
        # robust: one failed enqueue is logged and does not keep the other rules from firing
        transaction.on_commit(partial(enqueue_rule_firing, rule_id=rule_id, generation_id=generation_id),
                              robust=True)


# --- firing --------------------------------------------------------------------------------------

@transaction.atomic
def record_rule_counts(*, generation_id: str, rule_id: str, counts: dict[str, Any]) -> None:
    """Set ``extraction[rule_id]`` under a row lock: firings of several rules finish concurrently.

    The counts *replace* the entry (a pending marker, or the counts of an earlier run), so a
    firing run twice is never counted twice.
    """
    generation = Generation.objects.select_for_update().only("id", "extraction").filter(pk=generation_id).first()
    if generation is None:
        return
    extraction = dict(generation.extraction or {})
    extraction[rule_id] = counts
    Generation.objects.filter(pk=generation_id).update(extraction=extraction)


def mark_firing_pending(*, rule_id: str, generation_id: str, attempt: int = 1) -> None:
    """``extraction[rule_id] = {"status": "pending", "enqueued_at": <iso>, "attempts": n}``."""
    record_rule_counts(generation_id=generation_id, rule_id=rule_id, counts={
        "status": PENDING, "enqueued_at": timezone.now().isoformat(), "attempts": attempt,
    })


@transaction.atomic
def _drop_pending(*, generation_id: str, rule_id: str) -> None:
    """Forget the pending marker of a firing that will not run (its rule was disabled or deleted)."""
    generation = Generation.objects.select_for_update().only("id", "extraction").filter(pk=generation_id).first()
    if generation is not None and is_pending((generation.extraction or {}).get(rule_id)):
        extraction = dict(generation.extraction)
        del extraction[rule_id]
        Generation.objects.filter(pk=generation_id).update(extraction=extraction)


def is_pending(entry: Any) -> bool:
    return isinstance(entry, dict) and entry.get("status") == PENDING


def rule_firing_sweep(*, now: datetime | None = None) -> dict[str, int]:
    """Re-enqueue firings still pending after ``RULE_FIRING_TIMEOUT`` seconds (their task
    was lost: the worker was killed, or the queue lost it); after ``RULE_FIRING_MAX_ATTEMPTS``
    record ``RULE_FIRING_STALLED`` instead. Runs as a django-q2 schedule
    (``memory_engine.tasks.rule_firing_sweep_task``)."""
    now = now or timezone.now()
    stale_before = now - timedelta(seconds=float(engine_settings.RULE_FIRING_TIMEOUT))
    max_attempts = int(engine_settings.RULE_FIRING_MAX_ATTEMPTS)
    counts = {"requeued": 0, "stalled": 0}
    # jsonpath over each generation's extraction: only generations with a pending firing match.
    candidates = Generation.objects.extra(
        where=["extraction @? '$.* ? (@.status == \"pending\")'"]
    ).values_list("pk", flat=True)
    for generation_id in candidates:
        for rule_id, attempt in _claim_stale_firings(generation_id, stale_before, max_attempts, now):
            if attempt is None:
                counts["stalled"] += 1
                continue
            transaction.on_commit(partial(enqueue_rule_firing, rule_id=rule_id, generation_id=generation_id,
                                          attempt=attempt), robust=True)
            counts["requeued"] += 1
    if any(counts.values()):
        logger.warning("rule firing sweep: %s", counts, extra={"counts": counts})
    return counts


@transaction.atomic
def _claim_stale_firings(generation_id: str, stale_before: datetime, max_attempts: int,
                         now: datetime) -> list[tuple[str, int | None]]:
    """Under the row lock: the stale pending entries of one generation, as (rule id, next
    attempt) to re-enqueue or (rule id, None) when given up (recorded as stalled). Touching
    ``enqueued_at`` here keeps a concurrent sweep from enqueueing the same firing twice."""
    generation = Generation.objects.select_for_update(skip_locked=True).only("id", "extraction").filter(
        pk=generation_id).first()
    if generation is None:
        return []
    extraction = dict(generation.extraction or {})
    claimed: list[tuple[str, int | None]] = []
    for rule_id, entry in extraction.items():
        if not is_pending(entry):
            continue
        try:
            enqueued_at = datetime.fromisoformat(entry.get("enqueued_at") or "")
        except ValueError:
            enqueued_at = None
        if enqueued_at is not None and enqueued_at >= stale_before:
            continue
        attempts = int(entry.get("attempts") or 1)
        if attempts >= max_attempts:
            extraction[rule_id] = {**new_counts(), "error": _error(
                "RULE_FIRING_STALLED",
                f"The worker running this rule stopped {attempts} times without finishing (no result after "
                f"{engine_settings.RULE_FIRING_TIMEOUT}s each); check the worker logs, then run the rule again "
                "from the admin.")}
            claimed.append((rule_id, None))
        else:
            extraction[rule_id] = {**entry, "enqueued_at": now.isoformat()}
            claimed.append((rule_id, attempts + 1))
    if claimed:
        Generation.objects.filter(pk=generation_id).update(extraction=extraction)
    return claimed


def _run_handler(rule: MemoryRule, generation: Generation) -> tuple[list[Fact], int, dict[str, str] | None]:
    """(facts, unusable items, error) — never raises for a handler's sake."""
    try:
        items = HANDLERS[rule.handler_type](build_transcript(generation), rule, generation)
        facts, invalid = coerce_facts(items)
    except MemoryEngineError as exc:  # LLMError, RuleHandlerFailed...
        logger.warning("rule %s on %s: handler failed: %s %s", rule.pk, generation.pk, exc.code, exc.message,
                       extra={"rule_id": rule.pk, "generation_id": generation.pk, "code": exc.code})
        return [], 0, _error(exc.code, exc.message)
    except Exception as exc:  # a host callable may raise anything; the turn must not suffer
        logger.exception("rule %s on %s: handler raised", rule.pk, generation.pk)
        return [], 0, _error("HANDLER_FAILED", f"{exc.__class__.__name__}: {exc}")
    error = _error("INVALID_FACTS", f"{invalid} item(s) were not a string or {{content, tags}}.") if invalid else None
    return facts, invalid, error


def memory_rule_fire(*, rule_id: str, generation_id: str, resume: bool = False) -> dict[str, Any] | None:
    """Run one rule on one generation and record its counts; None when either is gone.

    ``resume`` (a re-run enqueued by :func:`rule_firing_sweep`) does nothing when the firing
    is no longer pending (a duplicate finished it), and counts a fact skipped as the
    duplicate of a memory this very firing created or superseded before it died as that
    original action, so the recorded counts are what one uninterrupted run would show.
    """
    rule = MemoryRule.objects.select_related("store__project").filter(pk=rule_id).first()
    generation = Generation.objects.filter(pk=generation_id).first()
    if rule is None or generation is None or rule.store.project_id != generation.project_id:
        logger.info("rule firing skipped: rule %s or generation %s is gone", rule_id, generation_id)
        _drop_pending(generation_id=generation_id, rule_id=rule_id)
        return None
    if not rule.enabled:
        logger.info("rule firing skipped: rule %s was disabled", rule_id)
        _drop_pending(generation_id=generation_id, rule_id=rule_id)
        return None
    earlier: dict[str, str] = {}
    if resume:
        if not is_pending((generation.extraction or {}).get(rule_id)):
            logger.info("rule firing skipped: rule %s on %s already finished", rule_id, generation_id)
            return None
        earlier = dict(
            MemoryAssertion.objects.filter(rule_id=rule.pk, generation_id=generation.pk,
                                           outcome__in=["created", "superseded"])
            .values_list("memory_id", "outcome")
        )
    counts = new_counts()
    facts, counts["failed"], counts["error"] = _run_handler(rule, generation)
    for fact in facts:
        try:
            result = memory_write(
                store=rule.store,
                content=fact.content,
                tags=fact.tags,
                about=fact.about,
                principal=f"rule:{rule.pk}",
                mechanism=Mechanism.RULE,
                source_type=SourceType.CONVERSATION,
                generation_id=generation.pk,
                rule_id=rule.pk,
            )
        except MemoryEngineError as exc:  # QUOTA_EXCEEDED, CONTENT_TOO_LONG, ABOUT_REQUIRED...
            counts["failed"] += 1
            counts["error"] = counts["error"] or _error(exc.code, exc.message)
        except DatabaseError as exc:
            logger.exception("rule %s on %s: write failed", rule.pk, generation.pk)
            counts["failed"] += 1
            counts["error"] = counts["error"] or _error("WRITE_FAILED", f"{exc.__class__.__name__}: {exc}")
        else:
            action = result.action
            if action == "skipped" and result.memory is not None and result.memory.pk in earlier:
                action = earlier.pop(result.memory.pk)  # written by the run that died
            counts[action] += 1
    record_rule_counts(generation_id=generation.pk, rule_id=rule.pk, counts=counts)
    logger.info("rule %s on %s: %s", rule.pk, generation.pk, counts,
                extra={"rule_id": rule.pk, "generation_id": generation.pk, "store_id": rule.store_id,
                       "handler_type": rule.handler_type, "counts": counts, "resume": resume})
    return counts


# --- rule management -----------------------------------------------------------------------------

def _project_agents(*, project_id: str, agent_ids: Iterable[str]) -> list[Agent]:
    wanted = list(dict.fromkeys(agent_ids))
    agents = list(Agent.objects.filter(project_id=project_id, pk__in=wanted))
    missing = sorted(set(wanted) - {a.pk for a in agents})
    if missing:
        raise NotFound("Some agent ids do not exist in your project.", code="AGENT_NOT_FOUND",
                       details={"agent_ids": missing})
    return agents


def _clean_handler(store: MemoryStore, handler_type: str, config: dict[str, Any], trusted: bool) -> dict[str, Any]:
    config = validate_rule_handler(handler_type=handler_type, config=config, trusted=trusted)
    if config.get("agent_id"):
        _project_agents(project_id=store.project_id, agent_ids=[config["agent_id"]])
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
) -> MemoryRule:
    """A rule on ``store``; ``trusted`` (superusers) may name any callable."""
    config = _clean_handler(store, handler_type, handler_config or {}, trusted)
    agents = _project_agents(project_id=store.project_id, agent_ids=source_agent_ids)
    rule = MemoryRule.objects.create(store=store, on=on, enabled=enabled, handler_type=handler_type,
                                     handler_config=config)
    rule.source_agents.set(agents)
    return rule


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
) -> MemoryRule:
    """Change what is given; a new handler of the same type keeps its secret when none is sent."""
    if handler_type is not None or handler_config is not None:
        new_type = handler_type or rule.handler_type
        config = dict(handler_config or {})
        old = rule.handler_config or {}
        if new_type == rule.handler_type and "secret" in old and "secret" not in config:
            config["secret"] = old["secret"]
        rule.handler_type = new_type
        rule.handler_config = _clean_handler(rule.store, new_type, config, trusted)
    if enabled is not None:
        rule.enabled = enabled
    if on is not None:
        rule.on = on
    rule.save()
    if source_agent_ids is not None:
        rule.source_agents.set(_project_agents(project_id=rule.store.project_id, agent_ids=source_agent_ids))
    return rule
