"""The rule extractor: names, organisations, places, products and dates in English text, by
capitalisation, cue words and date patterns. Standard library only, deterministic, linear in the
text (every pattern anchored at word starts, no nested quantifiers): tens of microseconds a
sentence, so it can run anywhere, even in a search's request (the graph channel reads the
query's names with it).

What it does, in order:

1. a ``Name:`` prefix (a chat turn written ``speaker: text``) is the speaker, a person;
2. dates (ISO, "7 May 2023", "May 7, 2023", "May 2023", weekdays, "in May", "in 2022") are
   named by their canonical form (2023-05-07, 2023-05, may, 2022, thursday);
3. runs of capitalised words (joined by "of", "de", "van", "&"...) are names, less the ordinary
   words a sentence starts with (``vocabulary.SENTENCE_STARTERS``) and words the same text also
   writes in lower case; text set in title case (a headline) keeps only names it knows;
4. each name gets a kind from its last word (Inc, University -> organization; Street, Lake ->
   place), the gazetteer (countries, states, large cities), its shape (digits, inner capitals,
   a version after it -> product; an acronym -> organization) and the word before it (an
   honorific -> person; "in", "visited" -> place); otherwise a person.

Measured against a spaCy pipeline on a labelled sample of the shared data:
docs/benchmarks.md, "Entity extraction".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .model import DATE, MAX_NAME_CHARS, ORGANIZATION, PERSON, PLACE, PRODUCT, SPEAKER, SUBJECT, Mention
from .vocabulary import (
    ACRONYM_STOPWORDS,
    COMMON_SUFFIXES_ANYWHERE,
    COMMON_SUFFIXES_INITIAL,
    HONORIFICS,
    MONTHS,
    NAME_CONNECTORS,
    NATIONALITIES,
    ORGANIZATION_SUFFIXES,
    PERSON_CUES,
    PLACE_CUES,
    PLACE_SUFFIXES,
    PLACES,
    PLURAL_VERBS,
    SENTENCE_STARTERS,
    SUBJECT_VERBS,
)

__all__ = ["canonical_date", "extract_mentions"]

#: Texts longer than this are read up to it (a chunk is at most a few thousand characters).
MAX_TEXT_CHARS = 20_000

_SPEAKER = re.compile(r"^\s*([A-Z][\w'’.-]*(?:[ ][A-Z][\w'’.-]*){0,3})[ ]?:[ \t]")
_TOKEN = re.compile(r"\w+(?:['’.&-]\w+)*|&")
_VERSION = re.compile(r"v?\d+(?:\.\d+)*[a-z]?")
_POSSESSIVE = re.compile(r"['’]s$|s['’]$|['’]$")
_LAST_WORD = re.compile(r"\w+$")

_MONTH_NAMES = "|".join(sorted((m.capitalize() for m in MONTHS), key=len, reverse=True))
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:1[6-9]|20)\d{2})"
_DATE_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b"), "ymd"),
    (re.compile(rf"\b{_DAY}[ ](?:of[ ])?({_MONTH_NAMES})\.?,?[ ]{_YEAR}\b"), "dmy"),
    (re.compile(rf"\b({_MONTH_NAMES})\.?[ ]{_DAY},?[ ]{_YEAR}\b"), "mdy"),
    (re.compile(rf"\b({_MONTH_NAMES})\.?,?[ ]{_YEAR}\b"), "my"),
    (re.compile(rf"\b{_DAY}[ ](?:of[ ])?({_MONTH_NAMES})\b"), "dm"),
    (re.compile(rf"\b({_MONTH_NAMES})\.?[ ]{_DAY}\b(?![.:]\d)"), "md"),
    (re.compile(r"\b(Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)s?\b", re.IGNORECASE), "weekday"),
    (re.compile(r"\b(?:in|during|since|until|till|by|of|early|late|mid|last|next|this|every)[ -]"
                r"(January|February|March|April|May|June|July|August|September|October|November|December)\b"),
     "month"),
    (re.compile(rf"\b(?:in|since|until|till|by|during|of|from|before|after|around|circa)[ ]{_YEAR}s?\b"), "year"),
)


@dataclass
class _Token:
    text: str
    start: int
    end: int
    sentence_start: bool
    masked: bool = False

    @property
    def bare(self) -> str:
        """Without a trailing possessive."""
        return _POSSESSIVE.sub("", self.text)

    @property
    def lower(self) -> str:
        return self.bare.lower()

    @property
    def possessive(self) -> bool:
        return _POSSESSIVE.search(self.text) is not None and self.bare != self.text


def _date_key(kind: str, groups: tuple[str, ...]) -> str | None:
    def month(name: str) -> int:
        return MONTHS[name.lower().rstrip(".")]

    try:
        if kind == "ymd":
            year, mon, day = int(groups[0]), int(groups[1]), int(groups[2])
        elif kind == "dmy":
            day, mon, year = int(groups[0]), month(groups[1]), int(groups[2])
        elif kind == "mdy":
            mon, day, year = month(groups[0]), int(groups[1]), int(groups[2])
        elif kind == "my":
            return f"{int(groups[1]):04d}-{month(groups[0]):02d}"
        elif kind == "dm":
            day, mon = int(groups[0]), month(groups[1])
            return f"--{mon:02d}-{day:02d}" if 1 <= day <= 31 else None
        elif kind == "md":
            mon, day = month(groups[0]), int(groups[1])
            return f"--{mon:02d}-{day:02d}" if 1 <= day <= 31 else None
        elif kind in ("weekday", "month"):
            return groups[0].lower()
        else:  # year
            return groups[0]
    except (KeyError, ValueError):
        return None
    if not (1 <= mon <= 12 and 1 <= day <= 31):
        return None
    return f"{year:04d}-{mon:02d}-{day:02d}"


def _dates(text: str) -> list[Mention]:
    """Dates by canonical key, the first pattern to claim a span winning (most specific first)."""
    found: list[Mention] = []
    taken: list[tuple[int, int]] = []
    for pattern, kind in _DATE_PATTERNS:
        for match in pattern.finditer(text):
            groups = tuple(g for g in match.groups() if g is not None)
            start, end = match.span(len(match.groups())) if kind in ("month", "year") else match.span()
            if kind in ("month", "year"):
                start = match.start(1)
            if any(start < e and s < end for s, e in taken):
                continue
            key = _date_key(kind, groups)
            if key is None:
                continue
            taken.append((start, end))
            found.append(Mention(name=key, kind=DATE, start=start, end=end))
    return found


def _sentence_start(text: str, start: int) -> bool:
    """Whether the token at ``start`` opens a sentence (or a quote, a bracket, a line)."""
    i = start - 1
    while i >= 0 and text[i] in " \t'\"“‘([*-–—#>|•":
        if text[i] in "\"“‘([":
            return True
        i -= 1
    heading = _LAST_WORD.search(text, 0, i + 1) if i >= 0 else None
    if heading is not None and len(heading.group()) >= 7 and heading.group().isupper() and heading.group().isalpha():
        return True  # after a heading word: "BACKGROUND Increased plasma ..."
    if i >= 0 and text[i] == ".":
        # "Dr. Costa", "J. Smith": an abbreviation's dot, not a sentence's end
        word = _LAST_WORD.search(text, 0, i)
        if word is not None and (word.group().lower() in HONORIFICS or (len(word.group()) == 1
                                                                        and word.group().isupper())):
            return False
    return i < 0 or text[i] in ".!?:;\n…"


def _tokens(text: str, masked: list[tuple[int, int]]) -> list[_Token]:
    tokens = []
    for match in _TOKEN.finditer(text):
        start, end = match.span()
        token = _Token(match.group(), start, end, _sentence_start(text, start))
        token.masked = any(start < e and s < end for s, e in masked)
        tokens.append(token)
    return tokens


def _capitalised(word: str) -> bool:
    """A name's word: an initial capital ("Lisbon", "McDonald"), or an inner one ("iPhone", "eBay")."""
    if not word or not word[0].isalpha():
        return False
    return word[0].isupper() or (word[0].islower() and any(c.isupper() for c in word[1:]))


