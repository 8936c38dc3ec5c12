"""What a decision writes (docs/write-funnel.md, steps 5 and 6): the new memory, the memory it
retires or the kept one's reinforcement, and exactly one assertion in the append-only ledger.

:func:`record_decision` builds the rows and their statements; the funnel sends them in its
transaction's last round trip (memory_engine.db.one_round_trip), in the order the change feed's
triggers expect: the memory before its assertion.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memory_engine.conf import engine_settings
from memory_engine.db import insert_sql, update_sql
from memory_engine.instruction_guard import merge_findings
from memory_engine.mentions.subject_keys import subject_keys
from memory_engine.models import Memory, MemoryAssertion, MemoryContent, MemoryRevision, MemoryStore
from memory_engine.models.memories import Kind, Outcome

from .consent_category import consent_expiry_cap, consent_outcome
from .decision import Decision
from .validation import About, WriteRequest, cap_expiry, resolve_expiry

__all__ = ["MAX_POTENTIAL_DUPLICATES", "MAX_REINFORCED_CONFIDENCE", "Recorded", "record_decision",
           "reinforced_confidence"]

#: Reinforcement never makes a memory certain.
MAX_REINFORCED_CONFIDENCE = 0.99
#: How many near matches a write answers as ``potential_duplicates``.
MAX_POTENTIAL_DUPLICATES = 5

Statement = tuple[str, list[Any]]


@dataclass
class Recorded:
    """The rows a decision writes, and the statements that write them (in their order)."""

    memory: Memory
    assertion: MemoryAssertion
    replaced: Memory | None = None
    reinforced: bool = False
    potential_duplicates: list[dict[str, Any]] = field(default_factory=list)
    writes: list[Statement] = field(default_factory=list)
    #: the rows the statements insert (marked saved once they ran)
    inserted: list[Any] = field(default_factory=list)


def record_decision(store: MemoryStore, request: WriteRequest, decision: Decision, *, content_row: MemoryContent,
                    neighbours: list[tuple[str, float]], notes: dict[str, Any], now: datetime) -> Recorded:
    """The rows and statements of ``decision`` for ``request``: a skip reinforces the kept memory
    (_reinforce), a supersede retires the match into a new memory that inherits its tags,
    metadata, ``about``, kind, title and summary under the incoming ones (_new_memory), a create
    writes a new memory; then the assertion, with ``notes`` and what the decision found. The memory
    gets the more sensitive of the write's consent category and the matched one's, and an expiry
    within that category's (consent_expiry_cap)."""
    action, match = decision.action, decision.match
    assert request.consent is not None  # the funnel classified the write before its transaction
    category, consent_details = consent_outcome(
        request.consent, earlier=match.consent_category if match is not None and action != Outcome.CREATED else None)
    expiry = consent_expiry_cap(store, category, resolve_expiry(store, request.expires_at, now), now)
    replaced: Memory | None = None
    reinforced = False
    about = request.about
    writes: list[Statement] = []
    if action == Outcome.SKIPPED:
        memory = match
        assert memory is not None
        reinforced, reinforcing = _reinforce(memory, store=store, content_row=content_row,
                                             confidence=request.confidence, expires_at=expiry, now=now, notes=notes,
                                             consent_category=category)
        writes.extend(reinforcing)
        notes["reinforced"] = reinforced
    else:
        if action == Outcome.SUPERSEDED:
            replaced = match
            assert replaced is not None
        memory, about = _new_memory(store, request, content_row=content_row, replaced=replaced, expiry=expiry,
                                    now=now, consent_category=category)
        writes.append(insert_sql(memory))
        if replaced is not None:
            writes.append(update_sql(replaced, {"invalidated_at": now, "superseded_by": memory}))
            replaced.invalidated_at, replaced.superseded_by = now, memory
    kept_or_retired = [match.pk] if match is not None and action != Outcome.CREATED else []
    dup_t, sup_t = request.thresholds
    potential = _potential_duplicates(neighbours, exclude={memory.pk, *kept_or_retired}, supersede_threshold=sup_t)

    details: dict[str, Any] = dict(notes)
    if decision.changes:
        details["changed_details"] = decision.changes
    if about is not None:
        details["about"] = about.as_dict()
    if potential:
        details["potential_duplicates"] = potential
    details["thresholds"] = {"duplicate": dup_t, "supersede": sup_t}
    details["consent"] = consent_details
    assertion = MemoryAssertion(
        store=store,
        project_id=store.project_id,
        memory=memory,
        replaced_memory=replaced,
        content=request.text,
        outcome=action,
        similarity=decision.similarity,
        decision_reason=decision.reason,
        details=details,
        principal=request.principal,
        mechanism=request.mechanism,
        generation_id=request.generation_id,
        rule_id=request.rule_id,
    )
    writes.append(insert_sql(assertion))
    inserted: list[Any] = [memory, assertion] if action != Outcome.SKIPPED else [assertion]
    return Recorded(memory=memory, assertion=assertion, replaced=replaced, reinforced=reinforced,
                    potential_duplicates=potential, writes=writes, inserted=inserted)


