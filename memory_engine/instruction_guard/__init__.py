"""Stored instructions never reach a model: the guard, the item filter and its counter.

A memory is data. Text that reads as instructions to an AI — setting earlier instructions
aside, addressing the model that will read it, or forging a chat turn — is refused on write
(``400 INSTRUCTION_REJECTED``, memory_engine.services.memories) and dropped from every
read that hands stored text toward a model (knowledge_search, and so context injection, the
search API and the agent tools). A dropped item stays stored; each drop is logged (id, path,
family, rule, score — never the text) and counted in
``memory_engine_instructions_blocked_total``. No setting turns the guard off.

    verdict = judge(text)                         # Verdict(family, rule, score, view)
    family = reads_as_instruction(text)           # "override", "address_ai", "role_marker" or None
    verdict = first_verdict(text, tags, metadata, gate="write")
    kept = drop_instructions(hits, path="search", fields=lambda h: (h.id, "", (h.text, h.tags)))

How a text is judged:

1. **What a reader sees** (:mod:`.normal`): NFKC, invisible characters removed, Cyrillic,
   Greek and Armenian look-alike letters as Latin (:mod:`.confusables`), spaced-out, dotted
   and hyphen-split words closed up, leetspeak as letters. Base64, hex and rot13 segments
   that decode to readable text are judged as texts of their own (``view`` names the
   encoding).
2. **Rules** (:mod:`.rules`, :mod:`.lexicon`): chat-template tokens, a closed ``<knowledge>``
   fence, forged turns and source tags; phrases that set the reader's instructions aside,
   disclose its prompt or address it, in English and a lexicon of thirteen more languages.
   A rule decides alone.
3. **Meaning** (:mod:`.classifier`): a linear head over sentence embeddings, fitted on
   labelled exemplars, scores each sentence group; the text's score is its worst group's
   probability of being an instruction. The score decides when no rule did, against a bar
   that depends on the gate and on cues: reads (``gate="read"``, whatever reaches a model)
   are judged with lower bars than the institutional write gate (``gate="write"``), whose
   refusals a writer sees; a text that addresses the reader, names an AI, instructions or
   secrets, or opens a line with a model's role (``Assistant:``) meets the lower of the two.

Ordinary imperatives ("always escalate refunds over £500") and look-alikes ("ignore the
printer noise") pass: the rules need instructions *named as the reader's*, an AI as
addressee, or a template marker, and the head was fitted on such look-alikes as benign.
Figures: bench/instruction_guard.py, docs/benchmarks.md.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from prometheus_client import Counter

from . import classifier
from .normal import canonical, normalise, payloads, words
from .rules import cues, rule_hit

__all__ = [
    "BARS",
    "BLOCKED",
    "Verdict",
    "drop_instructions",
    "first_instruction",
    "first_verdict",
    "item_strings",
    "judge",
    "judge_many",
    "normalise",
    "reads_as_instruction",
    "record_block",
]

logger = logging.getLogger("memory_engine.instruction_guard")

#: The classifier's bars, (plain, cued) per gate: a score at or above the bar blocks the text.
#: "cued" applies when the text shows a cue (rules.cues: the reader addressed, an AI, its
#: instructions or secrets named, a role prefix, an address to send things to), "plain" when
#: it shows none. Reads (whatever reaches a model) hold the lower bars; the write gate's
#: refusals are seen by a writer, and what it lets in is still judged on every read.
BARS: dict[str, tuple[float, float]] = {"read": (0.9, 0.6), "write": (0.95, 0.8)}
#: Sentence groups of at most this many characters are scored one by one.
SEGMENT_CHARS = 240
#: At most this many groups of one text are scored (the rules read all of it).
MAX_SEGMENTS = 64
#: A view of fewer words than this is judged by the rules alone (tag keys, one-word values).
MIN_WORDS = 3

@dataclass(frozen=True)
class Verdict:
    """What the guard made of one text.

    ``family``: ``override``, ``address_ai`` or ``role_marker`` when the text reads as
    instructions, else None. ``rule``: what decided (a rule's name, or ``classifier``; ""
    when nothing did). ``score``: the classifier's probability that the worst part of the
    text is an instruction: None when a rule decided (the model is not run then), 0 when the
    text was too short to score. ``view``: where it was found:
    ``text``, or the encoding (``base64``, ``hex``, ``rot13``) of a decoded payload.
    """

    family: str | None
    rule: str
    score: float | None
    view: str

    @property
    def blocked(self) -> bool:
        return self.family is not None

    def details(self) -> dict[str, Any]:
        """The reason, as recorded in a refusal's ``details`` and the log (never the text)."""
        score = None if self.score is None else round(self.score, 3)
        return {"rule": self.rule, "family": self.family, "score": score, "view": self.view}


CLEAN = Verdict(None, "", 0.0, "text")


