"""A write's inputs, checked before anything is written (docs/write-funnel.md, step 1).

Every refusal here happens before the funnel writes anything, so a refused write leaves no
assertion: the text (:func:`validate_content`), thresholds, kind, title, summary, confidence,
expiry and ``about`` (:class:`About`), the store's ``require_about_for_kinds``, the instruction
guard's refusal (:func:`refusal_of`; the funnel's judge_writes judges once the text is embedded),
and, under the store lock for a memory about to be created, the project's quota
(:func:`check_memory_quota`). :class:`WriteArguments` declares what a
write takes, :class:`WriteRequest` holds what passed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypedDict

from django.utils import timezone

from memory_engine.conf import engine_settings
from memory_engine.consent_categories import ConsentVerdict
from memory_engine.exceptions import (
    ConfidenceInvalid,
    ContentEmpty,
    ContentInvalid,
    ContentTooLong,
    ExpiresAtInvalid,
    InstructionRejected,
    QuotaExceeded,
    ThresholdsInvalid,
    ValidationFailed,
)
from memory_engine.instruction_guard import Verdict, record_block
from memory_engine.models import Agent, Lineage, Memory, MemoryStore, Provenance
from memory_engine.models.memories import MEMORY_KIND_MAX_CHARS, Tier
from memory_engine.models.retention import RetentionClass
from memory_engine.text import contains_nul

from .content import normalize_text
from .locks import lock_memory_quota

__all__ = ["GUARDED_TIERS", "About", "MemoryFields", "WriteArguments", "WriteRequest", "cap_expiry", "check_keywords",
           "check_memory_quota", "ephemeral_expiry", "refusal_of", "resolve_expiry",
           "resolve_thresholds",
           "validate_confidence", "validate_content", "validate_expires_at", "validate_kind", "validate_text_field",
           "validate_thresholds"]


@dataclass(frozen=True)
class About:
    """A structured key naming what a memory is about, e.g. preference/contact_channel."""

    kind: str
    key: str

    @classmethod
    def parse(cls, value: Any) -> About | None:
        if value in (None, {}, ""):
            return None
        if isinstance(value, About):
            return value
        if not isinstance(value, dict) or not isinstance(value.get("kind"), str) or not isinstance(
            value.get("key"), str
        ) or not value["kind"].strip() or not value["key"].strip():
            raise ValidationFailed(
                "`about` must be an object with non-empty string `kind` and `key`.",
                details={"about": value if isinstance(value, (dict, str)) else repr(value)},
            )
        return cls(kind=value["kind"].strip()[:100], key=value["key"].strip()[:200])

    def as_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "key": self.key}



def validate_content(text: Any) -> str:
    if not isinstance(text, str):
        raise ValidationFailed("`content` must be a string.", details={"field": "content"})
    if contains_nul(text):
        raise ContentInvalid("`content` must not contain NUL characters.", details={"field": "content"})
    normalized = normalize_text(text)
    if not normalized:
        raise ContentEmpty()
    limit = engine_settings.MAX_MEMORY_CHARS
    if len(normalized) > limit:
        raise ContentTooLong(
            f"Memory content is {len(normalized)} characters; the maximum is {limit}. "
            "Store long texts as documents instead.",
            details={"length": len(normalized), "max": limit},
        )
    return normalized


def validate_thresholds(duplicate: Any, supersede: Any) -> None:
    """Each threshold in [0, 1] (or None); supersede <= duplicate when both are set."""
    for name, value in (("duplicate_threshold", duplicate), ("supersede_threshold", supersede)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
            raise ThresholdsInvalid(
                f"{name} must be a number between 0 and 1.", details={name: value}
            )
    if duplicate is not None and supersede is not None and supersede > duplicate:
        raise ThresholdsInvalid(
            "supersede_threshold must not exceed duplicate_threshold.",
            details={"duplicate_threshold": duplicate, "supersede_threshold": supersede},
        )



def validate_kind(value: Any) -> str | None:
    """A non-empty string of at most 100 characters, or None (unstated)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value.strip()) > MEMORY_KIND_MAX_CHARS:
        raise ValidationFailed(f"`kind` must be a non-empty string of at most {MEMORY_KIND_MAX_CHARS} characters.",
                               details={"field": "kind"})
    return value.strip()


