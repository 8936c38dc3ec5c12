"""Whether two facts about one subject state the same attribute: "Host db-prod-3 runs PostgreSQL
16" and "db-prod-3 was upgraded to PostgreSQL 18" do (a new value), "Host db-prod-3 has 64 GB of
RAM" does not (another attribute, beside it). Rules only, no model.

Two readings of each fact, without its subject (the identifier or name it is about, and the nouns
that head it: "Customer account ACME-5", "The Berlin office"):

* its **value types**: dates, times, amounts of money, percentages, other numbers, frequencies,
  names, codes, the values of a status. "... has an appointment on 17 June" (a date) and "...'s
  appointment is with Dr. Moreau" (a name) state two attributes;
* its **relation words**: what is left without values, function words and the words of a change
  ("now", "was moved to", "switched"), stemmed and mapped to their attribute family ("costs" and
  "priced" are one, "staff" and "employees" another).

Two facts state the same attribute unless both have value types and none is shared, or both have
relation words and none is shared.
"""

from __future__ import annotations

import re

from .model import DATE, fold
from .rules import extract_mentions
from .subject_keys import identifier_spans, subject_spans
from .vocabulary import MONTHS, SUBJECT_VERBS, WEEKDAYS

__all__ = ["marks_a_change", "relation_words", "same_attribute", "value_types"]

_TOKEN = re.compile(r"[$€£¥]?[\w'’@./:+-]*\w")
#: Words that tell that something changed, not what.
_CHANGE_WORDS = frozenset("""
    now new newly changed change changes moved move moves switched switch switches updated update updates
    set became become becomes instead anymore longer went go goes took take takes over got get gets
    turned made make makes raised lowered increased decreased reduced cut bumped pushed back forward
    rescheduled reassigned extended shortened lengthened expanded upgraded downgraded migrated replaced
    transferred promoted demoted renamed revised adjusted corrected from since effective starting onward
    onwards today latest currently been being still passed handed hand handing grew grown grow grows
    dropped rose risen fell fallen slipped ramped bumped""".split())
#: Words with which a fact says that it replaces an earlier value ("now", "moved", "switched").
_CHANGE_MARKERS = frozenset("""
    now longer anymore new newly instead moved switched changed updated transferred promoted reassigned
    replaced upgraded downgraded migrated renamed rescheduled extended expanded raised lowered increased
    decreased reduced became handed passed""".split())
_FUNCTION_WORDS = frozenset("""
    a an the of to in on at by for with from as into onto per via about than and or but nor its it
    is are was were be has have had do does did will would shall should can could may might must
    this that these those their our my your his her them they we us i you he she who which what
    one all each every any some more less most least very also just only up down out there here
    not no never yes so too again already yet soon later early earlier after before until while when
    where then than because if whether both either neither other another such own same its it's
    him me mine yours ours theirs hers whose whom everyone everybody us""".split())
#: The values of a status.
_STATUS_WORDS = frozenset("""
    paid unpaid overdue open closed resolved pending active inactive cancelled canceled archived
    suspended approved rejected draft published blocked done complete completed failed running stopped
    enabled disabled expired valid invalid full partially partial marked mark status state hold
    awaiting approval transit delivered shipped received returned lost delayed on-time""".split())
_FREQUENCY_WORDS = frozenset("""
    daily weekly fortnightly monthly quarterly yearly annually annual hourly biweekly biannually""".split())
#: Words of one attribute family, as written (their stems are found too).
_FAMILIES = [
    {"price", "cost", "costs", "priced", "fee", "rate", "charge", "total", "totals", "amount"},
    {"own", "owner", "owned", "belong", "maintain", "maintainer"},
    {"assign", "assigned", "assignee", "handle", "handled", "responsible", "work", "analyst", "reviewer",
     "review", "reviews"},
    {"role", "admin", "editor", "viewer", "permission", "access"},
    {"depart", "departure", "leave", "leaves", "takeoff", "boarding"},
    {"arrive", "arrival", "deliver", "delivery", "due", "eta", "land", "lands"},
    {"end", "ends", "expire", "expires", "expiry", "renew", "renewal", "terminate", "until", "valid"},
    {"run", "runs", "version", "install", "installed", "os"},
    {"manage", "managed", "manager", "head", "lead", "led"},
    {"report", "reports", "boss", "supervisor"},
    {"department", "team", "group", "division"},
    {"limit", "allow", "allows", "quota", "cap"},
    {"located", "location", "based", "live", "lives", "sit", "sits", "housed", "address", "stored", "store"},
    {"contact", "representative", "liaison"},
    {"term", "terms", "payment"},
    {"prefer", "prefers", "preference", "language", "locale"},
    {"desk", "desks", "seat", "seats", "capacity", "headcount", "employee", "employees", "staff", "people"},
    {"appointment", "visit", "booking", "slot"},
    {"mileage", "odometer", "kilometre", "kilometer", "mile"},
    {"carrier", "carry", "carried", "courier"},
]
_SUFFIXES = ("ships", "ship", "ations", "ation", "ings", "ing", "ions", "ion", "ers", "er", "ed", "es", "al", "s")
_TIME = re.compile(r"^\d{1,2}[:.h]\d{2}$|^\d{1,2}(?:am|pm)$")
_MONEY = re.compile(r"^[$€£¥]|(?:usd|eur|gbp|chf)$")


def _stem(word: str) -> str:
    word = word.removesuffix("'s").removesuffix("’s")
    for suffix in _SUFFIXES:
        if len(word) - len(suffix) >= 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


_FAMILY_OF = {form: index for index, family in enumerate(_FAMILIES) for word in family
              for form in (word, _stem(word), _stem(_stem(word)))}