# --------------------------------------------------------------------------- assessment

@dataclass(frozen=True)
class _Assessment:
    """A text's rule hit, cues and best classifier reading; the gate is applied after."""

    hit: tuple[str, str, str] | None    # (family, rule, view)
    cued: bool
    score: float | None                 # None: a rule decided, the classifier was not run
    family: str                         # the classifier's likeliest instruction family
    view: str


_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|\n+|(?<=[。！？])")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


def _segments(view: str) -> list[str]:
    """The view in groups of whole sentences of at most SEGMENT_CHARS characters."""
    groups: list[str] = []
    current = ""
    for sentence in (s.strip() for s in _SENTENCE_END.split(view)):
        if not sentence:
            continue
        if current and len(current) + 1 + len(sentence) > SEGMENT_CHARS:
            groups.append(current)
            current = sentence
        else:
            current = f"{current} {sentence}" if current else sentence
        while len(current) > 2 * SEGMENT_CHARS:
            cut = current.rfind(" ", 0, SEGMENT_CHARS)
            cut = cut if cut > 0 else SEGMENT_CHARS
            groups.append(current[:cut])
            current = current[cut:].strip()
    if current:
        groups.append(current)
    return groups[:MAX_SEGMENTS]


def _long_enough(view: str) -> bool:
    return len(words(view).split()) >= MIN_WORDS or len(_CJK.findall(view)) >= 6


def _views(text: str) -> list[tuple[str, str]]:
    """(name, text) for the text as a reader sees it and every readable payload it hides."""
    normal = normalise(text)
    views = [("text", canonical(text))]
    for encoding, decoded in payloads(normal):
        views.append((encoding, canonical(decoded)))
    return views


def _plan(text: str) -> tuple[tuple[str, str, str] | None, bool, list[tuple[str, str]]]:
    """(rule hit, a cue seen, (view name, segment) pairs to score: none once a rule decided)."""
    normal = normalise(text)
    hit: tuple[str, str, str] | None = None
    found = rule_hit(normal, words(normal))
    if found:
        hit = (found[0], found[1], "text")
    cued = bool(cues(normal, words(normal)))
    to_score: list[tuple[str, str]] = []
    for name, view in _views(text):
        if hit is None:
            found = rule_hit(view, words(view))
            if found:
                hit = (found[0], found[1], name)
        cued = cued or bool(cues(view, words(view)))
        if _long_enough(view):
            to_score.extend((name, segment) for segment in _segments(view))
    return hit, cued, [] if hit else to_score


_assessed: OrderedDict[str, _Assessment] = OrderedDict()
_assessed_lock = threading.Lock()
_ASSESSED_SIZE = 8192
_classifier_failed = False


def _scores(segments: list[str]) -> Any:
    """Class probabilities of ``segments``, or None when the classifier cannot run (logged
    once per process; the rules still judge)."""
    global _classifier_failed
    try:
        return classifier.classify(segments)
    except Exception as exc:  # a missing or broken model must not take the rules down with it
        if not _classifier_failed:
            logger.error("instruction guard: the classifier cannot run (%s); judging by the rules alone", exc)
            _classifier_failed = True
        return None


def _assess_many(texts: Sequence[str]) -> list[_Assessment]:
    out: list[_Assessment | None] = [None] * len(texts)
    plans: dict[str, tuple[tuple[str, str, str] | None, bool, list[tuple[str, str]]]] = {}
    with _assessed_lock:
        for i, text in enumerate(texts):
            known = _assessed.get(text)
            if known is not None:
                _assessed.move_to_end(text)
                out[i] = known
    for i, text in enumerate(texts):
        if out[i] is None and text not in plans:
            plans[text] = _plan(text)
    segments = sorted({segment for _, _, pairs in plans.values() for _, segment in pairs})
    probabilities = _scores(segments) if segments else None
    row_of = {segment: n for n, segment in enumerate(segments)}
    fresh: dict[str, _Assessment] = {}
    for text, (hit, cued, pairs) in plans.items():
        score: float | None = None if hit else 0.0
        family, view = "override", "text"
        if probabilities is not None:
            for name, segment in pairs:
                row = probabilities[row_of[segment]]
                if score is not None and 1.0 - float(row[0]) > score:
                    score = 1.0 - float(row[0])
                    family = classifier.CLASSES[1 + int(row[1:].argmax())]
                    view = name
        fresh[text] = _Assessment(hit, cued, score, family, view)
    if probabilities is None and segments:
        return [known if known is not None else fresh[text] for known, text in zip(out, texts, strict=True)]
    with _assessed_lock:  # (a reading without the classifier is not kept: it may come back)
        for text, assessment in fresh.items():
            _assessed[text] = assessment
        while len(_assessed) > _ASSESSED_SIZE:
            _assessed.popitem(last=False)
    return [known if known is not None else fresh[text] for known, text in zip(out, texts, strict=True)]