def validate_text_field(value: Any, *, name: str, limit: int | None = None) -> str | None:
    """``title`` / ``summary``: a string (at most ``limit`` characters), or None (unstated)."""
    if value is None:
        return None
    if not isinstance(value, str) or contains_nul(value) or (limit is not None and len(value) > limit):
        bound = f" of at most {limit} characters" if limit is not None else ""
        raise ValidationFailed(f"`{name}` must be a string{bound} without NUL characters.",
                               details={"field": name})
    return value.strip()


def validate_confidence(value: Any) -> float | None:
    """A number in [0, 1], or None (unstated); else 400 CONFIDENCE_INVALID."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0.0 <= value <= 1.0:
        raise ConfidenceInvalid(details={"confidence": value if isinstance(value, (int, float, str)) else repr(value)})
    return float(value)


def validate_expires_at(value: Any, now: datetime) -> datetime | None:
    """An aware datetime after ``now``, or None (unstated); else 400 EXPIRES_AT_INVALID."""
    if value is None:
        return None
    if isinstance(value, datetime) and timezone.is_naive(value):
        raise ExpiresAtInvalid(f"`expires_at` {value.isoformat()} has no time zone; add one, e.g. "
                               f"{value.strftime('%Y-%m-%dT%H:%M:%SZ')} for UTC.",
                               details={"expires_at": str(value)})
    if not isinstance(value, datetime) or value <= now:
        raise ExpiresAtInvalid(details={"expires_at": str(value)})
    return value


def ephemeral_expiry(retention_class: str, expires_at: datetime | None, now: datetime) -> datetime | None:
    """VALIDATION_ERROR for an unknown retention class; an ephemeral memory written without
    ``expires_at`` lives MEMORY_EPHEMERAL_TTL_SECONDS (docs/retention.md)."""
    if retention_class not in RetentionClass.values:
        raise ValidationFailed(f"`retention_class` must be one of {', '.join(RetentionClass.values)}.",
                               details={"field": "retention_class", "accepted": list(RetentionClass.values)})
    if retention_class == RetentionClass.EPHEMERAL and expires_at is None:
        return now + timedelta(seconds=engine_settings.MEMORY_EPHEMERAL_TTL_SECONDS)
    return expires_at


def resolve_expiry(store: MemoryStore, expires_at: datetime | None, now: datetime) -> datetime | None:
    """The writer's expiry, else now + the store's ``ttl_default``; capped at now + ``ttl_max``."""
    if expires_at is None and store.ttl_default:
        expires_at = now + timedelta(seconds=store.ttl_default)
    return cap_expiry(store, expires_at, now)


def cap_expiry(store: MemoryStore, expires_at: datetime | None, now: datetime) -> datetime | None:
    if not store.ttl_max:
        return expires_at
    cap = now + timedelta(seconds=store.ttl_max)
    return cap if expires_at is None or expires_at > cap else expires_at


def resolve_thresholds(
    store: MemoryStore, duplicate: float | None, supersede: float | None
) -> tuple[float, float]:
    """Request -> store -> settings default, then validated as a pair."""
    dup = duplicate if duplicate is not None else store.duplicate_threshold
    sup = supersede if supersede is not None else store.supersede_threshold
    dup = dup if dup is not None else engine_settings.DUPLICATE_THRESHOLD
    sup = sup if sup is not None else engine_settings.SUPERSEDE_THRESHOLD
    validate_thresholds(dup, sup)
    return float(dup), float(sup)



#: Tiers whose writes pass the instruction guard: what they hold reaches other users' turns.
GUARDED_TIERS = frozenset({Tier.AGENT, Tier.INSTITUTIONAL})


def refusal_of(store: MemoryStore, verdict: Verdict) -> InstructionRejected:
    """A refused write, counted and logged (path=write, the store id, never the text): the 400
    INSTRUCTION_REJECTED to raise, with the guard's reason."""
    record_block(store.pk, path="write", rule=str(verdict.family), tier=store.tier, verdict=verdict)
    return InstructionRejected(details=verdict.details())