def _title_case(tokens: list[_Token]) -> bool:
    """Text set in title case (a headline): its longer words capitalised, all of them in a short
    text, all but one in a longer one, and that one not a verb of a name ("Marco works at Acme
    Corporation", "Marco reports to Dana Whitfield" are sentences)."""
    words = [t for t in tokens if len(t.text) > 3 and t.text.isalpha()]
    lower = [t for t in words if not t.text[0].isupper()]
    return (len(words) >= 4 and len(lower) <= len(words) // 8
            and not any(t.text in SUBJECT_VERBS for t in lower))


def _is_name_word(token: _Token, lowered_words: set[str], following: _Token | None = None) -> bool:
    word = token.bare
    if token.masked or not _capitalised(word):
        return False
    lower = word.lower()
    if word.isupper() and word.isalpha() and (len(word) < 2 or len(word) > 6 or lower in ACRONYM_STOPWORDS):
        return False  # "I", "OK", a shouted or heading word ("BACKGROUND"), a technical acronym
    if token.sentence_start and (lower in SENTENCE_STARTERS or token.text.lower() in SENTENCE_STARTERS):
        return False
    if token.sentence_start and "-" in word and not word.split("-")[-1][:1].isupper():
        return False  # "Check-in", "Self-care"
    if (token.sentence_start and lower.endswith("s") and following is not None
            and following.lower in PLURAL_VERBS):
        return False  # "Invoices are sent monthly": a plural noun, not a name
    if lower not in PLACES and not word.isupper():
        if lower.endswith(COMMON_SUFFIXES_ANYWHERE):
            return False
        if token.sentence_start and lower.endswith(COMMON_SUFFIXES_INITIAL) and not (
                following is not None and following.text in SUBJECT_VERBS):
            return False
    # a word the same text also writes in lower case (or its singular) is an ordinary word capitalised
    forms = {lower, lower[:-1] if lower.endswith("s") else lower, lower[:-2] if lower.endswith("es") else lower}
    return not (word[0].isupper() and not word.isupper() and forms & lowered_words and lower not in PLACES)


