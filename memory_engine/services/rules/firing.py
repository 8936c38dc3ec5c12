"""Running one rule on one generation: transcript -> handler -> facts -> the write funnel."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Any

from django.db import DatabaseError, transaction
from django.utils import timezone

from memory_engine.conf import engine_settings
from memory_engine.exceptions import InvalidFacts, MemoryEngineError, RuleHandlerFailed, WriteFailed
from memory_engine.models import Generation, MemoryAssertion, MemoryRule, MemoryStore, Provenance
from memory_engine.models.agents import GenerationStatus
from memory_engine.models.memories import Mechanism, Outcome, SourceType
from memory_engine.policy import ADD, principal_from_reference, require
from memory_engine.providers.rule_handlers import Fact, get_rule_handler
from memory_engine.services.memories import memory_write
from memory_engine.text import content_text

from .ledger import drop_pending, error_entry, is_pending, new_counts, record_rule_counts

logger = logging.getLogger("memory_engine.rules")

_KNOWLEDGE_BLOCK = re.compile(r"<knowledge\b[^>]*>.*?</knowledge>", re.DOTALL | re.IGNORECASE)
TRANSCRIPT_ROLES = ("user", "assistant")


def build_transcript(generation: Generation, *, max_chars: int | None = None) -> str:
    """``role: text`` blocks of the user and assistant messages plus the reply.

    System and tool messages are left out, and so are injected ``<knowledge>`` blocks:
    retrieved knowledge must not be extracted back into memory. Long transcripts keep
    their end (the latest turns).
    """
    limit = max_chars or engine_settings.RULE_TRANSCRIPT_MAX_CHARS
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


# --- coercion -------------------------------------------------------------------------------

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
    cap = engine_settings.RULE_MAX_FACTS
    if len(facts) > cap:
        logger.info("handler proposed %d facts; keeping the first %d", len(facts), cap)
    return facts[:cap], invalid


def _run_handler(rule: MemoryRule, generation: Generation) -> tuple[list[Fact], int, dict[str, str] | None]:
    """(facts, unusable items, error) — never raises for a handler's sake."""
    try:
        items = get_rule_handler(rule.handler_type).extract(build_transcript(generation), rule, generation)
        facts, invalid = coerce_facts(items)
    except MemoryEngineError as exc:  # LLMError, RuleHandlerFailed...
        logger.warning("rule %s on %s: handler failed: %s %s", rule.pk, generation.pk, exc.code, exc.message,
                       extra={"rule_id": rule.pk, "generation_id": generation.pk, "code": exc.code})
        return [], 0, error_entry(exc)
    except Exception as exc:  # a host callable may raise anything; the turn must not suffer
        logger.exception("rule %s on %s: handler raised", rule.pk, generation.pk)
        return [], 0, error_entry(RuleHandlerFailed(f"{exc.__class__.__name__}: {exc}"))
    error = error_entry(InvalidFacts(f"{invalid} item(s) were not a string or {{content, tags}}.")) if invalid else None
    return facts, invalid, error


def _rule_and_generation(project_id: str, rule_id: str,
                         generation_id: str) -> tuple[MemoryRule | None, Generation | None]:
    """The rule with its store, and the generation, of the project (None for one gone). Every
    statement names the project (docs/scaling.md): the rule, then its store, not a join."""
    rule = MemoryRule.objects.filter(project_id=project_id, pk=rule_id).first()
    store = (MemoryStore.objects.select_related("project").filter(project_id=project_id, pk=rule.store_id).first()
             if rule is not None else None)
    if rule is not None and store is not None:
        rule.store = store
    return (rule if store is not None else None,
            Generation.objects.filter(project_id=project_id, pk=generation_id).first())


