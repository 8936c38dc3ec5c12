"""Who or what a fact is about, as keys the write funnel compares (docs/write-funnel.md, "Subjects").

A fact's subject keys are:

* the **identifiers** it names anywhere: codes (``ACME-19``, ``OPS-512``, ``db-prod-3``,
  ``SKU-B417``, ``AF1180``), numbers of a record (``#48213``, "order 88123"), flight numbers
  ("LH 454"), e-mail addresses, URLs and domain names: ``id:<folded>``;
* the **named entity it opens with**, the statement's subject ("Dana Whitfield works ...",
  "Northwind Traders pays ...", "Marco: I moved ..."): ``name:<entity key>``. A name elsewhere in
  the sentence is usually a value ("... is assigned to Maya Lindqvist") and is left out;
* its explicit ``about`` key: ``about:<kind>/<key>``.

Two facts whose keys are disjoint are about different things, whatever their cosine. The keys are
found by rules (no model), in microseconds.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from .model import DATE, SPEAKER, entity_key, fold
from .rules import extract_mentions
from .vocabulary import SUBJECT_VERBS

__all__ = ["MAX_SUBJECT_KEYS", "SECONDARY", "about_subject", "changes_the_subject", "identifier_spans", "primary",
           "shares_subject", "sharing_keys", "subject_keys", "subject_spans"]

#: At most this many keys a fact (the first found): a text naming more is a list, not a record.
MAX_SUBJECT_KEYS = 8
#: Longest key kept.
MAX_KEY_CHARS = 200

_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_URL = re.compile(r"\bhttps?://[^\s<>\"')\]]+", re.IGNORECASE)
_DOMAIN = re.compile(r"(?<![@\w.-])(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+"
                     r"(?:com|org|net|io|dev|app|ai|co|eu|de|uk|fr|es|it|nl|ch|at|se|no|dk|fi|pl|cz|us|ca|au"
                     r"|jp|in|br|info|biz|cloud|tech|shop|store|xyz)\b(?![\w-])", re.IGNORECASE)
#: letters and digits joined by hyphens or underscores: ACME-19, db-prod-3, SKU-B417, api-gw-eu-2
_JOINED_CODE = re.compile(r"(?<![\w@#/.-])[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)+(?![\w@-]|\.\w)")
#: capitals then digits in one word: AF1180, BA2490, ISO9001; capitals and digits in a long one
#: (a tracking number: 1Z999AA10123456784)
_SOLID_CODE = re.compile(r"(?<![\w@#/.-])(?:[A-Z]{2,}\d{2,}[A-Z0-9]*|(?=[A-Z0-9]*[A-Z])\d[A-Z0-9]{7,})(?![\w@-])")
#: a name in backticks: a feature flag, a setting, a table (`new-checkout-flow`)
_QUOTED_NAME = re.compile(r"`([^`\s]{2,80})`")
#: an airline's two letters, a space and a flight number: LH 454, KL 1023
_FLIGHT = re.compile(r"\b([A-Z]{2}|[A-Z]\d|\d[A-Z]) (\d{2,4})\b(?![.,]\d)")
#: a record's number after a hash sign, or after a word that names a record ("order 88123")
_HASH_NUMBER = re.compile(r"(?<![\w&])#(\d{2,})\b")
_RECORD_NUMBER = re.compile(
    r"\b(?:order|invoice|ticket|case|account|policy|booking|reservation|shipment|claim|issue|build|job|sample"
    r"|lot|batch|room|unit|contract|quote|request|incident|po|pr|no\.?|number|ref|reference|id|employee"
    r"|customer|patient|student|member|badge|suite|apartment|flat)\s+(?:no\.?\s*|number\s+|#\s*)?(\d{3,})\b",
    re.IGNORECASE)
_DATE_LIKE = re.compile(r"^\d+(?:[-_]\d+)*$|^\d{1,4}[-_](?:\d{1,2}[-_])?\d{1,4}$")
_WORD_TOKEN = re.compile(r"[\w'’@./:-]*\w")
_SENTENCE_END = re.compile(r"[.!?](?:\s|$)|\n")
#: Copulas and auxiliaries: where a statement's verb starts.
_VERBS = frozenset("""is are was were be been has have had will would can could should may might must does do did
    isn't aren't wasn't weren't hasn't haven't doesn't don't didn't won't can't""".split())
#: Adverbs that stand before a verb ("ACME-19 now renews ...").
_VERB_ADVERBS = frozenset("now currently still always usually recently also already just never no longer".split())
#: Words that follow a verb rather than a noun: "Northwind pays its ...", "Marco lives in ...".
_AFTER_VERB = frozenset("""its their his her our my your the a an in on at to for from with by of into over this that
    these those every each all no some""".split())