def _name_suffix(token: _Token) -> bool:
    """A capitalised last word of an organisation's or a place's name, inside a run: the
    "Corporation" of "Acme Corporation", the "Station" of "Union Station" (alone, such a word
    reads as an ordinary one)."""
    return (not token.masked and token.bare[:1].isupper()
            and (token.lower in ORGANIZATION_SUFFIXES or token.lower in PLACE_SUFFIXES))


def _defines(text: str, start: int, end: int) -> bool:
    """Whether the word at ``start:end`` stands in brackets after a lower-case word."""
    if text[start - 1:start] != "(" or text[end:end + 1] not in (")", "s"):
        return False
    before = _LAST_WORD.search(text, 0, max(0, start - 2))
    return before is not None and before.group()[:1].islower()


def _headline_names(tokens: list[_Token], lowered_words: set[str]) -> list[Mention]:
    """Text set in title case capitalises every word: only known places and acronyms are names."""
    found = []
    for token in tokens:
        word = token.bare
        if not token.masked and (word.lower() in PLACES or (word.isupper() and _is_name_word(token, lowered_words))):
            kind = PLACE if word.lower() in PLACES else ORGANIZATION
            found.append(Mention(name=word, kind=kind, start=token.start, end=token.start + len(word)))
    return found


def _kind(words: list[str], before: str, before2: str, after: str) -> str:
    """The kind of the name made of ``words`` from its last word, the gazetteer, its shape and
    the words around it (lower case)."""
    last = words[-1].lower()
    joined = " ".join(w.lower() for w in words)
    first = words[0].lower()
    if len(words) > 1 and (last in ORGANIZATION_SUFFIXES or (first in ORGANIZATION_SUFFIXES and words[1] == "of")):
        return ORGANIZATION
    if last in PLACE_SUFFIXES and len(words) > 1:
        return PLACE
    if joined in PLACES or (len(words) == 1 and last in PLACES):
        return PLACE
    if before in HONORIFICS:
        return PERSON
    if any(any(c.isdigit() for c in w) for w in words) or _VERSION.fullmatch(after or "-"):
        return PRODUCT
    if any(w[0].islower() or any(c.isupper() for c in w[1:]) for w in words
           if not w.isupper() and w.lower() not in NAME_CONNECTORS):
        return PRODUCT  # inner capitals: iPhone, PostgreSQL, GitHub
    if len(words) == 1 and words[0].isupper():
        return ORGANIZATION
    if before in PERSON_CUES:
        return PERSON
    if before in PLACE_CUES and (before not in ("to", "into") or before2 in (
            "moved", "move", "went", "go", "going", "trip", "flew", "fly", "travelled", "traveled", "drove",
            "relocated", "back", "road", "way")):
        # "at Google", "from Acme": places and organisations alike; an unknown one is more often the latter
        return PLACE if before not in ("at", "from") else ORGANIZATION
    return PERSON