def memory_rule_fire(*, rule_id: str, generation_id: str, project_id: str | None = None,
                     resume: bool = False) -> dict[str, Any] | None:
    """Run one rule on one generation and record its counts; None when either is gone.

    ``resume`` (a re-run enqueued by :func:`rule_firing_sweep`) does nothing when the firing
    is no longer pending (a duplicate finished it), and counts a fact skipped as the
    duplicate of a memory this very firing created or superseded before it died as that
    original action, so the recorded counts are what one uninterrupted run would show.
    """
    if project_id is None:  # a task queued before firings carried their project
        project_id = Generation.objects.filter(pk=generation_id).values_list("project_id", flat=True).first() or ""
    rule, generation = _rule_and_generation(project_id, rule_id, generation_id)
    if rule is None or generation is None:
        logger.info("rule firing skipped: rule %s or generation %s is gone", rule_id, generation_id)
        drop_pending(project_id=project_id, generation_id=generation_id, rule_id=rule_id)
        return None
    if not rule.enabled:
        logger.info("rule firing skipped: rule %s was disabled", rule_id)
        drop_pending(project_id=project_id, generation_id=generation_id, rule_id=rule_id)
        return None
    earlier: dict[str, str] = {}
    if resume:
        if not is_pending((generation.extraction or {}).get(rule_id)):
            logger.info("rule firing skipped: rule %s on %s already finished", rule_id, generation_id)
            return None
        earlier = dict(
            MemoryAssertion.objects.filter(project_id=project_id, rule_id=rule.pk, generation_id=generation.pk,
                                           outcome__in=["created", "superseded"])
            .values_list("memory_id", "outcome")
        )
    counts = new_counts()
    try:  # the rule acts as the principal that set it up, as that principal is now
        require(principal_from_reference(rule.acting_as, project_id=rule.store.project_id), ADD, rule.store)
    except MemoryEngineError as exc:  # PRINCIPAL_INACTIVE, GRANT_REQUIRED: nothing is asked or written
        counts["error"] = error_entry(exc)
        record_rule_counts(project_id=project_id, generation_id=generation.pk, rule_id=rule.pk, counts=counts)
        logger.warning("rule %s on %s: %s", rule.pk, generation.pk, exc.code,
                       extra={"rule_id": rule.pk, "generation_id": generation.pk, "code": exc.code})
        return counts
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
                provenance=Provenance.INFERRED,
            )
        except MemoryEngineError as exc:  # QUOTA_EXCEEDED, CONTENT_TOO_LONG, ABOUT_REQUIRED...
            counts["failed"] += 1
            counts["error"] = counts["error"] or error_entry(exc)
        except DatabaseError as exc:
            logger.exception("rule %s on %s: write failed", rule.pk, generation.pk)
            counts["failed"] += 1
            counts["error"] = counts["error"] or error_entry(WriteFailed(f"{exc.__class__.__name__}: {exc}"))
        else:
            action = result.action
            if action == "skipped" and result.memory is not None and result.memory.pk in earlier:
                action = earlier.pop(result.memory.pk)  # written by the run that died
            counts[action] += 1
    record_rule_counts(project_id=project_id, generation_id=generation.pk, rule_id=rule.pk, counts=counts)
    logger.info("rule %s on %s: %s", rule.pk, generation.pk, counts,
                extra={"rule_id": rule.pk, "generation_id": generation.pk, "store_id": rule.store_id,
                       "handler_type": rule.handler_type, "counts": counts, "resume": resume})
    return counts


def memory_rule_dry_run(*, rule: MemoryRule, transcript: str) -> dict[str, Any]:
    """Run the rule's handler on ``transcript`` and report what the write funnel WOULD decide
    for each candidate fact; every write happens in a transaction that is rolled back.

    Returns ``{"error": str, "rows": [{"fact", "action", "reason", "similarity",
    "changed_details", "existing": (id, text) | None} or {"fact", "error"}]}``.
    """
    generation = Generation(project_id=rule.store.project_id, input_messages=[{"role": "user", "content": transcript}],
                            output="", status=GenerationStatus.COMPLETED, created_at=timezone.now())
    try:
        facts, invalid = coerce_facts(get_rule_handler(rule.handler_type).extract(transcript, rule, generation))
    except MemoryEngineError as exc:
        return {"error": f"{exc.code}: {exc.message}", "rows": []}
    except Exception as exc:  # a host callable may raise anything
        return {"error": f"{RuleHandlerFailed.code}: {exc.__class__.__name__}: {exc}", "rows": []}
    rows = []
    with transaction.atomic():
        for fact in facts:
            row: dict[str, Any] = {"fact": fact}
            try:
                result = memory_write(store=rule.store, content=fact.content, tags=fact.tags, about=fact.about,
                                      principal=f"rule:{rule.pk}", mechanism=Mechanism.RULE,
                                      source_type=SourceType.CONVERSATION, rule_id=rule.pk,
                                      provenance=Provenance.INFERRED)
            except MemoryEngineError as exc:
                row["error"] = f"{exc.code}: {exc.message}"
            else:
                existing = result.replaced or (result.memory if result.action == Outcome.SKIPPED else None)
                row.update(action=result.action, reason=result.decision_reason, similarity=result.similarity,
                           changed_details=result.changed_details,
                           existing=(existing.pk, existing.content.text) if existing else None)
            rows.append(row)
        transaction.set_rollback(True)  # a dry run: nothing stays
    return {"error": f"{invalid} unusable item(s) in the handler's answer." if invalid else "", "rows": rows}