def _new_memory(store: MemoryStore, request: WriteRequest, *, content_row: MemoryContent, replaced: Memory | None,
                expiry: datetime | None, now: datetime, consent_category: str) -> tuple[Memory, About | None]:
    """The memory a create or a supersede writes, and the ``about`` it holds (inherited from the
    memory it replaces when the write gives none)."""
    tags, metadata, about = request.tags, request.metadata, request.about
    kind, title, summary = request.kind, request.title, request.summary
    guard = request.fields_guard
    if replaced is not None:
        tags = {**replaced.tags, **tags}
        metadata = {**replaced.metadata, **metadata}
        if about is None and replaced.about_key:
            about = About(kind=replaced.about_kind or "", key=replaced.about_key)
        kind = kind if kind is not None else replaced.kind
        title = title if title is not None else replaced.title
        summary = summary if summary is not None else replaced.summary
        # the inherited strings were judged with the memory it replaces
        guard = merge_findings(guard, replaced.guard, values=(title or "", tags, metadata))
    memory = Memory(
        store=store,
        project_id=store.project_id,
        content=content_row,
        tags=tags,
        metadata=metadata,
        source_type=request.source_type,
        about_kind=about.kind if about else None,
        about_key=about.key if about else None,
        subjects=request.subjects if about is request.about else subject_keys(
            request.text, about=(about.kind, about.key) if about else None),
        kind=kind or Kind.FACT,
        title=title or "",
        summary=summary or "",
        confidence=request.confidence if request.confidence is not None else engine_settings.DEFAULT_CONFIDENCE,
        facet=request.facet,
        agent=request.agent,
        expires_at=expiry,
        created_at=now,
        retention_class=request.retention_class,
        provenance=request.provenance,
        lineage=request.lineage,
        consent_category=consent_category,
        guard=guard,
    )
    return memory, about


def reinforced_confidence(old: float, new: float) -> float:
    """1 - (1 - old)(1 - new), capped at 0.99; never lower than ``old``."""
    return max(old, min(MAX_REINFORCED_CONFIDENCE, 1.0 - (1.0 - old) * (1.0 - new)))


def _later_expiry(store: MemoryStore, old: datetime | None, new: datetime | None, now: datetime) -> datetime | None:
    """The later of two expiries (None: never), capped at now + the store's ``ttl_max``."""
    later = None if old is None or new is None else max(old, new)
    return cap_expiry(store, later, now)


def _reinforce(memory: Memory, *, store: MemoryStore, content_row: MemoryContent, confidence: float | None,
               expires_at: datetime | None, now: datetime, notes: dict[str, Any],
               consent_category: str) -> tuple[bool, list[Statement]]:
    """A write landed on ``memory`` (a skip): keep the newer wording, raise its consent category to
    ``consent_category`` (its expiry then within that category's), and reinforce it at most once
    per REINFORCE_INTERVAL_SECONDS. Returns whether it reinforced, and the writes that do
    it (a revision's INSERT, the memory's UPDATE), for the write's last round trip; ``memory``
    shows the new values already."""
    writes: list[Statement] = []
    updates: dict[str, Any] = {}
    if memory.content_id != content_row.pk:
        # restated in other words: the newer wording is kept, the previous one is a revision
        revision = MemoryRevision(memory=memory, project_id=store.project_id, content_id=memory.content_id,
                                  created_at=now)
        writes.append(insert_sql(revision))
        notes["revision_id"] = revision.pk
        updates["content"] = content_row
        about = (memory.about_kind or "", memory.about_key) if memory.about_key else None
        updates["subjects"] = subject_keys(content_row.text, about=about)
    last = memory.reinforced_at or memory.created_at
    reinforced = (now - last).total_seconds() >= engine_settings.REINFORCE_INTERVAL_SECONDS
    if reinforced:
        updates.update(
            confidence=confidence if confidence is not None
            else reinforced_confidence(memory.confidence, engine_settings.DEFAULT_CONFIDENCE),
            expires_at=_later_expiry(store, memory.expires_at, expires_at, now),
            evidence_count=memory.evidence_count + 1,
            reinforced_at=now,
        )
    if consent_category != memory.consent_category:
        updates["consent_category"] = consent_category
    if "consent_category" in updates or "expires_at" in updates:
        current = updates.get("expires_at", memory.expires_at)
        updates["expires_at"] = consent_expiry_cap(store, consent_category, current, now)
    if updates:
        writes.append(update_sql(memory, updates))
        for name, value in updates.items():
            setattr(memory, name, value)
    return reinforced, writes


def _potential_duplicates(neighbours: list[tuple[str, float]], *, exclude: set[str],
                          supersede_threshold: float) -> list[dict[str, Any]]:
    """Neighbours in [SURFACE_DUPLICATES_ABOVE, supersede threshold), best first, at most 5."""
    low = engine_settings.SURFACE_DUPLICATES_ABOVE
    return [{"memory_id": memory_id, "similarity": similarity} for memory_id, similarity in neighbours
            if memory_id not in exclude and low <= similarity < supersede_threshold][:MAX_POTENTIAL_DUPLICATES]