def _names(text: str, tokens: list[_Token]) -> list[Mention]:
    lowered_words = {t.text.lower() for t in tokens if t.text.isalpha() and t.text.islower()}
    if _title_case(tokens):
        return _headline_names(tokens, lowered_words)
    index = {id(token): n for n, token in enumerate(tokens)}
    found: list[Mention] = []
    i = 0
    while i < len(tokens):
        if not _is_name_word(tokens[i], lowered_words, tokens[i + 1] if i + 1 < len(tokens) else None):
            i += 1
            continue
        run = [tokens[i]]
        j = i + 1
        while j < len(tokens) and not run[-1].possessive:
            gap = text[run[-1].end:tokens[j].start]
            if gap not in (" ", "") and not (gap == ". " and run[-1].lower in HONORIFICS):
                break
            nxt = tokens[j]
            if (_is_name_word(nxt, lowered_words) or _name_suffix(nxt)) and not nxt.sentence_start:
                run.append(nxt)
                j += 1
                continue
            # a connector inside a name: "Bank of America", "Johnson & Johnson"
            if (nxt.lower in NAME_CONNECTORS and j + 1 < len(tokens) and text[nxt.end:tokens[j + 1].start] == " "
                    and _is_name_word(tokens[j + 1], lowered_words) and not tokens[j + 1].sentence_start):
                run.extend([nxt, tokens[j + 1]])
                j += 2
                continue
            break
        i = j
        k = index[id(run[0])] - 1
        before = tokens[k].lower if k >= 0 else ""
        before2 = tokens[k - 1].lower if k >= 1 else ""
        while len(run) > 1 and run[0].lower in HONORIFICS:  # "Dr Ana Costa": the name is "Ana Costa"
            before, run = run[0].lower, run[1:]
        after = tokens[j].text if j < len(tokens) else ""
        words = [t.bare if t is run[-1] else t.text for t in run]
        kind = _kind(words, before, before2, after)
        start = run[0].start
        end = run[-1].end - (len(run[-1].text) - len(run[-1].bare))
        if len(run) == 1 and run[0].bare.isupper() and _defines(text, start, end):
            continue  # "peripheral arterial disease (PAD)": an abbreviation of ordinary words
        if len(run) == 1 and run[0].lower in NATIONALITIES:
            continue  # "speaks Portuguese": a language or a nationality, not an entity
        name = text[start:end]
        found.append(Mention(name=name[:MAX_NAME_CHARS], kind=kind, start=start, end=end))
    return found


def extract_mentions(text: str) -> list[Mention]:
    """The names and dates of ``text`` in order of appearance, each once per (key, kind) with
    the role of its first appearance (the speaker first; a name opening the statement is its
    subject)."""
    text = text[:MAX_TEXT_CHARS]
    mentions: list[Mention] = []
    offset = 0
    speaker = _SPEAKER.match(text)
    if speaker is not None:
        mentions.append(Mention(name=speaker.group(1), kind=PERSON, start=speaker.start(1), end=speaker.end(1),
                                role=SPEAKER))
        offset = speaker.end()
    dates = [Mention(m.name, m.kind, m.start + offset, m.end + offset) for m in _dates(text[offset:])]
    tokens = [t for t in _tokens(text, [(d.start, d.end) for d in dates]) if t.start >= offset]
    names = _names(text, tokens)
    body = sorted(dates + names, key=lambda m: m.start)
    if body:
        first = body[0]
        opener = next((t for t in tokens if not t.masked and t.start <= first.start), None)
        if first.kind != DATE and opener is not None and opener.start == first.start and opener.sentence_start:
            body[0] = Mention(first.name, first.kind, first.start, first.end, SUBJECT)
    seen: set[tuple[str, str]] = set()
    unique = []
    for mention in mentions + body:
        identity = (mention.key, mention.kind)
        if mention.key and identity not in seen:
            seen.add(identity)
            unique.append(mention)
    return unique



def canonical_date(surface: str) -> str | None:
    """The canonical key of a date written ``surface`` ("7 May 2023" -> 2023-05-07), None when it
    names no one date the graph keeps (a relative date such as "last week")."""
    found = _dates(surface) or _dates(f"in {surface}")
    return found[0].name if len(found) == 1 else None
