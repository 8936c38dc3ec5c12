"""The funnel's decision: skip, supersede or create, and why (docs/write-funnel.md, step 5).

:func:`decide` reads only what the candidates statement found (memory_engine.selectors.dedup)
and the write's inputs; it runs under the store lock and writes nothing. The changed-detail gate
(memory_engine.details) turns a skip into a supersede when a detail changed; below the supersede
threshold, the value-change gate (memory_engine.mentions.value_update) supersedes a live memory
that states the same subject and attribute with another value, and the optional judge
(memory_engine.services.judge) decides where it does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from memory_engine.conf import engine_settings
from memory_engine.details import changed_details
from memory_engine.mentions import extract_mentions, value_update
from memory_engine.mentions.attributes import marks_a_change, same_attribute
from memory_engine.mentions.subject_keys import (
    SECONDARY,
    changes_the_subject,
    primary,
    shares_subject,
    sharing_keys,
)
from memory_engine.models import Memory, MemoryContent
from memory_engine.models.memories import Outcome
from memory_engine.selectors.dedup import Candidates

from .validation import About

__all__ = ["Decision", "Reason", "decide"]


class Reason:
    """Why the funnel decided what it did (``MemoryAssertion.decision_reason``)."""

    DUPLICATE = "duplicate"
    CHANGED_DETAIL = "changed_detail"
    SIMILAR = "similar"
    ABOUT_KEY = "about_key"
    JUDGE = "judge"
    VALUE_CHANGE = "value_change"
    BELOW_THRESHOLD = "below_threshold"
    #: a live memory about one of the write's subjects states its attribute with another value
    SUBJECT_UPDATE = "subject_update"
    #: the nearest memory was similar enough to skip or supersede, but is about another subject
    SUBJECT_MISMATCH = "subject_mismatch"
    #: live memories share the write's subject, none states its attribute
    NEW_ATTRIBUTE = "new_attribute"


@dataclass
class Decision:
    """What the funnel decided for one write, before anything is stored."""

    action: str = Outcome.CREATED
    reason: str = Reason.BELOW_THRESHOLD
    match: Memory | None = None
    similarity: float | None = None
    changes: list[dict[str, Any]] = field(default_factory=list)


def decide(*, found: Candidates, has_vector: bool, content_row: MemoryContent, text: str, about: About | None,
           thresholds: tuple[float, float], judge: Any, notes: dict[str, Any],
           states: bool = True, subjects: Sequence[str] = ()) -> tuple[Decision, list[tuple[str, float]]]:
    """Skip, supersede or create (see docs/write-funnel.md) from what the candidates statement
    ``found`` among the store's live memories of the same facet; runs under the store lock.
    Returns the decision and the nearest neighbours (for ``potential_duplicates``). ``notes``
    collects what the assertion should record. ``states``: the write states a fact that a new
    value replaces (False for a conversation turn or an observation, which tell what happened:
    the value-change gate leaves them alone). ``subjects``: the write's subject keys; a memory
    sharing one is decided by attribute (_by_subject), a memory whose subjects are disjoint from
    them is never skipped into or superseded (docs/write-funnel.md, "Subjects").
    """
    neighbours = found.neighbours
    exact = _exact_match(found, about=about, content_row=content_row)
    if exact is not None:
        return exact, neighbours
    if not has_vector:
        notes.setdefault("embedding", "missing")
        return Decision(), neighbours
    if subjects:
        notes["subjects"] = list(subjects)
    if primary(subjects):
        by_subject = _by_subject(found, text=text, about=about, thresholds=thresholds, notes=notes, states=states)
        if by_subject is not None:
            return by_subject, neighbours
    nearest = _cosine_candidate(found, subjects=subjects, thresholds=thresholds, notes=notes)
    if nearest is None:
        decision = Decision(reason=Reason.ABOUT_KEY if "about_mismatch" in notes else Reason.BELOW_THRESHOLD)
    else:
        decision = _by_cosine(*nearest, text=text, about=about, thresholds=thresholds, judge=judge, notes=notes,
                              states=states)
    if decision.action == Outcome.CREATED and decision.reason == Reason.BELOW_THRESHOLD:
        if "subject_mismatch" in notes:
            decision.reason = Reason.SUBJECT_MISMATCH
        elif "subject" in notes:
            decision.reason = Reason.NEW_ATTRIBUTE
    return decision, neighbours


def _by_cosine(match: Memory, similarity: float, *, text: str, about: About | None, thresholds: tuple[float, float],
               judge: Any, notes: dict[str, Any], states: bool) -> Decision:
    """The cosine rules on the nearest memory the write's subjects leave them (_cosine_candidate).
    Not re-filtered on liveness: the statement that found it already was (and Python's clock is
    not PostgreSQL's transaction clock)."""
    decision = Decision(match=match, similarity=similarity)
    dup_t, sup_t = thresholds
    if about is not None and match.about_key is not None:
        # the match is explicitly about something else: a different fact
        notes["about_mismatch"] = {"kind": match.about_kind, "key": match.about_key}
        decision.reason = Reason.ABOUT_KEY
    elif similarity >= dup_t:
        _restated_or_changed(decision, text)
    elif similarity >= sup_t:
        decision.action, decision.reason = Outcome.SUPERSEDED, Reason.SIMILAR
    elif states and similarity >= engine_settings.VALUE_CHANGE_FLOOR and (
            change := _value_change(match.content.text, text)) is not None:
        decision.action, decision.reason = Outcome.SUPERSEDED, Reason.VALUE_CHANGE
        notes["value_change"] = change
    elif judge is not None:
        _ask_judge(decision, judge, text=text, notes=notes)
    return decision


def _by_subject(found: Candidates, *, text: str, about: About | None, thresholds: tuple[float, float],
                notes: dict[str, Any], states: bool) -> Decision | None:
    """The decision among the live memories sharing a subject with the write (the nearest of
    them): the same attribute and value is a skip, the same attribute with another value a
    supersede (``subject_update``, from SUBJECT_UPDATE_FLOOR up) unless the write tells an event
    (``states`` False); None when none of them states the write's attribute (the cosine rules then
    look at the memories whose subjects are unknown)."""
    shared = [(memory, cosine) for memory, cosine in found.by_subject
              # with an ``about`` given, a memory about another key is another fact (the one
              # about the same key is found.about, decided before)
              if about is None or memory.about_key is None]
    if not shared:
        return None
    match, similarity = shared[0]
    notes["subject"] = _subject_note(match, similarity, notes)
    dup_t, sup_t = thresholds
    if similarity >= dup_t:
        decision = Decision(match=match, similarity=similarity)
        _restated_or_changed(decision, text)
        return decision
    if not states:
        return None  # two conversation turns or observations about one subject are two events
    # the nearest of them that states the write's attribute: a subject's other attributes stay
    for match, similarity in shared:
        if similarity < engine_settings.SUBJECT_UPDATE_FLOOR:
            break
        # a subject known by a name alone, which prose names in passing ("Nelson Mandela taken to
        # hospital" / "... released from hospital"): below the supersede threshold, an update says
        # that it replaces a value ("now", "moved", "switched") or changes one span after the verb
        # (the value-change gate)
        if similarity >= sup_t:
            change = _value_change(match.content.text, text)
        elif _named_only(notes.get("subjects", []), match.subjects) and not marks_a_change(text):
            change = _value_change(match.content.text, text) if similarity >= engine_settings.VALUE_CHANGE_FLOOR \
                else None
            if change is None:
                continue
        elif same_attribute(match.content.text, text):
            change = _value_change(match.content.text, text)
        else:
            continue
        notes["subject"] = _subject_note(match, similarity, notes)
        if change is not None:  # the attribute and the two values, spelled out
            notes["value_change"] = change
            return Decision(Outcome.SUPERSEDED, Reason.VALUE_CHANGE, match, similarity)
        return Decision(Outcome.SUPERSEDED, Reason.SUBJECT_UPDATE, match, similarity)
    return None


def _restated_or_changed(decision: Decision, text: str) -> None:
    """Above the duplicate threshold: a skip, or a supersede when a detail changed."""
    assert decision.match is not None
    decision.changes = _changed_details(decision.match.content.text, text)
    if decision.changes:
        decision.action, decision.reason = Outcome.SUPERSEDED, Reason.CHANGED_DETAIL
    else:
        decision.action, decision.reason = Outcome.SKIPPED, Reason.DUPLICATE


def _named_only(subjects: Sequence[str], theirs: Sequence[str]) -> bool:
    """Whether the subject two facts share is a name alone (no identifier, no about key): prose
    names people and places in passing, so the bar for an update is higher."""
    shared = {key.removeprefix(SECONDARY) for key in set(sharing_keys(subjects)) & set(theirs)}
    return all(key.startswith("name:") for key in shared)


def _subject_note(match: Memory, similarity: float, notes: dict[str, Any]) -> dict[str, Any]:
    """What the assertion records of the memory about the write's subject the decision read."""
    return {"memory_id": match.pk, "similarity": round(similarity, 4),
            "shared": sorted(set(sharing_keys(notes.get("subjects", []))) & set(match.subjects))}


def _cosine_candidate(found: Candidates, *, subjects: Sequence[str], thresholds: tuple[float, float],
                      notes: dict[str, Any]) -> tuple[Memory, float] | None:
    """The nearest neighbour the cosine rules may decide on: the nearest of all for a write
    without subjects; else the nearest whose subjects are unknown (a memory sharing a subject was
    decided by _by_subject, one about other subjects is another fact: the nearest such one that
    the cosine rules would have skipped into or superseded is noted as ``subject_mismatch``)."""
    if not found.neighbours:
        return None
    if not primary(subjects):
        assert found.nearest is not None
        return found.nearest, found.neighbours[0][1]
    for memory_id, similarity in found.neighbours:
        theirs = found.neighbour_subjects.get(memory_id, [])
        if not primary(theirs):
            return found.neighbour(memory_id), similarity
        if any(key.startswith("about:") for key in theirs) and any(key.startswith("about:") for key in subjects):
            # explicitly about something else (another about key): a different fact, as ever
            memory = found.neighbour(memory_id)
            notes["about_mismatch"] = {"kind": memory.about_kind, "key": memory.about_key}
            return None
        if not shares_subject(subjects, theirs) and "subject_mismatch" not in notes and similarity >= thresholds[1]:
            notes["subject_mismatch"] = {"memory_id": memory_id, "similarity": round(similarity, 4),
                                         "subjects": theirs}
    return None


def _exact_match(found: Candidates, *, about: About | None, content_row: MemoryContent) -> Decision | None:
    """The decision when the write's ``about`` or its exact text is already live in the facet."""
    if about is not None and found.about is not None:
        about_match, about_cosine = found.about
        if about_match.content_id == content_row.pk:
            return Decision(Outcome.SKIPPED, Reason.DUPLICATE, about_match, 1.0)
        return Decision(Outcome.SUPERSEDED, Reason.ABOUT_KEY, about_match, about_cosine)
    if found.same_text is not None:
        return Decision(Outcome.SKIPPED, Reason.DUPLICATE, found.same_text, 1.0)
    return None


def _ask_judge(decision: Decision, judge: Any, *, text: str, notes: dict[str, Any]) -> None:
    """Below the supersede threshold: the judge's verdict on the nearest match, when it gives one
    (a failed judge keeps the cosine decision and says so)."""
    assert decision.match is not None and decision.similarity is not None
    verdict = judge(decision.match.content.text, text, decision.similarity)
    if verdict is None:
        return
    notes["judge"] = verdict.as_dict()
    if verdict.same_fact is True:
        decision.action, decision.reason = Outcome.SUPERSEDED, Reason.JUDGE
    elif verdict.same_fact is False:
        decision.reason = Reason.JUDGE
    else:
        notes["judge"]["fallback"] = "cosine"


def _value_change(old_text: str, new_text: str) -> dict[str, str] | None:
    """The subject's attribute and its old and new value when ``new_text`` states the same
    subject and attribute as ``old_text`` with another value (VALUE_CHANGE_GATE); a restatement,
    which changes more than one span or names no definite subject, and a change before the verb
    (another subject, not another value) give None."""
    if not engine_settings.VALUE_CHANGE_GATE:
        return None
    change = value_update(old_text, new_text, extract_mentions(new_text))
    if change is None or changes_the_subject(old_text, change.attribute):
        return None
    return {"attribute": change.attribute, "old": change.old, "new": change.new}


def _changed_details(old_text: str, new_text: str) -> list[dict[str, Any]]:
    if not engine_settings.CHANGED_DETAIL_GATE:
        return []
    return [change.as_dict() for change in changed_details(old_text, new_text)]
