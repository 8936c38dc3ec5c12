r"""The compiled patterns of the extraction passes.

Speed matters (a 32 KB text must take milliseconds), and CPython's regex engine only
skips ahead quickly when a pattern starts with a literal or a character class. So no
pattern starts with a look-behind: the token-start guard comes right after the first
character ("[0-9](?<![\w.][0-9])"), word lists are prefix trees with the guard after
their first letter, and patterns led by words run without IGNORECASE on a lower-cased
shadow of the text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .lexicon import (
    _ALL_UNITS,
    _CURRENCY_CODES,
    _CURRENCY_SYMBOLS,
    _CURRENCY_WORDS,
    _MONTH_ABBREVIATIONS,
    _MONTHS,
    _NUMERAL_WORDS,
    _RATE_ADVERBS,
    _TIME_UNITS,
    _WEEKDAYS,
)
from .model import _MASK


def _alternation(words: Iterable[str], *, guard: str | None = None) -> str:
    """A regex matching any of ``words`` literally, longest match first.

    Built as a prefix tree ("t(?:en|h(?:ird|irty))") rather than a flat list of
    alternatives, so the engine tests one branch per character instead of one
    per word. ``guard`` is a character class that may not precede the match; it
    is checked right after the first character so that the pattern still starts
    with a literal.
    """
    tree: dict[str, dict] = {}
    for word in set(words):
        node = tree
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def build(node: dict[str, dict], top: bool) -> str:
        branches = []
        for char, child in sorted(node.items()):
            if not char:
                continue
            head = re.escape(char)
            if top and guard:
                head += f"(?<!{guard}{re.escape(char)})"
            branches.append(head + build(child, False))
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        # A word that ends here is tried after its longer continuations.
        return f"(?:{body})?" if "" in node else body

    return build(tree, True)


def _first_digit(guard: str) -> str:
    """A digit that is not preceded by a character of ``guard`` (a class body)."""
    return rf"[0-9](?<![{guard}][0-9])"


_NUM = r"(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.[0-9]+)?"


# A number at a token start: not glued to a word, a decimal point, a thousands
# group or an identifier hyphen ("db-2"); the rest of _NUM follows.
def _num_led(extra_guard: str = "") -> str:
    return (
        _first_digit(r"\w.@" + _MASK + extra_guard) + r"(?<![0-9],[0-9])(?<![^\W\d]-[0-9])"
        r"(?:[0-9]{0,2}(?:,[0-9]{3})+|[0-9]*)(?:\.[0-9]+)?"
    )


_NUM_LED = _num_led()


_WORD_GUARD = r"[\w" + _MASK + r"-]"


_URL_RE = re.compile(
    r"(?<![\w@])(?:https?://|www\.)[^\s<>\"'" + _MASK + r"]+"
    r"|(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+",
    re.IGNORECASE,
)


# "every second Monday" and "every 2nd week" say "every other" (lower-cased text).
_ALTERNATE_RE = re.compile(
    r"(?P<kw>e(?<!" + _WORD_GUARD + r"e)(?:very|ach))[ ]+(?:other|second|2nd)[ ]+(?=[^\W\d])"
)


_NUMERAL_RUN_RE = re.compile(  # lower-cased text
    r"(?:" + _alternation(_NUMERAL_WORDS, guard=_WORD_GUARD) + r")\b"
    r"(?:(?:[ ]+and[ ]+|[ ]+|-)(?:" + _alternation(_NUMERAL_WORDS) + r")\b)*"
)


_DIGIT_SCALE_RE = re.compile(
    r"(?P<n>" + _first_digit(r"\w.,") + r"(?:[0-9]{0,2}(?:,[0-9]{3})+|[0-9]*)(?:\.[0-9]+)?)"
    r"[ ](?P<scale>hundred|thousand|million|billion|trillion)\b",
    re.IGNORECASE,
)


_ISO_DATE_RE = re.compile(
    _first_digit(r"\w.\-/") + r"[0-9]{3}(?:"
    r"(?P<sep>[-/])(?P<mo>[0-9]{1,2})(?P=sep)(?P<d>[0-9]{1,2})"
    r"(?:T(?P<h>[0-9]{1,2}):(?P<mi>[0-9]{2})(?::(?P<s>[0-9]{2}))?(?:\.[0-9]+)?(?:Z|[+-][0-9]{2}:?[0-9]{2})?)?"
    r"(?![\w]|[-/][0-9])"
    r"|-(?P<ym>[0-9]{2})(?![\w]|[-/.][0-9]))"
)


_NUMERIC_DATE_RE = re.compile(
    r"(?P<a>" + _first_digit(r"\w.\-/") + r"[0-9]?)(?P<sep>[/.])(?P<b>[0-9]{1,2})(?P=sep)(?P<y>[0-9]{4}|[0-9]{2})"
    r"(?![\w]|[/.][0-9])"
)


_IP_RE = re.compile(
    _first_digit(r"\w.") + r"[0-9]{0,2}(?:\.[0-9]{1,3}){3}(?::[0-9]+)?(?![\w]|\.[0-9])"
)


_PRERELEASE = r"(?:-(?P<pre>[0-9A-Za-z]+(?:\.[0-9A-Za-z]+)*))?(?![\w]|\.[0-9])"


_VERSION_V_RE = re.compile(
    r"[vV](?<![\w.\-/@" + _MASK + r"][vV])(?P<n>[0-9]+(?:\.[0-9]+)*)" + _PRERELEASE
)


_VERSION_DOTTED_RE = re.compile(
    r"(?P<n>" + _first_digit(r"\w.\-/@" + _MASK) + r"[0-9]*\.[0-9]+\.[0-9]+(?:\.[0-9]+)*)" + _PRERELEASE
)


_VERSION_WORD_RE = re.compile(  # lower-cased text
    r"(?:v(?<!\wv)er(?:sion|\.)?|r(?<!\wr)e(?:lease|v\.?))[ ]+(?P<n>[0-9]+(?:\.[0-9]+)*)(?![\w]|\.[0-9])"
)


_MONTH_WORDS = [*_MONTHS, *_MONTH_ABBREVIATIONS, *(f"{a}." for a in _MONTH_ABBREVIATIONS)]


_ORDINAL_SUFFIX = r"(?:st|nd|rd|th)?"


_TEXT_DATE_DAY_FIRST_RE = re.compile(  # "3 March 2024", "3rd of March"
    r"(?P<d>" + _first_digit(r"\w.,/" + _MASK) + r"[0-9]?)" + _ORDINAL_SUFFIX + r"[ ]+(?:of[ ]+)?"
    r"(?P<m>" + _alternation(_MONTH_WORDS) + r")(?:,?[ ]+(?P<y>[0-9]{4}))?(?![\w]|[.,:][0-9])",
    re.IGNORECASE,
)


_TEXT_DATE_MONTH_FIRST_RE = re.compile(  # lower-cased text: "march 3, 2024", "march 2024", "march"
    r"(?P<m>" + _alternation(_MONTH_WORDS, guard=_WORD_GUARD) + r")"
    r"(?:[ ]+(?:the[ ]+)?(?P<d>[0-9]{1,2})" + _ORDINAL_SUFFIX
    + r"(?:[ ]?(?:-|to)[ ]?(?P<d2>[0-9]{1,2})" + _ORDINAL_SUFFIX + r")?(?:,?[ ]+(?P<y>[0-9]{4}))?"
    r"|(?:,?[ ]+|[ ]+of[ ]+)(?P<y2>[0-9]{4}))?"
    r"(?![\w]|[.,:][0-9])"
)


_TIME_RE = re.compile(
    r"(?P<h>" + _first_digit(r"\w.:/" + _MASK) + r"[0-9]?)(?:"
    r":(?P<m>[0-9]{2})(?::(?P<s>[0-9]{2}))?(?:[ ]?(?P<ap>[ap])\.?m\.?(?!\w))?(?![\w:]|\.[0-9])"
    r"|(?:\.(?P<m2>[0-9]{2}))?[ ]?(?P<ap2>[ap])\.?m\.?(?!\w)"
    r"|(?:[ ]?o'?clock)?(?:[ ]+in[ ]+the[ ]+(?P<part>morning|afternoon|evening)|[ ]+at[ ]+(?P<night>night))(?!\w)"
    r"|[ ]?o'?clock(?!\w)"
    r"|[ ]?(?P<word>noon|midday|midnight)(?!\w))",
    re.IGNORECASE,
)


_CLOCK_PHRASE_RE = re.compile(  # lower-cased text, after numerals: "half past 7", "quarter to 9"
    r"(?P<part>h(?<!" + _WORD_GUARD + r"h)alf|q(?<!" + _WORD_GUARD + r"q)uarter|a[ ]+quarter)[ ]+(?P<rel>past|to)[ ]+"
    r"(?P<h>[0-9]{1,2})(?![\w:]|\.[0-9])(?:[ ]?(?P<ap>[ap])\.?m\.?(?!\w))?"
)


_CALENDAR_WORDS: dict[str, tuple[str, str]] = {
    **{day: ("dates", day) for day in _WEEKDAYS},
    **{w: ("dates", w) for w in ("today", "tomorrow", "yesterday", "tonight", "weekend", "weekday")},
    **{s: ("season", s) for s in ("spring", "summer", "autumn", "winter")},
    **{w: ("relative", w) for w in ("next", "last", "this")},
    "noon": ("times", "12:00"), "midday": ("times", "12:00"), "midnight": ("times", "00:00"),
    **{p: ("times", p) for p in ("morning", "afternoon", "evening")},
    **{a: ("quantities", rate) for a, rate in _RATE_ADVERBS.items() if " " not in a},
}


_CALENDAR_RE = re.compile(  # lower-cased text
    r"(?P<w>" + _alternation(_CALENDAR_WORDS, guard=_WORD_GUARD) + r")s?"
    r"(?P<period>(?<=next|last|this)[ ]+(?:week|month|year|quarter|weekend|" + _alternation(_WEEKDAYS) + r"))?\b"
)


_SCALE_SUFFIX = r"(?:k|K|m|M|mm|MM|mn|bn|BN|b|B)(?!\w)"


_CURRENCY_PREFIXES = [*_CURRENCY_SYMBOLS, *_CURRENCY_CODES]


_CURRENCY_PREFIX_RE = re.compile(
    r"(?P<sym>" + _alternation(_CURRENCY_PREFIXES, guard=r"[\w" + _MASK + r"]") + r")"
    r"[ ]?(?P<n>" + _NUM + r")(?P<sc>" + _SCALE_SUFFIX + r")?"
    r"(?:[ ]?(?:-|to)[ ]?(?:" + _alternation(_CURRENCY_SYMBOLS) + r")?"
    r"(?P<n2>" + _NUM + r")(?P<sc2>" + _SCALE_SUFFIX + r")?)?"
    r"(?![\w]|[.,][0-9])"
)


_CURRENCY_SUFFIX_RE = re.compile(
    r"(?P<n>" + _NUM_LED + r")(?P<sc>" + _SCALE_SUFFIX + r")?[ ]?"
    r"(?:(?P<sym>" + _alternation(s for s in _CURRENCY_SYMBOLS if not s[0].isalpha()) + r")"
    r"|(?P<code>" + _alternation(_CURRENCY_CODES) + r")\b"
    r"|(?P<word>(?i:" + _alternation(_CURRENCY_WORDS) + r"))\b)"
)


_RATE_UNIT_WORDS = _alternation(
    [u for u in _TIME_UNITS if len(u) > 1 and u not in ("ms", "msec", "millisecond", "milliseconds")]
)


_RATE_EVERY_RE = re.compile(  # lower-cased text: "per month", "every 2 weeks", "each other day"
    r"(?P<kw>p(?<!" + _WORD_GUARD + r"p)er|e(?<!" + _WORD_GUARD + r"e)(?:very|ach))[ ]+(?:(?P<other>other)[ ]+)?"
    r"(?:(?P<n>" + _NUM + r")[ ]?)?(?P<unit>" + _RATE_UNIT_WORDS + r"|annum)(?!\w)"
)


_RATE_SLASH_RE = re.compile(  # "$5/month", "10/day"
    r"/(?:(?<=[0-9" + _MASK + r"]/)|(?<=[0-9" + _MASK + r"] /))[ ]?(?P<unit>(?i:" + _RATE_UNIT_WORDS + r"|[hds]))(?!\w)"
)


_RATE_ARTICLE_RE = re.compile(  # lower-cased text: "a week" (a rate after "$5", "twice", "40 hours")
    r"a(?<!" + _WORD_GUARD + r"a)n?[ ]+(?P<unit>" + _RATE_UNIT_WORDS + r")(?!\w)"
)


_RATE_CONTEXT_WORDS = {"once", "times"}


# "<count> <noun> a <unit>" is a rate, but not when "a <unit>" follows one of
# these ("2 weeks after a month", "in 2021 for a week").
_NOT_BEFORE_RATE = {
    "for", "in", "within", "after", "before", "about", "over", "under", "than", "only",
    "just", "whole", "entire", "of", "by", "around", "nearly", "almost",
    "and", "or", "but", "half", "ago", "is", "was", "takes", "took", "lasts", "lasted",
}


_QUANTITY_RE = re.compile(
    r"(?P<n>" + _NUM_LED + r")(?:[ ]?(?:-|to)[ ]?(?P<n2>" + _NUM + r"))?"
    r"(?P<sep>[ ]?-?)(?P<unit>(?i:" + _alternation(_ALL_UNITS) + r"))(?!\w)"
)


_DECADE_RE = re.compile(r"'(?<!\w')(?P<dec>[0-9]0)s(?!\w)")


_YEAR_RE = re.compile(
    r"(?P<y>" + _first_digit(r"\w.,/@$" + _MASK) + r"(?<![^\W\d]-[0-9])[0-9]{3})(?P<s>s)?(?![\w%]|[.,][0-9])"
)


_NUMBER_RE = re.compile(
    r"(?P<n>" + _num_led("/") + r")"
    r"(?:(?P<ord>(?i:st|nd|rd|th))|(?P<sc>k|K|M|mn|bn|BN)|/(?P<den>[0-9]+))?"
    r"(?![\w]|[.,/][0-9])"
)


_TOKEN_RE = re.compile(r"(\w+(?:'\w+)*(?:[-./]\w+(?:'\w+)*)*|" + _MASK + r")|([.!?;:\n])")


_NO_CUE_RE = re.compile(r"n(?<![\w'./-]n)o(?![\w'.-])")


_HAS_DIGIT = re.compile(r"[0-9]")


_SEPARATOR = re.compile(r"[-./]")


_TITLE_AFTER_RE = re.compile(r"[ ]+[A-Z]")


_HAS_LETTER = re.compile(r"[^\W\d_]")


_PREV_WORD_RE = re.compile(r"([\w'" + _MASK + r"]+)[ ]*$")


_WORDS_RE = re.compile(r"[A-Za-z]+")


_WORD_OR_MASK_RE = re.compile(r"[\w'" + _MASK + r"]+")

# Two things set against each other: "trains over planes", "tea rather than coffee", "from
# Vienna to Prague" (the article before the second is left out). Read on the lower-cased text.
_ORDER_RE = re.compile(
    r"\b(?:(from)[ ]+(?:the[ ]+)?(\w+)[ ]+to[ ]+(?:the[ ]+)?(\w+)"
    r"|(\w+)[ ]+(over|rather[ ]than|instead[ ]of|than|versus|vs\.?|before|after)[ ]+(?:the[ ]+|a[ ]+|an[ ]+)?(\w+))\b"
)