def check_memory_quota(store: MemoryStore) -> None:
    project = store.project
    limit = project.max_memories if project.max_memories is not None else engine_settings.MAX_MEMORIES_PER_PROJECT
    if limit is None:
        return
    # one count at a time per project (concurrent creates into other stores commit first): a
    # statement of its own, since a count in the locking statement reads the snapshot from before
    lock_memory_quota(project.pk)
    used = Memory.objects.live().filter(store__project_id=project.pk).count()
    if used >= limit:
        raise QuotaExceeded(
            f"Project {project.name} holds {used} valid memories; its quota is {limit}.",
            details={"used": used, "limit": limit},
        )


class MemoryFields(TypedDict, total=False):
    """What a writer states about the memory: the fields POST /memories and the write_memory tool
    take (agent_tools.MEMORY_FIELDS). Each may be left out; the funnel's write_request applies
    the defaults, there only."""

    tags: dict[str, Any] | None
    metadata: dict[str, Any] | None
    about: About | dict[str, Any] | None
    kind: str | None
    title: str | None
    summary: str | None
    confidence: float | None
    facet: str | None
    expires_at: datetime | None
    provenance: str
    lineage: str
    consent_category: str | None


class WriteArguments(MemoryFields, total=False):
    """memory_write's optional keyword arguments (beside ``store``, ``content`` and
    ``principal``), declared once for memory_write and write_request (a batch item takes them
    too). Each may be left out; write_request applies the defaults, there only."""

    mechanism: str
    source_type: str
    duplicate_threshold: float | None
    supersede_threshold: float | None
    generation_id: str | None
    rule_id: str | None
    judge: Any
    conversation_id: str | None
    agent: Agent | None
    retention_class: str


def check_keywords(function: str, given: Mapping[str, Any], declared: frozenset[str]) -> None:
    """Raise TypeError, as a signature would, for a keyword argument ``declared`` does not name:
    keyword arguments built from a dict (a batch item, a serializer's fields) escape the type
    checker."""
    unknown = sorted(given.keys() - declared)
    if unknown:
        raise TypeError(f"{function}() got an unexpected keyword argument {unknown[0]!r}")


@dataclass
class WriteRequest:
    """One write's validated inputs (memory_write's arguments), for the funnel's transaction."""

    text: str
    digest: str
    tags: dict[str, Any]
    metadata: dict[str, Any]
    source_type: str
    about: About | None
    kind: str | None
    title: str | None
    summary: str | None
    confidence: float | None
    facet: str | None
    expires_at: datetime | None
    agent: Agent | None
    retention_class: str
    thresholds: tuple[float, float]
    judge: Any
    principal: str
    mechanism: str
    generation_id: str | None
    rule_id: str | None
    provenance: str = Provenance.UNKNOWN
    lineage: str = Lineage.NATIVE
    #: the writer's consent category (None: no claim)
    consent_claim: str | None = None
    #: the consent classifier's verdict, once the write's vector is known (the funnel sets it)
    consent: ConsentVerdict | None = None
    #: who or what the text is about (memory_engine.mentions.subject_keys)
    subjects: list[str] = field(default_factory=list)
    #: the content as written, when it differs from ``text`` (its lines: the write gate reads them)
    raw: str = ""
    #: the instruction guard's findings (Finding.as_json), set by the funnel's judge_write: on the
    #: text (None when its content row holds a current one) and on the title, tags and metadata
    guard: dict[str, Any] | None = None
    fields_guard: dict[str, Any] | None = None
    #: the guard has judged this write (judge_writes)
    judged: bool = False
