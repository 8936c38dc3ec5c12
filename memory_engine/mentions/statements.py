"""A statement's subject, attribute and value: "Marco is allergic to shellfish" is about Marco
(the subject), states "is allergic to" (the attribute) and "shellfish" (the value).

Two readings, both without a parser:

* :func:`statement` splits one text for the graph's ``about`` edge (what the entity page shows
  as a fact over time): the attribute runs from the verb through the last preposition of the
  first words, the value is the rest of the first sentence;
* :func:`changed_value` compares two texts about one subject: the same words before and after
  one span that differs, the span being the value that changed ("... allergic to shellfish" /
  "... allergic to peanuts"), or a negation added or taken away;
* :func:`value_update` is the write funnel's update by subject and attribute: a changed value
  whose shared words open with a definite subject ("the office", "Ben's airline") or name an
  entity ("Marco", "the Lisbon office"), not an indefinite one ("a man is playing ...").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .model import DATE, SPEAKER, SUBJECT, Mention, fold

__all__ = ["Statement", "ValueChange", "changed_value", "statement", "subject_of", "value_update"]

_WORD = re.compile(r"[\w'’%$£€.-]*\w|[$£€]")
_SENTENCE_END = re.compile(r"[.!?\n](?:\s|$)")
_FIRST_PERSON = frozenset({"i", "i'm", "i’m", "i've", "i’ve", "i'd", "i’d", "i'll", "i’ll", "my", "we", "we're",
                           "we’re", "our", "me"})
_PREPOSITIONS = frozenset({"to", "in", "at", "on", "for", "with", "from", "of", "by", "as", "about", "into", "over",
                           "under", "than", "via", "per"})
#: Words that make a negation on their own ("is not", "never").
_NEGATIONS = frozenset({"not", "no", "never", "n't"})
#: Words that open a definite subject: one thing the store already speaks of.
_DEFINITE = frozenset({"the", "our", "my", "your", "his", "her", "their", "its", "this", "that", "these", "those"})
#: A plural subject's verbs: "Logs are shipped ..." speaks of every log, a definite subject too.
_PLURAL_COPULAS = frozenset({"are", "were"})
#: How many words after the subject the attribute may reach.
ATTRIBUTE_WORDS = 6
#: Longest attribute and value kept (the edge's columns).
MAX_ATTRIBUTE_CHARS, MAX_VALUE_CHARS = 200, 500


@dataclass(frozen=True)
class Statement:
    subject: Mention
    attribute: str
    value: str


@dataclass(frozen=True)
class ValueChange:
    """What differs between two statements about one subject: the words they share before the
    changed span (``attribute``), and the span in each (``old`` / ``new``)."""

    attribute: str
    old: str
    new: str


def subject_of(text: str, mentions: list[Mention]) -> tuple[Mention, str] | None:
    """The subject and the rest of its first sentence: a name opening the text (role subject),
    or the speaker of a first-person ``Name: I ...`` line (the pronoun dropped)."""
    for mention in mentions:
        if mention.role == SUBJECT and mention.end > 0:
            return mention, _first_sentence(text[mention.end:])
        if mention.role == SPEAKER and mention.end > 0:
            body = text[mention.end:].lstrip(" :\t")
            words = _WORD.findall(body[:40])
            if words and fold(words[0]) in _FIRST_PERSON:
                rest = body[body.find(words[0]) + len(words[0]):]
                return mention, _first_sentence(rest)
            return None
    return None


def statement(text: str, mentions: list[Mention]) -> Statement | None:
    """The text's subject, attribute and value; None without a subject or a verb after it."""
    found = subject_of(text, mentions)
    if found is None:
        return None
    subject, rest = found
    words = _WORD.findall(rest)
    if not words:
        return None
    cut = 1
    for index, word in enumerate(words[:ATTRIBUTE_WORDS]):
        if index > 0 and fold(word) in _PREPOSITIONS:
            cut = index + 1
    attribute = " ".join(fold(w) for w in words[:cut])[:MAX_ATTRIBUTE_CHARS]
    value = " ".join(words[cut:])[:MAX_VALUE_CHARS]
    if not value:
        return None
    return Statement(subject=subject, attribute=attribute, value=value)


def changed_value(old: str, new: str) -> ValueChange | None:
    """The one span two texts differ in, when they share every other word (compared folded) and
    at least two words before it (a subject and a verb): the words before are the attribute, the
    spans the old and the new value (a negation added or taken away: an empty span against
    "not"). None for texts whose changed span is longer than the words they share (another
    statement rather than a new value), that differ in their first words, by other words added or
    removed alone (a restatement with more detail is not a new value), or not at all."""
    a, b = [fold(w) for w in _WORD.findall(old)], [fold(w) for w in _WORD.findall(new)]
    if a == b or not a or not b:
        return None
    prefix = 0
    while prefix < min(len(a), len(b)) and a[prefix] == b[prefix]:
        prefix += 1
    suffix = 0
    while suffix < min(len(a), len(b)) - prefix and a[-1 - suffix] == b[-1 - suffix]:
        suffix += 1
    old_span, new_span = a[prefix:len(a) - suffix], b[prefix:len(b) - suffix]
    negation = (not old_span and set(new_span) <= _NEGATIONS) or (not new_span and set(old_span) <= _NEGATIONS)
    if prefix < 2 or not (old_span and new_span or negation) or max(len(old_span), len(new_span)) >= prefix + suffix:
        return None
    return ValueChange(attribute=" ".join(a[:prefix])[:MAX_ATTRIBUTE_CHARS], old=" ".join(old_span),
                       new=" ".join(new_span))


def value_update(old: str, new: str, mentions: list[Mention]) -> ValueChange | None:
    """:func:`changed_value` of ``old`` and ``new`` when the words they share before the change
    hold their subject: they open with a definite word or a possessive, or name an entity of
    ``mentions`` (the new text's, dates aside) before the last of them. None otherwise: "A man is
    playing a guitar" and "A man is playing a flute" are two statements, not an update."""
    change = changed_value(old, new)
    if change is None:
        return None
    shared = change.attribute.split()
    if shared[0] in _DEFINITE or shared[0].endswith(("'s", "’s")):
        return change
    if shared[0].endswith("s") and shared[1] in _PLURAL_COPULAS:
        return change  # a kind of thing as a whole: "Logs are shipped to Loki" -> "... to Elasticsearch"
    for mention in mentions:
        if mention.kind == DATE:
            continue
        name = [fold(word) for word in _WORD.findall(mention.name)]
        if name and any(shared[i:i + len(name)] == name for i in range(len(shared) - len(name))):
            return change
    return None


def _first_sentence(text: str) -> str:
    end = _SENTENCE_END.search(text)
    return (text[:end.start()] if end else text).strip()
