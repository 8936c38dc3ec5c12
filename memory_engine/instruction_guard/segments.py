"""How the instruction guard cuts a text for judging: its views (the text as a reader sees it and
every payload it hides), their sentence groups, and the plan for one text (the rule that fired,
whether a cue shows, the groups left to score)."""

from __future__ import annotations

import re

from .normal import canonical, normalise, payloads, words
from .rules import cues, rule_hit

#: Sentence groups of at most this many characters are scored one by one.
SEGMENT_CHARS = 240
#: At most this many groups of one text are scored (the rules read all of it).
MAX_SEGMENTS = 64
#: A view of fewer words than this is judged by the rules alone (tag keys, one-word values).
MIN_WORDS = 3

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


def plan_text(text: str) -> tuple[tuple[str, str, str] | None, bool, list[tuple[str, str]]]:
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