def _verdict(assessment: _Assessment, gate: str) -> Verdict:
    if assessment.hit is not None:
        family, rule, view = assessment.hit
        return Verdict(family, rule, assessment.score, view)
    plain, cued = BARS[gate]
    bar = cued if assessment.cued else plain
    if assessment.score is not None and assessment.score >= bar:
        return Verdict(assessment.family, "classifier", assessment.score, assessment.view)
    return Verdict(None, "", assessment.score, assessment.view)


# --------------------------------------------------------------------------- public judging

def judge_many(texts: Sequence[str], *, gate: str = "read") -> list[Verdict]:
    """One :class:`Verdict` per text, the classifier run once over all of them. ``gate``:
    ``read`` (whatever reaches a model) or ``write`` (the agent and institutional write gate)."""
    if gate not in BARS:
        raise ValueError(f"gate must be one of {sorted(BARS)}")
    present = [text for text in texts if text and text.strip()]
    assessed = dict(zip(present, _assess_many(present), strict=True))
    return [_verdict(assessed[text], gate) if text in assessed else CLEAN for text in texts]


def judge(text: str, *, gate: str = "read") -> Verdict:
    """The guard's :class:`Verdict` on one text."""
    return judge_many([text], gate=gate)[0]


def reads_as_instruction(text: str, *, gate: str = "read") -> str | None:
    """The family the text falls in (``override``, ``address_ai``, ``role_marker``), or None
    when it reads as ordinary data."""
    return judge(text, gate=gate).family


def item_strings(*values: Any) -> list[str]:
    """Every string in ``values``: strings themselves, and every key and string nested in
    dicts, lists and tuples (tags, metadata, titles). Iterative: deep values cannot exhaust
    the stack."""
    found: list[str] = []
    stack: list[Any] = list(values)
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, (list, tuple)):
            stack.extend(value)
    return found


def first_verdict(*values: Any, gate: str = "read") -> Verdict | None:
    """The verdict on the first string of ``values`` (see :func:`item_strings`) that reads as
    an instruction, or None."""
    strings = item_strings(*values)
    for verdict in judge_many(strings, gate=gate):
        if verdict.blocked:
            return verdict
    return None


def first_instruction(*values: Any, gate: str = "read") -> str | None:
    """The family of the first string of ``values`` that reads as an instruction, or None."""
    verdict = first_verdict(*values, gate=gate)
    return verdict.family if verdict else None


# --------------------------------------------------------------------------- drops

BLOCKED = Counter(
    "memory_engine_instructions_blocked",
    "Stored items dropped from a read (path=context|search|tools|list|open) or writes refused (path=write) "
    "because their text reads as instructions to an AI.",
    ["path", "rule", "tier"],
)

_logged: set[str] = set()
_logged_lock = threading.Lock()


def record_block(item_id: str, *, path: str, rule: str, tier: str = "", verdict: Verdict | None = None) -> None:
    """Count one blocked item and log it (id, tier, path, family, and with a ``verdict`` the
    deciding rule, score and view; never the text): at info level the first time this process
    sees the id, at debug level afterwards. ``rule`` is the family (the counter's label);
    ``tier`` the memory store's tier ("" for a document chunk)."""
    BLOCKED.labels(path=path, rule=rule, tier=tier).inc()
    with _logged_lock:
        first = item_id not in _logged
        _logged.add(item_id)
    reason = verdict.details() if verdict else {"rule": rule, "family": rule, "score": None, "view": "text"}
    logger.log(logging.INFO if first else logging.DEBUG,
               "instruction guard blocked item=%s tier=%s path=%s family=%s rule=%s score=%s view=%s",
               item_id, tier, path, rule, reason["rule"], reason["score"], reason["view"],
               extra={"item_id": item_id, "tier": tier, "path": path, "rule": rule, "reason": reason})


T = TypeVar("T")


def drop_instructions(items: Iterable[T], *, path: str,
                      fields: Callable[[T], tuple[str, str, tuple[Any, ...]]]) -> list[T]:
    """``items`` without those whose strings read as instructions (judged on the read gate,
    all items' strings in one classifier run). ``fields(item)`` gives ``(item id, tier,
    values to scan)``; each drop goes through :func:`record_block`."""
    listed = [(item, *fields(item)) for item in items]
    strings = [item_strings(*values) for _, _, _, values in listed]
    verdicts = iter(judge_many([s for group in strings for s in group], gate="read"))
    kept: list[T] = []
    for (item, item_id, tier, _), group in zip(listed, strings, strict=True):
        found = [v for v in (next(verdicts) for _ in group) if v.blocked]
        if found:
            record_block(item_id, path=path, rule=str(found[0].family), tier=tier, verdict=found[0])
        else:
            kept.append(item)
    return kept