def _canonical(word: str) -> str:
    """The word's attribute family, or its stem ("retargeted" as "target")."""
    stem = _stem(word)
    for form in (word, stem, _stem(stem)):
        if form in _FAMILY_OF:
            return f"family:{_FAMILY_OF[form]}"
    if stem.startswith("re") and len(stem) > 5:
        return _canonical(stem[2:])
    return stem


class _Reading:
    """A fact's tokens, each marked as its subject, a value (with its type) or a word."""

    def __init__(self, text: str) -> None:
        subject = subject_spans(text)
        names = [(m.start, m.end, m.kind) for m in extract_mentions(text) if m.start >= 0]
        codes = identifier_spans(text)
        tokens = [(m.start(), m.end(), m.group()) for m in _TOKEN.finditer(text)]

        def within(start: int, end: int, spans: list[tuple[int, int]]) -> bool:
            return any(start < b and a < end for a, b in spans)

        in_subject = [within(start, end, subject) for start, end, _ in tokens]
        heads = _subject_heads(tokens, in_subject)
        self.types: set[str] = set()
        self.words: set[str] = set()
        #: the codes among the values (a code the other fact names too is their subject)
        self.codes: set[str] = set()
        #: every code the fact names, its subject's too
        self.named = {fold(text[a:b]) for a, b in codes}
        for index, (start, end, word) in enumerate(tokens):
            if in_subject[index] or index in heads:
                continue
            kind = next((k for a, b, k in names if start < b and a < end), None)
            folded = fold(word)
            value = _value_type(word, folded, kind, is_code=within(start, end, codes), first=index == 0)
            if value == "code":
                self.codes.add(folded)
            elif value:
                self.types.add(value)
            elif any(c.isalpha() for c in folded) and folded not in _FUNCTION_WORDS and folded not in _CHANGE_WORDS:
                self.words.add(_canonical(folded))


def _value_type(word: str, folded: str, kind: str | None, *, is_code: bool, first: bool) -> str | None:
    """The type of value a token is part of (None: a word)."""
    if is_code:
        return "code"
    if _MONEY.search(folded):
        return "money"
    if kind == DATE or folded in MONTHS or folded in WEEKDAYS:
        return "date"
    if _TIME.match(folded):
        return "time"
    if folded.endswith("%") or folded in ("percent", "%"):
        return "percent"
    if folded in _FREQUENCY_WORDS:
        return "frequency"
    if folded in _STATUS_WORDS:
        return "status"
    if any(c.isdigit() for c in folded):
        return "number"
    if kind is not None or (word[:1].isupper() and not word.isupper() and not first):
        return "name"  # an acronym (RAM, GB) is a word
    return None


def _subject_heads(tokens: list[tuple[int, int, str]], in_subject: list[bool]) -> set[int]:
    """The nouns that head the subject: the words right before it ("Customer account ACME-5",
    "Host db-prod-3") and the lower-case nouns right after a name ("The Graz branch office has"),
    none of them a function word; after a possessive ("ACME-5's account manager") the words are
    the attribute."""
    heads: set[int] = set()
    for index, inside in enumerate(in_subject):
        if not inside or (index + 1 < len(in_subject) and in_subject[index + 1]):
            continue
        start = index
        while start > 0 and in_subject[start - 1]:
            start -= 1
        before = start - 1
        while before >= 0 and not in_subject[before] and fold(tokens[before][2]) not in _FUNCTION_WORDS:
            heads.add(before)
            before -= 1
        if tokens[index][2].endswith(("'s", "’s")):
            continue
        after = index + 1
        while after < len(tokens) and _head_noun(tokens[after][2]):
            heads.add(after)
            if tokens[after][2].endswith(("'s", "’s")):
                break
            after += 1
    return heads


def _head_noun(word: str) -> bool:
    """A lower-case noun heading a name ("office", "office's"), not a verb after it ("works")."""
    folded = fold(word)
    if not word.islower():
        return False
    if folded.endswith(("'s", "’s")):
        return True
    return (folded not in _FUNCTION_WORDS and folded not in _CHANGE_WORDS and folded not in SUBJECT_VERBS
            and folded not in _STATUS_WORDS and not folded.endswith(("s", "ed")))


def marks_a_change(text: str) -> bool:
    """Whether ``text`` says that it replaces an earlier value ("Dana Whitfield moved to the Legal
    department", "Our new contact at Initech is ...")."""
    return any(fold(match.group()) in _CHANGE_MARKERS for match in _TOKEN.finditer(text))


def value_types(text: str) -> set[str]:
    """The types of the values ``text`` states besides its subject (see the module's docstring)."""
    return _Reading(text).types


def relation_words(text: str) -> set[str]:
    """The stemmed relation words of ``text`` (see the module's docstring)."""
    return _Reading(text).words


def same_attribute(old: str, new: str) -> bool:
    """Whether ``old`` and ``new`` (two facts about one subject) state the same attribute: unless
    both state values and no type is shared ("on 17 June" / "with Dr. Moreau"), or both have
    relation words and none is shared ("allows 300 requests per minute" / "times out after 30
    seconds"). A fact with neither says only that its subject's value changed ("PO-4411:
    delivered.", "db-prod-1 is now on PostgreSQL 17")."""
    a, b = _Reading(old), _Reading(new)
    if a.codes - b.named:
        a.types.add("code")
    if b.codes - a.named:
        b.types.add("code")
    if a.types and b.types and a.types.isdisjoint(b.types):
        return False
    return not (a.words and b.words and a.words.isdisjoint(b.words))