#: Nouns in -s that are no verb after a name ("Good news: ...").
_NOT_VERBS = frozenset("news series species means whereabouts headquarters".split())
#: Words opening a statement whose subject is its writer: the identifier after the verb is then
#: what it is about ("We restocked BIN-C-12 ...").
_WRITERS = frozenset("i we i've we've i'm we're i'll we'll i’ve we’ve i’m we’re".split())
#: Two capitals before a number that are no airline.
_NOT_AIRLINES = frozenset({"am", "pm", "no", "id", "tv", "ok", "vs", "nr"})
#: The mark of a key after the verb: a value of this fact, the subject of others.
SECONDARY = "~"


def subject_keys(text: str, *, about: tuple[str, str] | None = None) -> list[str]:
    """The subject keys of ``text`` (and of its ``about`` key, given as ``(kind, key)``), each
    once, at most MAX_SUBJECT_KEYS: first the keys of what the fact is about (its about key, the
    first identifier before its verb, or else the first name before it), then, marked with SECONDARY,
    the other identifiers and names ("... runs on host db-prod-3", "Flight AF1180 from Paris"):
    values of this fact, that may be the subject of others."""
    keys: list[str] = []
    if about is not None:
        keys.append(about_subject(*about))
    subject, others = _parts(text)
    keys.extend(key for key, _ in subject)
    keys.extend(SECONDARY + key for key in others)
    return _unique(keys)[:MAX_SUBJECT_KEYS]


def identifier_spans(text: str) -> list[tuple[int, int]]:
    """Where ``text`` names identifiers (the subject's and the others)."""
    return _identifiers(text)[1]


def subject_spans(text: str) -> list[tuple[int, int]]:
    """Where the fact's subject is named in ``text`` (subject_keys without SECONDARY)."""
    return [span for _, span in _parts(text)[0]]


def _parts(text: str) -> tuple[list[tuple[str, tuple[int, int]]], list[str]]:
    """The subject's keys with their spans, and the other identifiers' and names' keys."""
    verb = _verb_position(text)
    identifiers, spans = _identifiers(text)
    names = _names_before(text, verb, spans)
    before = [(key, span) for (start, key), span in zip(identifiers, spans, strict=True) if start < verb]
    after = [key for start, key in identifiers if start >= verb]
    if before:
        # a record's code names it: the names and the other codes beside it are its details
        return before[:1], [key for key, _ in before[1:]] + [key for key, _ in names] + after
    if not names and after and fold(text.split(maxsplit=1)[0]) in _WRITERS:
        # "We moved db-prod-3 to rack 4": the writer acts on the subject
        first = next(span for (start, _), span in zip(identifiers, spans, strict=True) if start >= verb)
        return [(after[0], first)], [key for key, _ in names] + after[1:]
    # the first name is the subject ("Ingrid Bakke's appointment with Dr. Olsen ...")
    return names[:1], [key for key, _ in names[1:]] + after


def changes_the_subject(old: str, shared_words: str) -> bool:
    """Whether a change of one span of ``old``, after ``shared_words`` (mentions.changed_value's
    attribute), lies before its verb: "Our payment terms with Lucerne Publishing are net 30" ->
    "... with Wayne Logistics are net 30" names another subject, it gives no new value. False
    when no verb is found (nothing to tell by)."""
    verb = _verb_position(old)
    if verb >= len(old):
        return False
    return len(shared_words.split()) < len(_WORD_TOKEN.findall(old, 0, verb))


def primary(keys: Iterable[str]) -> set[str]:
    """The keys of what a fact is about (without the SECONDARY ones)."""
    return {key for key in keys if not key.startswith(SECONDARY)}


def sharing_keys(keys: Sequence[str]) -> list[str]:
    """The stored keys a memory about the same subject holds one of (None shared: another
    subject): the fact's own primary and secondary keys, and its primary ones as a secondary key
    of the other ("Priya now handles ticket OPS-512" shares OPS-512 with "Ticket OPS-512 is
    assigned to Dana"); two facts whose only shared key is a value of both (an aircraft type of
    two flights) share nothing."""
    own = [key.removeprefix(SECONDARY) for key in keys]
    return _unique([*own, *(SECONDARY + key for key in primary(keys))])


def shares_subject(keys: Sequence[str], other: Sequence[str]) -> bool:
    """Whether two facts' keys (subject_keys) name a subject of one in the other."""
    return not set(sharing_keys(keys)).isdisjoint(other)


def about_subject(kind: str, key: str) -> str:
    """The subject key of an ``about`` key."""
    return f"about:{fold(kind)}/{fold(key)}"[:MAX_KEY_CHARS]


def _url_key(match: re.Match[str]) -> str:
    url = match.group().rstrip(".,;:!?").lower()
    return re.sub(r"^https?://(?:www\.)?", "", url).rstrip("/")


def _flight_key(match: re.Match[str]) -> str | None:
    airline = fold(match.group(1))
    if airline in _NOT_AIRLINES or re.fullmatch(r"[qh]\d", airline):
        return None  # "PM 230", a quarter or a half year ("Q3 2026")
    return airline + match.group(2)


def _code_key(match: re.Match[str]) -> str | None:
    return fold(match.group()) if _is_code(match.group()) else None


#: Each kind of identifier: its pattern, the group naming it and its key (None: not one), in the
#: order they claim their spans (a URL before the domain inside it, an e-mail before its domain).
_IDENTIFIERS: list[tuple[re.Pattern[str], int, Callable[[re.Match[str]], str | None]]] = [
    (_URL, 0, _url_key),
    (_EMAIL, 0, lambda m: m.group().lower()),
    (_DOMAIN, 0, lambda m: m.group().lower().removeprefix("www.")),
    (_QUOTED_NAME, 0, lambda m: fold(m.group(1))),
    (_HASH_NUMBER, 0, lambda m: "#" + m.group(1)),
    (_RECORD_NUMBER, 1, lambda m: "#" + m.group(1)),
    (_FLIGHT, 0, _flight_key),
    (_JOINED_CODE, 0, _code_key),
    (_SOLID_CODE, 0, _code_key),
]


def _identifiers(text: str) -> tuple[list[tuple[int, str]], list[tuple[int, int]]]:
    """The identifier keys with where they start, in order of appearance, and their spans."""
    found: list[tuple[int, str, tuple[int, int]]] = []
    for pattern, group, key_of in _IDENTIFIERS:
        for match in pattern.finditer(text):
            start, end = match.start(group), match.end(group)
            if group == 0 and key_of is _url_key:
                end = start + len(match.group().rstrip(".,;:!?"))
            if any(start < b and a < end for _, _, (a, b) in found):
                continue
            key = key_of(match)
            if key:
                found.append((start, "id:" + key[:MAX_KEY_CHARS - 3], (start, end)))
    found.sort(key=lambda item: item[0])
    return [(start, key) for start, key, _ in found], [span for _, _, span in found]


def _is_code(code: str) -> bool:
    """A code names one record: it holds a digit and a letter, and is no date, time or range."""
    if not any(c.isdigit() for c in code) or not any(c.isalpha() for c in code) or _DATE_LIKE.match(code):
        return False
    # "3-day", "24-hour", "2-factor": a number with a unit is a value
    return not re.fullmatch(r"\d+[-_][a-z]+", code)


def _verb_position(text: str) -> int:
    """Where the first sentence's verb starts (the text's length when none is found): a copula or
    an auxiliary, a verb of SUBJECT_VERBS, an -ed form, an adverb that stands before a verb, or an
    -s form right after a name or an identifier ("ACME-5 renews", "Northwind Traders pays")."""
    end = _SENTENCE_END.search(text)
    limit = end.start() if end else len(text)
    tokens = list(_WORD_TOKEN.finditer(text, 0, limit))
    previous = ""
    for index, match in enumerate(tokens):
        word = match.group()
        folded = fold(word)
        if index == 1 and fold(previous) in _WRITERS:
            return match.start()  # "We meet ...", "I moved ..."
        if folded == "now" and fold(previous) == "from":
            previous = word
            continue  # "From now on, ..."
        if match.start() > 0 and (folded in _VERBS or folded in SUBJECT_VERBS or folded in _VERB_ADVERBS
                                  or (len(folded) > 4 and folded.endswith("ed") and word.islower())):
            return match.start()
        if _s_form_verb(word, previous, tokens[index + 1].group() if index + 1 < len(tokens) else "", index):
            return match.start()
        previous = word
    return len(text)


def _s_form_verb(word: str, previous: str, following: str, index: int) -> bool:
    """An -s form that is a verb: after a code or a name ("ACME-5 renews", "Northwind Traders
    pays"); after a capitalised first word alone only before a function word ("Northwind pays its
    invoices"), since there it is a plural noun as often ("Customer accounts renew")."""
    folded = fold(word)
    if not (word.islower() and len(folded) > 3 and folded.endswith("s") and not folded.endswith(("ss", "us", "is"))
            and folded not in _NOT_VERBS):
        return False
    if any(c.isdigit() for c in previous):
        return True
    if not previous[:1].isupper():
        return False
    return index > 1 or fold(following) in _AFTER_VERB


def _names_before(text: str, verb: int, identifiers: list[tuple[int, int]]) -> list[tuple[str, tuple[int, int]]]:
    """The named entities before the verb, with their spans, that are no part of an identifier
    ("Flight LH 454"), nor a capitalised first word before a noun ("Customer account ...")."""
    found = []
    for mention in extract_mentions(text):
        if mention.kind == DATE or mention.start < 0 or mention.start >= verb or any(c.isdigit() for c in mention.name):
            continue  # a date, a name after the verb, "Q3"
        if any(mention.start < b and a < mention.end + 1 for a, b in identifiers):
            continue
        if mention.start == 0 and mention.role != SPEAKER and len(mention.name.split()) == 1 \
                and text[mention.end:verb].strip() and not text[mention.end:mention.end + 2].startswith(("'", "’")):
            continue  # the verb does not follow the first word: a common noun opening the sentence
        key = entity_key(mention.name, mention.kind)
        if key:
            found.append((f"name:{key}", (mention.start, mention.end)))
    return found


def _unique(keys: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    return [k for k in keys if not (k in seen or seen.add(k))]  # type: ignore[func-returns-value]

