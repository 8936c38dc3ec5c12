"""Changed-detail extraction for the memory write funnel.

Sentence embedders are poor at telling a restatement from an update: the default
model scores "The staging database runs PostgreSQL 15 on a host called db-stage-2."
against the same sentence with ``16`` at cosine 0.968, so a cosine-only dedup would
skip a real update. Before the funnel decides "skip", it compares the incoming text
with the matched memory's text on the details that make a fact true or false:
numbers, dates, times, quantities with units, currency amounts, versions, names and
identifiers, and negation polarity.

The module is pure Python (standard library only) and deterministic. Every pattern
is anchored at token starts and free of nested quantifiers, so extraction is linear
in the length of the text.

Precision matters as much as recall: a restatement that only reorders clauses or
rephrases must produce *no* change, otherwise it would wrongly supersede the
memory. Each detail is therefore normalised to a canonical form ("fifteen",
"15.0" -> "15"; "3pm" -> "15:00"; "14 days" -> "2 week"; "$1,200" -> "1200 USD"),
and a few cross-checks in :func:`compare_details` absorb differences that are only
a matter of wording (a name whose capitalisation changed, "a server" vs "one
server", "version 15" vs "15").
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Callable, Iterable

__all__ = [
    "DETAIL_KINDS",
    "DetailChange",
    "Details",
    "changed_details",
    "compare_details",
    "extract_details",
    "normalize_text",
]

#: The kinds of detail a :class:`DetailChange` can report, in reporting order.
DETAIL_KINDS: tuple[str, ...] = (
    "number",
    "date",
    "time",
    "quantity",
    "currency",
    "version",
    "negation",
    "name",
)

# Field of :class:`Details` holding each set-valued kind.
_KIND_FIELDS: dict[str, str] = {
    "number": "numbers",
    "date": "dates",
    "time": "times",
    "quantity": "quantities",
    "currency": "currencies",
    "version": "versions",
    "name": "names",
}

# Replaces every span already claimed by a detail so later passes cannot read it
# twice; it is neither a word character nor a sentence boundary.
_MASK = "\x1f"


# --------------------------------------------------------------------------- #
# Public API
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class Details:
    """The normalised details of one text.

    Each set holds canonical strings, so two texts that state the same fact in
    different words produce equal sets. ``negated`` is the polarity of the text:
    true when it contains any negation cue (not, never, no longer, n't, ...).
    ``words`` is the lower-cased vocabulary of the text; it is not a detail (and
    not compared), it lets :func:`compare_details` recognise a name that the
    other text merely wrote in lower case.
    """

    numbers: frozenset[str] = frozenset()
    dates: frozenset[str] = frozenset()
    times: frozenset[str] = frozenset()
    quantities: frozenset[str] = frozenset()
    currencies: frozenset[str] = frozenset()
    versions: frozenset[str] = frozenset()
    names: frozenset[str] = frozenset()
    negated: bool = False
    words: frozenset[str] = field(default=frozenset(), repr=False, compare=False)

    @property
    def is_empty(self) -> bool:
        """True when the text carries no detail at all (and no negation)."""
        return not self.negated and not any(
            getattr(self, name) for name in _KIND_FIELDS.values()
        )

    def as_dict(self) -> dict[str, Any]:
        """A JSON-serialisable view: sorted lists per kind plus ``negated``."""
        data: dict[str, Any] = {
            name: sorted(getattr(self, name)) for name in _KIND_FIELDS.values()
        }
        data["negated"] = self.negated
        return data


@dataclass(frozen=True)
class DetailChange:
    """One kind of detail that differs between two texts.

    ``old`` holds the values only the old text has, ``new`` the values only the
    new text has (sorted). For ``negation`` the values are ``("negated",)`` or
    ``("affirmative",)``.
    """

    kind: str
    old: tuple[str, ...]
    new: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict for recording on the ledger."""
        return {"kind": self.kind, "old": list(self.old), "new": list(self.new)}


def normalize_text(text: str) -> str:
    """Return ``text`` in the form every pattern in this module expects.

    NFKC (full-width digits and letters, ligatures, "℃"), ASCII quotes and
    apostrophes, ASCII hyphens for the many Unicode dashes, ASCII digits for any
    Unicode decimal digit, no zero-width characters, single spaces and single
    newlines.
    """
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text).translate(_CHAR_MAP)
        if not text.isascii():
            text = _NON_ASCII_DIGIT.sub(lambda m: str(unicodedata.decimal(m.group())), text)
    elif "\x1f" in text or "`" in text:
        text = text.translate(_CHAR_MAP)
    text = _HSPACE.sub(" ", text)
    if "\n" in text:
        text = _NEWLINES.sub("\n", text)
    return text.strip()


def extract_details(text: str) -> Details:
    """Extract the normalised details of ``text``.

    >>> sorted(extract_details("We have three servers running PostgreSQL 15.").numbers)
    ['15', '3']
    """
    return _Extractor(text).run()


def compare_details(old: Details, new: Details) -> list[DetailChange]:
    """Compare two extracted :class:`Details`; see :func:`changed_details`."""
    removed: dict[str, set[str]] = {}
    added: dict[str, set[str]] = {}
    for kind, name in _KIND_FIELDS.items():
        before, after = getattr(old, name), getattr(new, name)
        removed[kind] = set(before - after)
        added[kind] = set(after - before)

    _cancel_rephrased_values(removed, added)
    _cancel_implicit_one(removed["number"], new)
    _cancel_implicit_one(added["number"], old)
    _cancel_ambiguous_dates(removed["date"], added["date"])
    _cancel_names(removed["name"], added["name"], old=old, new=new)

    changes: list[DetailChange] = []
    for kind in DETAIL_KINDS:
        if kind == "negation":
            if old.negated != new.negated:
                changes.append(
                    DetailChange(
                        kind="negation",
                        old=(_polarity(old.negated),),
                        new=(_polarity(new.negated),),
                    )
                )
            continue
        if removed[kind] or added[kind]:
            changes.append(
                DetailChange(
                    kind=kind,
                    old=tuple(sorted(removed[kind])),
                    new=tuple(sorted(added[kind])),
                )
            )
    return changes


def changed_details(old_text: str, new_text: str) -> list[DetailChange]:
    """List the details on which ``new_text`` differs from ``old_text``.

    Empty when only the wording changed (reordered clauses, rephrasing, case,
    punctuation, whitespace, contractions that keep polarity). One
    :class:`DetailChange` per kind whose detail set differs (a detail added,
    removed or changed), plus one for a negation polarity flip.
    """
    return compare_details(extract_details(old_text), extract_details(new_text))


# --------------------------------------------------------------------------- #
# Normalisation tables
# --------------------------------------------------------------------------- #

_CHAR_MAP = {
    # apostrophes and single quotes
    0x2018: "'", 0x2019: "'", 0x201A: "'", 0x201B: "'", 0x2032: "'",
    0x00B4: "'", 0x02BC: "'", 0x0060: "'",
    # double quotes
    0x201C: '"', 0x201D: '"', 0x201E: '"', 0x201F: '"', 0x2033: '"',
    0x00AB: '"', 0x00BB: '"',
    # hyphens, minus, en dash (ranges) -> hyphen; em dash -> spaced hyphen
    0x2010: "-", 0x2011: "-", 0x2012: "-", 0x2013: "-", 0x2212: "-",
    0x2014: " - ", 0x2015: " - ",
    0x2044: "/",  # fraction slash ("½" becomes "1⁄2" under NFKC)
    # invisible characters
    0x200B: "", 0x200C: "", 0x200D: "", 0x2060: "", 0xFEFF: "", 0x00AD: "",
    0x1F: " ",  # our mask character must never come from the input
}
_NON_ASCII_DIGIT = re.compile(r"(?![0-9])\d")
# Runs of two or more blanks, or any blank that is not a plain space.
_HSPACE = re.compile(r"(?:[ ][^\S\n]|[^\S\n ])[^\S\n]*")
_NEWLINES = re.compile(r"[ ]*\n[\s]*")

# --------------------------------------------------------------------------- #
# Vocabularies
# --------------------------------------------------------------------------- #

_CARDINALS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
    "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30,
    "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80,
    "ninety": 90, "twice": 2, "thrice": 3,
}
_ORDINALS = {
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6,
    "seventh": 7, "eighth": 8, "ninth": 9, "tenth": 10, "eleventh": 11,
    "twelfth": 12, "thirteenth": 13, "fourteenth": 14, "fifteenth": 15,
    "sixteenth": 16, "seventeenth": 17, "eighteenth": 18, "nineteenth": 19,
    "twentieth": 20, "thirtieth": 30, "fortieth": 40, "fiftieth": 50,
    "sixtieth": 60, "seventieth": 70, "eightieth": 80, "ninetieth": 90,
    "hundredth": 100, "thousandth": 1000, "millionth": 10**6,
}
_SCALES = {
    "hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9,
    "trillion": 10**12, "dozen": 12,
}
_NUMERAL_WORDS = {**_CARDINALS, **_ORDINALS, **_SCALES}

# Determiners before which "one" is a pronoun, not a count ("the blue one").
_ONE_PRONOUN_BEFORE = {
    "the", "this", "that", "which", "each", "every", "any", "no", "some",
    "another", "either", "neither", "whichever", "a", "an", "only",
}
# Words before which "second" is the unit ("a second", "per second").
_SECOND_UNIT_BEFORE = {"a", "an", "one", "per", "every", "each", "split"}

_MONTHS = {
    "january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6,
    "july": 7, "august": 8, "september": 9, "october": 10, "november": 11,
    "december": 12,
}
_MONTH_ABBREVIATIONS = {
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8,
    "sep": 9, "sept": 9, "oct": 10, "nov": 11, "dec": 12,
}
# Words after which a bare "May" is the month rather than the modal verb.
_BEFORE_BARE_MAY = {
    "in", "of", "since", "until", "till", "by", "from", "through", "during", "early",
    "late", "mid", "end", "before", "after", "last", "next", "this", "every", "and",
    "or", "to", "for", "each", "between",
}
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")

# Time units: canonical name and length in seconds (None = not convertible).
_TIME_UNITS: dict[str, tuple[str, int | None]] = {}
for _names, _canon, _secs in (
    (("millisecond", "milliseconds", "ms", "msec"), "millisecond", None),
    (("second", "seconds", "sec", "secs", "s"), "second", 1),
    (("minute", "minutes", "min", "mins"), "minute", 60),
    (("hour", "hours", "hr", "hrs", "h"), "hour", 3600),
    (("day", "days", "d"), "day", 86400),
    (("night", "nights"), "night", None),
    (("week", "weeks", "wk", "wks", "w"), "week", 604800),
    (("fortnight", "fortnights"), "week", 2 * 604800),
    (("month", "months", "mo", "mos"), "month", None),
    (("quarter", "quarters"), "quarter", None),
    (("year", "years", "yr", "yrs"), "year", None),
    (("decade", "decades"), "decade", None),
    (("business day", "business days", "working day", "working days"), "business day", None),
):
    for _name in _names:
        _TIME_UNITS[_name] = (_canon, _secs)
del _names, _canon, _secs, _name

# Largest-first units a convertible duration is expressed in.
_DURATION_STEPS = (("week", 604800), ("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1))

_OTHER_UNITS: dict[str, str] = {}
for _names, _canon in (
    (("%", "percent", "per cent", "pct", "percentage points", "pp"), "%"),
    (("b", "byte", "bytes"), "B"),
    (("kb", "kilobyte", "kilobytes"), "KB"),
    (("kib",), "KiB"),
    (("mb", "megabyte", "megabytes"), "MB"),
    (("mib",), "MiB"),
    (("gb", "gigabyte", "gigabytes", "gig", "gigs"), "GB"),
    (("gib",), "GiB"),
    (("tb", "terabyte", "terabytes"), "TB"),
    (("tib",), "TiB"),
    (("pb", "petabyte", "petabytes"), "PB"),
    (("kbps",), "kbps"), (("mbps",), "Mbps"), (("gbps",), "Gbps"),
    (("mm", "millimetre", "millimetres", "millimeter", "millimeters"), "mm"),
    (("cm", "centimetre", "centimetres", "centimeter", "centimeters"), "cm"),
    (("m", "metre", "metres", "meter", "meters"), "m"),
    (("km", "kilometre", "kilometres", "kilometer", "kilometers", "kms"), "km"),
    (("mi", "mile", "miles"), "mi"),
    (("ft", "foot", "feet"), "ft"),
    (("inch", "inches"), "in"),
    (("yd", "yard", "yards"), "yd"),
    (("mg", "milligram", "milligrams"), "mg"),
    (("g", "gram", "grams"), "g"),
    (("kg", "kilogram", "kilograms", "kilo", "kilos"), "kg"),
    (("t", "tonne", "tonnes", "ton", "tons"), "t"),
    (("lb", "lbs", "pound", "pounds"), "lb"),
    (("oz", "ounce", "ounces"), "oz"),
    (("ml", "millilitre", "millilitres", "milliliter", "milliliters"), "ml"),
    (("l", "litre", "litres", "liter", "liters"), "l"),
    (("gallon", "gallons"), "gal"),
    (("°c", "° c", "degrees celsius", "degree celsius", "celsius"), "°C"),
    (("°f", "° f", "degrees fahrenheit", "degree fahrenheit", "fahrenheit"), "°F"),
    (("°", "degree", "degrees"), "°"),
    (("km/h", "kph", "kmh"), "km/h"),
    (("mph",), "mph"),
    (("m/s",), "m/s"),
    (("hz", "hertz"), "Hz"), (("khz",), "kHz"), (("mhz",), "MHz"), (("ghz",), "GHz"),
    (("w", "watt", "watts"), "W"), (("kw", "kilowatt", "kilowatts"), "kW"),
    (("mw", "megawatt", "megawatts"), "MW"), (("kwh",), "kWh"), (("mwh",), "MWh"),
    (("x",), "x"),
):
    for _name in _names:
        _OTHER_UNITS[_name] = _canon
del _names, _canon, _name

_ALL_UNITS = {**{k: v[0] for k, v in _TIME_UNITS.items()}, **_OTHER_UNITS}
# Single letters are units when glued to the number ("5m", "30s"), a few also
# after a space ("120 s"), and only these upper-case ones ("5M" is five million,
# "5G" a network generation).
_UPPER_SINGLE_UNITS = {"L", "W", "X"}
_SPACED_SINGLE_UNITS = {"s", "h", "d", "m", "g", "W"}

_CURRENCY_SYMBOLS = {
    "US$": "USD", "AU$": "AUD", "CA$": "CAD", "NZ$": "NZD", "HK$": "HKD",
    "A$": "AUD", "C$": "CAD", "S$": "SGD", "R$": "BRL", "$": "USD",
    "€": "EUR", "£": "GBP", "¥": "JPY", "₹": "INR", "₩": "KRW", "₽": "RUB",
    "₺": "TRY", "₪": "ILS", "₫": "VND", "₱": "PHP", "฿": "THB", "₴": "UAH",
    "₦": "NGN", "₿": "BTC",
}
_CURRENCY_CODES = (
    "USD", "EUR", "GBP", "JPY", "CHF", "CAD", "AUD", "NZD", "CNY", "RMB", "INR",
    "SEK", "NOK", "DKK", "PLN", "CZK", "HUF", "BRL", "MXN", "ZAR", "SGD", "HKD",
    "KRW", "RUB", "TRY", "ILS", "AED", "SAR", "BTC", "ETH",
)
# Currency words: (code, multiplier).
_CURRENCY_WORDS: dict[str, tuple[str, Decimal]] = {
    "dollar": ("USD", Decimal(1)), "dollars": ("USD", Decimal(1)),
    "bucks": ("USD", Decimal(1)), "cent": ("USD", Decimal("0.01")),
    "cents": ("USD", Decimal("0.01")), "euro": ("EUR", Decimal(1)),
    "euros": ("EUR", Decimal(1)), "pounds sterling": ("GBP", Decimal(1)),
    "quid": ("GBP", Decimal(1)), "pence": ("GBP", Decimal("0.01")),
    "yen": ("JPY", Decimal(1)), "yuan": ("CNY", Decimal(1)),
    "rupee": ("INR", Decimal(1)), "rupees": ("INR", Decimal(1)),
    "franc": ("CHF", Decimal(1)), "francs": ("CHF", Decimal(1)),
    "bitcoin": ("BTC", Decimal(1)), "bitcoins": ("BTC", Decimal(1)),
    "rouble": ("RUB", Decimal(1)), "roubles": ("RUB", Decimal(1)),
    "ruble": ("RUB", Decimal(1)), "rubles": ("RUB", Decimal(1)),
}
_CURRENCY_ALIASES = {"RMB": "CNY"}
_SCALE_SUFFIXES = {
    "k": 1000, "m": 10**6, "mm": 10**6, "mn": 10**6, "b": 10**9, "bn": 10**9,
}

_RATE_ADVERBS = {
    "hourly": "per hour", "daily": "per day", "nightly": "per night",
    "weekly": "per week", "biweekly": "per 2 week", "fortnightly": "per 2 week",
    "monthly": "per month", "quarterly": "per quarter", "yearly": "per year",
    "annually": "per year", "annual": "per year", "per annum": "per year",
}

_NEGATION_WORDS = {
    "not", "no", "never", "none", "nobody", "nothing", "neither", "nor",
    "without", "cannot", "nowhere", "no-one", "noone",
    # contractions written without the apostrophe ("wont" and "cant" are words)
    "dont", "doesnt", "didnt", "isnt", "arent", "wasnt", "werent", "hasnt",
    "havent", "hadnt", "wouldnt", "shouldnt", "couldnt", "mustnt", "neednt",
    "aint",
}

# Capitalised words that are not names when they start a sentence.
_SENTENCE_STARTERS = set(
    """
    a an the this that these those there here it its we i our ours my me us you your
    yours he she they them their theirs his her hers him one some any all each every
    both either neither no none not never also and but or so yet nor for if then than
    when whenever while where wherever why how what which who whom whose whoever as at
    by in on of off to from with without into onto over under after before since until
    till during about above below across along among around behind beside besides
    between beyond despite except inside outside near per through throughout toward
    towards upon via within against like unlike unless because although though whereas
    whether once always usually often sometimes rarely seldom generally typically
    currently recently lately now today tomorrow yesterday tonight soon later earlier
    already still just only even ever again finally first next last however therefore
    thus hence meanwhile moreover furthermore otherwise instead anyway actually
    basically apparently obviously clearly unfortunately fortunately hopefully ideally
    overall initially originally previously eventually perhaps maybe probably certainly
    definitely absolutely mostly mainly nearly almost approximately roughly exactly
    is are was were be been being am do does did done have has had having will would
    shall should can could may might must need needs let lets yes ok okay please thanks
    thank note notes remember important update updated reminder fyi tip warning todo
    version release revision number total
    use using make ensure keep check add remove set run call send ask tell see go get
    try avoid prefer prefers everyone everybody everything someone somebody something
    anyone anybody anything nobody nothing new old other another same such many much
    more most few several less least own main primary current previous default half
    lots plenty sure well good best better dear hi hello according regarding based
    located given starting beginning following including going looks seems per
    unlike regardless besides altogether together only whatever whichever
    """.split()
)
# Capitalised function words in title-cased text are not names either.
_TITLE_CASE_FUNCTION_WORDS = set(
    """
    a an the and or but nor of in on at to for from by with as into onto over under
    is are was were be its it this that these those our my your their his her we you
    they i s
    """.split()
)
_HONORIFICS = {
    "mr", "mrs", "ms", "mx", "dr", "prof", "sir", "madam", "st", "doctor", "professor",
    "mister", "miss",
}
_ACRONYM_STOPWORDS = {"ok", "am", "pm", "fyi", "tbd", "todo", "nb", "ps", "asap", "aka", "eg", "ie"}
_ARTICLES = {"a", "an", "single"}

# --------------------------------------------------------------------------- #
# Patterns
#
# Speed matters (a 32 KB text must take milliseconds), and CPython's regex
# engine only skips ahead quickly when a pattern starts with a literal or a
# character class. So no pattern starts with a look-behind: the token-start
# guard comes right after the first character ("[0-9](?<![\w.][0-9])"), word
# lists are prefix trees with the guard after their first letter, and patterns
# led by words run without IGNORECASE on a lower-cased shadow of the text.
# --------------------------------------------------------------------------- #


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
    r"(?P<sym>" + _alternation(_CURRENCY_PREFIXES, guard=r"[\w" + _MASK + r"]") + r")[ ]?(?P<n>" + _NUM + r")(?P<sc>" + _SCALE_SUFFIX + r")?"
    r"(?:[ ]?(?:-|to)[ ]?(?:" + _alternation(_CURRENCY_SYMBOLS) + r")?(?P<n2>" + _NUM + r")(?P<sc2>" + _SCALE_SUFFIX + r")?)?"
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


# --------------------------------------------------------------------------- #
# Helpers
# --------------------------------------------------------------------------- #


def _decimal(raw: str) -> Decimal:
    return Decimal(raw.replace(",", ""))


def _fmt_amount(value: Decimal) -> str:
    """Canonical decimal: no thousands separator, no trailing zeros."""
    if value == value.to_integral_value():
        return str(int(value))
    return format(value.normalize(), "f")


def _fmt_number(raw: str) -> str:
    """A bare number: "1,200" -> "1200", "15.0" -> "15"; "3.10" stays "3.10".

    Non-zero fraction digits are kept as written because bare decimals in prose
    are often versions ("Python 3.10" is not "Python 3.1").
    """
    raw = raw.replace(",", "")
    whole, _, frac = raw.partition(".")
    whole = whole.lstrip("0") or "0"
    if not frac.strip("0"):
        return whole
    return f"{whole}.{frac}"


def _scaled(raw: str, suffix: str | None) -> Decimal:
    value = _decimal(raw)
    if suffix:
        value *= _SCALE_SUFFIXES[suffix.lower()]
    return value


def _ordinal_suffix(n: int) -> str:
    if 10 <= n % 100 <= 20:
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


def _previous_word(text: str, end: int) -> str:
    """The word (or mask) right before ``end``, lower-cased; '' if none."""
    match = _PREV_WORD_RE.search(text, max(0, end - 40), end)
    return match.group(1).lower() if match else ""


def _duration(value: Decimal, unit: str) -> str:
    """Canonical quantity string, converting exact durations between units."""
    canon, seconds = _TIME_UNITS.get(unit, (None, None))
    if canon is None:
        return f"{_fmt_amount(value)} {_OTHER_UNITS[unit]}"
    if seconds is None:
        return f"{_fmt_amount(value)} {canon}"
    total = value * seconds
    for name, size in _DURATION_STEPS:
        count = total / size
        if count == count.to_integral_value() and count != 0:
            return f"{_fmt_amount(count)} {name}"
    return f"{_fmt_amount(total)} second"


def _unit_key(raw: str) -> str:
    """Normalise a matched unit for table lookup ("Days" -> "days", "° C" -> "° c")."""
    return re.sub(r"[ ]+", " ", raw.lower())


def _stem(word: str) -> str:
    """Crude English stem, only used to recognise the same word in two texts."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 5 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 4 and word.endswith("ed"):
        return word[:-2]
    if len(word) > 4 and word.endswith(("ches", "shes", "sses", "xes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _lowered(text: str) -> str:
    """Lower-case ``text`` keeping every character at its index."""
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered
    # A few characters lower-case to two ("İ"); keep those as they are.
    return "".join(c.lower() if len(c.lower()) == 1 else c for c in text)


def _negative_sign(text: str, start: int) -> bool:
    """True for "-5" but not for the range "3-5" or the identifier "db-5"."""
    return start >= 1 and text[start - 1] == "-" and (start == 1 or text[start - 2] in " (\n\"'")


def _polarity(negated: bool) -> str:
    return "negated" if negated else "affirmative"


# --------------------------------------------------------------------------- #
# Extraction
# --------------------------------------------------------------------------- #


class _Extractor:
    """Runs the extraction passes over one text.

    Passes run from the most specific detail to the least specific; each one
    replaces what it recognised with the mask character so that, say, the "3" of
    "March 3" is not read again as a bare number. ``lower`` is a lower-cased
    shadow of ``text``, aligned character for character, for the passes led by
    words.
    """

    def __init__(self, text: str) -> None:
        self.text = normalize_text(text)
        self.lower = _lowered(self.text)
        self.found: dict[str, set[str]] = {name: set() for name in _KIND_FIELDS.values()}

    def run(self) -> Details:
        text = self.text
        if "@" in text or "://" in text or "www." in self.lower:
            self._sub(_URL_RE, self._url)
        self._sub(_ALTERNATE_RE, self._alternate, lowered=True)
        self._sub(_NUMERAL_RUN_RE, self._numeral_run, lowered=True)
        has_digits = _HAS_DIGIT.search(self.text) is not None
        if has_digits:
            self._sub(_DIGIT_SCALE_RE, self._digit_scale)
            self._sub(_ISO_DATE_RE, self._iso_date)
            self._sub(_NUMERIC_DATE_RE, self._numeric_date)
            self._sub(_IP_RE, self._identifier)
            self._sub(_VERSION_V_RE, self._version)
            self._sub(_VERSION_DOTTED_RE, self._version)
            self._sub(_VERSION_WORD_RE, self._version_word, lowered=True)
            self._sub(_TEXT_DATE_DAY_FIRST_RE, self._text_date)
        self._sub(_TEXT_DATE_MONTH_FIRST_RE, self._text_date, lowered=True)
        if has_digits:
            self._sub(_CLOCK_PHRASE_RE, self._clock_phrase, lowered=True)
            self._sub(_TIME_RE, self._time)
        self._sub(_CALENDAR_RE, self._calendar_word, lowered=True)
        if has_digits:
            self._sub(_CURRENCY_PREFIX_RE, self._currency)
            self._sub(_CURRENCY_SUFFIX_RE, self._currency)
        self._sub(_RATE_EVERY_RE, self._rate_every, lowered=True)
        if has_digits or _MASK in self.text:
            self._sub(_RATE_SLASH_RE, self._rate_slash)
        self._sub(_RATE_ARTICLE_RE, self._rate_article, lowered=True)
        if has_digits:
            self._sub(_QUANTITY_RE, self._quantity)
            self._sub(_DECADE_RE, self._decade)
            self._sub(_YEAR_RE, self._year)
            self._sub(_NUMBER_RE, self._number)
        negated, words = self._scan_words()
        return Details(
            numbers=frozenset(self.found["numbers"]),
            dates=frozenset(self.found["dates"]),
            times=frozenset(self.found["times"]),
            quantities=frozenset(self.found["quantities"]),
            currencies=frozenset(self.found["currencies"]),
            versions=frozenset(self.found["versions"]),
            names=frozenset(self.found["names"]),
            negated=negated,
            words=frozenset(words),
        )

    def _sub(
        self,
        pattern: re.Pattern[str],
        handler: Callable[[re.Match[str]], str | None],
        *,
        lowered: bool = False,
    ) -> None:
        """Replace each match the handler accepts (returns a string) in the text.

        With ``lowered`` the pattern runs on the lower-cased shadow; handlers then
        read the original spelling through :meth:`original`.
        """
        text = self.text
        pieces: list[str] = []
        last = 0
        for match in pattern.finditer(self.lower if lowered else text):
            result = handler(match)
            if result is None:
                continue
            pieces.append(text[last:match.start()])
            pieces.append(result)
            last = match.end()
        if pieces:
            pieces.append(text[last:])
            self.text = "".join(pieces)
            self.lower = _lowered(self.text)

    def original(self, match: re.Match[str], group: int | str = 0) -> str:
        """The text of ``group`` as written (matches on the shadow are lower-cased)."""
        start, end = match.span(group)
        return self.text[start:end]

    def _add(self, name: str, value: str) -> str:
        self.found[name].add(value)
        return _MASK

    # -- identifiers ------------------------------------------------------- #

    def _url(self, match: re.Match[str]) -> str:
        raw = match.group(0)
        trimmed = raw.rstrip(".,;:!?)]}'\"")
        value = re.sub(r"^(?:https?://)?(?:www\.)?", "", trimmed.lower()).rstrip("/")
        self.found["names"].add(value)
        return _MASK + raw[len(trimmed):]

    def _identifier(self, match: re.Match[str]) -> str:
        return self._add("names", match.group(0).lower())

    # -- spelled-out numbers ------------------------------------------------ #

    def _alternate(self, match: re.Match[str]) -> str:
        return self.original(match, "kw") + " other "

    def _numeral_run(self, match: re.Match[str]) -> str | None:
        text, start, end = match.string, match.start(), match.end()
        after = text[end:end + 1]
        if after == "'":  # "one's"
            return None
        if after == "-":
            # "five-day" is a quantity; "third-party", "one-off", "two-factor" are words.
            unit = re.match(r"-([a-z]+)", text[end:end + 30])
            if not unit or unit.group(1) not in _ALL_UNITS:
                return None
        words = _WORDS_RE.findall(self.original(match))
        lowered = [w.lower() for w in words]
        previous = _previous_word(text, start)
        if len(lowered) == 1:
            word = lowered[0]
            if word == "one":
                following = text[end:end + 9]
                if (
                    previous in _ONE_PRONOUN_BEFORE
                    or following.startswith((" of ", " another"))
                    or not following
                    or following[0] in ".,;:!?)"
                ):
                    return None
            if word == "second" and (previous in _SECOND_UNIT_BEFORE or previous[-1:].isdigit()):
                return None
        article = lowered[0] in _SCALES and previous in ("a", "an")
        return _spell_numbers(words, article=article)

    def _digit_scale(self, match: re.Match[str]) -> str:
        value = _decimal(match.group("n")) * _SCALES[match.group("scale").lower()]
        return _fmt_amount(value)

    # -- versions ------------------------------------------------------------ #

    def _version(self, match: re.Match[str]) -> str:
        pre = match.group("pre")
        return self._add("versions", match.group("n") + (f"-{pre.lower()}" if pre else ""))

    def _version_word(self, match: re.Match[str]) -> str:
        # "version 15": keep the keyword as a word, claim only the number.
        self.found["versions"].add(match.group("n"))
        return self.original(match)[: match.start("n") - match.start()] + _MASK

    # -- dates ------------------------------------------------------------- #

    def _iso_date(self, match: re.Match[str]) -> str | None:
        year = int(match.group(0)[:4])
        if match.group("ym"):
            month = int(match.group("ym"))
            if not 1 <= month <= 12:
                return None
            return self._add("dates", f"{year:04d}-{month:02d}")
        month, day = int(match.group("mo")), int(match.group("d"))
        if not (1 <= month <= 12 and 1 <= day <= 31):
            return None
        self.found["dates"].add(f"{year:04d}-{month:02d}-{day:02d}")
        if match.group("h"):
            hour, minute = int(match.group("h")), int(match.group("mi"))
            second = int(match.group("s") or 0)
            if hour <= 24 and minute < 60 and second < 60:
                self.found["times"].add(_fmt_time(hour, minute, second))
        return _MASK

    def _numeric_date(self, match: re.Match[str]) -> str | None:
        sep, year_raw = match.group("sep"), match.group("y")
        if sep == "." and len(year_raw) != 4:
            return None  # "1.2.24" is more likely a version
        year = int(year_raw)
        if len(year_raw) == 2:
            year += 2000 if year < 70 else 1900
        a, b = int(match.group("a")), int(match.group("b"))
        readings = set()
        if 1 <= b <= 12 and 1 <= a <= 31:
            readings.add(f"{year:04d}-{b:02d}-{a:02d}")  # day first
        if 1 <= a <= 12 and 1 <= b <= 31:
            readings.add(f"{year:04d}-{a:02d}-{b:02d}")  # month first
        if not readings:
            return None
        # An ambiguous date keeps both readings; compare_details matches either.
        return self._add("dates", "|".join(sorted(readings)))

    def _text_date(self, match: re.Match[str]) -> str | None:
        month_raw = self.original(match, "m")
        if month_raw.lower() == "may" and month_raw not in ("May", "MAY"):
            return None  # the modal verb
        month = _month_number(month_raw)
        groups = match.groupdict()
        year = groups.get("y") or groups.get("y2")
        if not groups["d"]:
            if year:
                return self._add("dates", f"{int(year):04d}-{month:02d}")
            if month_raw.lower().rstrip(".") not in _MONTHS:
                return None  # a bare "Jan" or "Mar" is too likely a name or a word
            if month == 5 and _previous_word(match.string, match.start()) not in _BEFORE_BARE_MAY:
                return None  # "May I ask", "May we ship"
            return self._add("dates", f"--{month:02d}")
        values = []
        for day_raw in (groups["d"], groups.get("d2")):
            if not day_raw:
                continue
            day = int(day_raw)
            if not 1 <= day <= 31:
                return None
            values.append(f"{int(year):04d}-{month:02d}-{day:02d}" if year else f"--{month:02d}-{day:02d}")
        self.found["dates"].update(values)
        return _MASK

    def _calendar_word(self, match: re.Match[str]) -> str | None:
        word = match.group("w")
        kind, value = _CALENDAR_WORDS[word]
        if kind == "relative":
            period = match.group("period")
            if not period:
                return None  # "at last", "this team"
            return self._add("dates", f"{word} {period.split()[-1]}")
        if kind == "season":
            original = self.original(match, "w")
            if original[0].isupper() and _TITLE_AFTER_RE.match(self.text, match.end()):
                return None  # "Spring Boot", "Winter Olympics"
            kind = "dates"
        return self._add(kind, value)

    def _decade(self, match: re.Match[str]) -> str:
        return self._add("dates", f"19{match.group('dec')}s")

    def _year(self, match: re.Match[str]) -> str | None:
        year = match.group("y")
        if not 1800 <= int(year) <= 2199:
            return None
        return self._add("dates", year + (match.group("s") or ""))

    # -- times ------------------------------------------------------------- #

    def _time(self, match: re.Match[str]) -> str | None:
        groups = match.groupdict()
        hour = int(groups["h"])
        minute = second = 0
        meridiem = None
        if groups["word"]:
            if hour != 12:
                return None
            return self._add("times", "00:00" if groups["word"].lower() == "midnight" else "12:00")
        if groups["m"] is not None:
            minute, second = int(groups["m"]), int(groups["s"] or 0)
            meridiem = groups["ap"]
        elif groups["ap2"] is not None:
            minute = int(groups["m2"] or 0)
            meridiem = groups["ap2"]
        elif groups["part"] or groups["night"]:
            meridiem = "a" if groups["part"] and groups["part"].lower() == "morning" else "p"
        if minute > 59 or second > 59:
            return None
        if meridiem:
            if not 1 <= hour <= 12:
                return None
            if meridiem.lower() == "p" and hour != 12:
                hour += 12
            elif meridiem.lower() == "a" and hour == 12:
                hour = 0
        elif hour > 24:
            return None
        return self._add("times", _fmt_time(hour, minute, second))

    def _clock_phrase(self, match: re.Match[str]) -> str | None:
        hour = int(match.group("h"))
        minutes = 30 if match.group("part") == "half" else 15
        if match.group("rel") == "to":
            hour, minutes = hour - 1, 60 - minutes
        if not 0 <= hour <= 12:
            return None
        meridiem = match.group("ap")
        if meridiem == "p" and hour != 12:
            hour += 12
        elif meridiem == "a" and hour == 12:
            hour = 0
        return self._add("times", _fmt_time(hour, minutes, 0))

    # -- money, rates and quantities ---------------------------------------- #

    def _currency(self, match: re.Match[str]) -> str | None:
        groups = match.groupdict()
        multiplier = Decimal(1)
        if groups.get("sym"):
            symbol = groups["sym"]
            code = _CURRENCY_SYMBOLS.get(symbol, symbol)
        elif groups.get("code"):
            code = groups["code"]
        else:
            code, multiplier = _CURRENCY_WORDS[_unit_key(groups["word"])]
        code = _CURRENCY_ALIASES.get(code, code)
        sign = -1 if _negative_sign(match.string, match.start()) else 1
        for raw, suffix in ((groups["n"], groups["sc"]), (groups.get("n2"), groups.get("sc2"))):
            if raw:
                value = _scaled(raw, suffix) * multiplier * sign
                self.found["currencies"].add(f"{_fmt_amount(value)} {code}")
        return _MASK

    def _rate_every(self, match: re.Match[str]) -> str | None:
        if _previous_word(match.string, match.start()) == "of":
            return None  # "the first day of each month" names a day, not a rate
        unit = match.group("unit")
        if unit == "annum":
            return self._add("quantities", "per year")
        count = _decimal(match.group("n")) if match.group("n") else Decimal(1)
        if match.group("other"):
            count *= 2
        return self._add("quantities", "per " + _per(count, unit))

    def _rate_slash(self, match: re.Match[str]) -> str:
        unit = match.group("unit").lower()
        unit = {"h": "hour", "d": "day", "s": "second"}.get(unit, unit)
        return self._add("quantities", "per " + _per(Decimal(1), unit))

    def _rate_article(self, match: re.Match[str]) -> str | None:
        unit = match.group("unit")
        before = _WORD_OR_MASK_RE.findall(match.string, max(0, match.start() - 60), match.start())[-2:]
        previous = before[-1] if before else ""
        counted = [w for w in before if _HAS_DIGIT.search(w) or w.endswith(_MASK)]
        if (
            previous in _RATE_CONTEXT_WORDS
            or previous in _ALL_UNITS
            or (counted and previous not in _NOT_BEFORE_RATE)
        ):
            # "$1,200 a month", "twice a week", "40 hours a week", "500 requests a minute"
            return self._add("quantities", "per " + _per(Decimal(1), unit))
        if unit.startswith(("quarter", "night")):
            return None  # "a quarter of the budget"
        count = Decimal("0.5") if previous == "half" else Decimal(1)  # "half an hour"
        return self._add("quantities", _duration(count, unit))  # "for a week"

    def _quantity(self, match: re.Match[str]) -> str | None:
        unit_raw = match.group("unit")
        if len(unit_raw) == 1 and unit_raw.isalpha():
            if (match.group("sep") and unit_raw not in _SPACED_SINGLE_UNITS) or (
                unit_raw.isupper() and unit_raw not in _UPPER_SINGLE_UNITS
            ):
                return None  # "5 x 3" is arithmetic, "5M" is five million, "5G" a network
        unit = _unit_key(unit_raw)
        if unit == "s" and (
            len(match.group("n")) == 4 or match.string[match.start() - 1:match.start()] == "'"
        ):
            return None  # "the 1990s", "the '90s" are decades, read by the year pass
        sign = -1 if _negative_sign(match.string, match.start()) else 1
        for raw in (match.group("n"), match.group("n2")):
            if raw:
                self.found["quantities"].add(_duration(_decimal(raw) * sign, unit))
        return _MASK

    # -- bare numbers -------------------------------------------------------- #

    def _number(self, match: re.Match[str]) -> str:
        raw = match.group("n")
        sign = "-" if _negative_sign(match.string, match.start()) else ""
        if match.group("den"):
            return self._add("numbers", f"{sign}{_fmt_number(raw)}/{int(match.group('den'))}")
        if match.group("sc"):
            return self._add("numbers", sign + _fmt_amount(_scaled(raw, match.group("sc"))))
        return self._add("numbers", sign + _fmt_number(raw))

    # -- names, identifiers and negation ------------------------------------ #

    def _scan_words(self) -> tuple[bool, set[str]]:
        """Read names, identifiers and negation from what the passes left over."""
        words: set[str] = set()
        cues: set[str] = set()
        names = self.found["names"]
        analysed: dict[tuple[str, bool], tuple[str, ...] | None] = {}
        at_start = True
        for token, boundary in _TOKEN_RE.findall(self.text):
            if boundary:
                at_start = True
                continue
            sentence_start, at_start = at_start, False
            if token == _MASK:
                continue
            key = (token, sentence_start)
            found = analysed[key] if key in analysed else analysed.setdefault(
                key, _analyse_token(token, sentence_start=sentence_start)
            )
            if found is None:
                cues.add(token.lower())
                continue
            words.add(token.lower())
            names.update(found)
        # "No. 5" is a number, not a negation.
        negated = bool(cues - {"no"}) or ("no" in cues and _NO_CUE_RE.search(self.lower) is not None)
        return negated, words


def _analyse_token(token: str, *, sentence_start: bool) -> tuple[str, ...] | None:
    """The names in one token, or None when the token is a negation cue."""
    lower = token.lower()
    if lower in _NEGATION_WORDS or lower.endswith("n't"):
        return None
    token = _strip_clitic(token)
    if not token:
        return ()
    lower = token.lower()
    has_digit = _HAS_DIGIT.search(token) is not None
    if "_" in token or (has_digit and _HAS_LETTER.search(token)):
        return (lower,)  # db-stage-2, api_v2, ec2
    if has_digit:
        return ()
    if "." in token:
        segments = token.split(".")
        if all(len(s) == 1 for s in segments):
            # "U.S" -> "US"; "e.g" stays lower case and is dropped below.
            token = "".join(segments)
            sentence_start = False
        elif len(segments[-1]) >= 2 and segments[-1].isalpha() and not (
            segments[-1][0].isupper() and not segments[-1].isupper()
        ):
            return (lower,)  # example.com, node.js, settings.py
    if not _SEPARATOR.search(token):
        return (token.lower(),) if _is_name(token, sentence_start=sentence_start) else ()
    if "-" in token and token == lower and "/" not in token:
        return (lower,)  # a lower-case compound such as "db-stage" or "read-only"
    parts = _SEPARATOR.split(token)
    return tuple(
        part.lower()
        for index, part in enumerate(parts)
        # a one-letter part is a prefix ("E-mail", "X-ray"), not a name
        if len(part) > 1 and _is_name(part, sentence_start=sentence_start and index == 0)
    )


def _strip_clitic(token: str) -> str:
    """Drop possessive and contraction endings: "Anna's" -> "Anna", "I'm" -> "I"."""
    if "'" not in token:
        return token
    base, _, rest = token.partition("'")
    if rest.lower() in {"s", "re", "ve", "ll", "d", "m"}:
        return base
    return token  # O'Brien


def _is_name(word: str, *, sentence_start: bool) -> bool:
    """Capitalised mid-sentence, an acronym, CamelCase, or an uncommon sentence start."""
    lower = word.lower()
    first_upper = word[0].isupper()
    is_acronym = len(word) >= 2 and word.isupper()
    is_camel = any(c.isupper() for c in word[1:]) and not word.isupper()
    if not first_upper and not is_camel:
        return False
    if word == "I" or lower in _HONORIFICS:
        return False
    if is_acronym:
        return lower not in _ACRONYM_STOPWORDS
    if is_camel:
        return True
    if sentence_start:
        if lower in _SENTENCE_STARTERS:
            return False
        if len(lower) >= 7 and lower.endswith(("ly", "ing")):
            return False  # "Currently", "Starting"
        return True
    return lower not in _TITLE_CASE_FUNCTION_WORDS


def _month_number(raw: str) -> int:
    key = raw.lower().rstrip(".")
    return _MONTHS.get(key) or _MONTH_ABBREVIATIONS[key]


def _fmt_time(hour: int, minute: int, second: int) -> str:
    if second:
        return f"{hour:02d}:{minute:02d}:{second:02d}"
    return f"{hour:02d}:{minute:02d}"


def _per(count: Decimal, unit: str) -> str:
    """Canonical rate: "per week", "per 2 week" (from "every 14 days")."""
    canonical = _duration(count, unit)
    value, name = canonical.split(" ", 1)
    return name if value == "1" else canonical


def _spell_numbers(words: list[str], *, article: bool = False) -> str:
    """Turn a run of numeral words into digits ("twenty one" -> "21").

    ``words`` are the words of the run as written (case is kept for words that
    are left alone).

    A run that is not one number ("one two", "three and four") becomes several,
    joined by the words that separated them.
    """
    output: list[str] = []
    state = _NumberState()
    state.article = article
    pending_and = False
    originals, words = words, [w.lower() for w in words]
    for index, word in enumerate(words):
        if word == "and":
            nxt = words[index + 1] if index + 1 < len(words) else ""
            if state.last in ("H", "S") and _category(nxt) in ("u", "t", "T"):
                continue
            output.append(state.render())
            state = _NumberState()
            pending_and = True
            continue
        if pending_and:
            output.append("and")
            pending_and = False
        if not state.accepts(word):
            output.append(state.render())
            state = _NumberState()
            if not state.accepts(word):
                output.append(originals[index])  # a bare "million" or "hundred"
                continue
        state.push(word)
    output.append(state.render())
    return " ".join(part for part in output if part)


def _category(word: str) -> str:
    if word in _SCALES:
        return "D" if word == "dozen" else ("H" if word == "hundred" else "S")
    if word in ("hundredth",):
        return "H"
    if word in ("thousandth", "millionth"):
        return "S"
    value = _CARDINALS.get(word, _ORDINALS.get(word))
    if value is None:
        return ""
    if value < 10:
        return "u"
    if value < 20:
        return "t"
    return "T"


class _NumberState:
    """Accumulates one spelled-out number ("two thousand and twenty-four")."""

    _ALLOWED = {
        None: {"u", "t", "T"},
        "u": {"H", "S", "D"},
        "t": {"H", "S"},
        "T": {"u", "S"},
        "H": {"u", "t", "T", "S"},
        "S": {"u", "t", "T"},
        "D": set(),
    }

    def __init__(self) -> None:
        self.total = 0
        self.current = 0
        self.last: str | None = None
        self.ordinal = False
        self.article = False
        self.empty = True

    def accepts(self, word: str) -> bool:
        if self.ordinal or self.last == "ord":
            return False
        category = _category(word)
        if self.empty:
            return category in {"u", "t", "T"} or (self.article and category in {"H", "S", "D"})
        if self.last == "u" and self.current == 0 and self.total == 0:
            return False  # "zero" stands alone
        return category in self._ALLOWED[self.last]

    def push(self, word: str) -> None:
        category = _category(word)
        value = _NUMERAL_WORDS[word] if word in _NUMERAL_WORDS else 0
        if word in _ORDINALS:
            self.ordinal = True
            value = _ORDINALS[word]
        if category in ("u", "t", "T"):
            self.current += value
        elif category == "H":
            self.current = (self.current or 1) * 100
        elif category == "D":
            self.current = (self.current or 1) * 12
        else:
            self.total += (self.current or 1) * value
            self.current = 0
        self.last = category
        self.empty = False

    def render(self) -> str:
        if self.empty:
            return ""
        value = self.total + self.current
        return f"{value}{_ordinal_suffix(value)}" if self.ordinal else str(value)


# --------------------------------------------------------------------------- #
# Comparison helpers
# --------------------------------------------------------------------------- #

_LOOSE_KINDS = ("number", "version", "date", "quantity", "time")


def _plain_value(kind: str, value: str) -> str | None:
    """The bare numeric value a detail shares with a bare number, if any.

    "version 15" vs "15", "in 2021" vs "2021", "30 years old" vs "30" are the same
    fact phrased differently; a changed unit ("3 days" -> "3 weeks") stays within
    the quantity kind and is not affected.
    """
    if kind in ("number", "version"):
        return value
    if kind == "date":
        return value if re.fullmatch(r"[0-9]{4}", value) else None
    if kind == "quantity":
        # Only ages drop their unit in restatements ("Tom is 30 years old"); a
        # number that gains or loses any other unit ("120" -> "120 ms") changed.
        head, _, unit = value.partition(" ")
        return head if unit == "year" else None
    return None


def _same_fact(kind_a: str, a: str, kind_b: str, b: str) -> bool:
    """Whether two differing details are one detail written two ways."""
    if kind_a == kind_b == "quantity":
        # "25 degrees" vs "25°C": the bare degree leaves the scale unsaid.
        value_a, _, unit_a = a.partition(" ")
        value_b, _, unit_b = b.partition(" ")
        return value_a == value_b and "°" in (unit_a, unit_b) and unit_a[:1] == unit_b[:1] == "°"
    if kind_a == kind_b:
        return False
    if "time" in (kind_a, kind_b):
        # "at 3" vs "at 3pm" / "at 15:00".
        number, time = (a, b) if kind_b == "time" else (b, a)
        if "number" not in (kind_a, kind_b) or not number.isdigit() or not time.endswith(":00"):
            return False
        hour, value = int(time[:2]), int(number)
        return value == hour or (1 <= value <= 12 and value + 12 == hour)
    if "number" not in (kind_a, kind_b) and "version" not in (kind_a, kind_b):
        return False
    plain = _plain_value(kind_a, a)
    return plain is not None and plain == _plain_value(kind_b, b)


def _cancel_rephrased_values(removed: dict[str, set[str]], added: dict[str, set[str]]) -> None:
    """Drop removed/added pairs that are one value written two ways (see _same_fact)."""
    for kind_a in _LOOSE_KINDS:
        for value in sorted(removed[kind_a]):
            for kind_b in _LOOSE_KINDS:
                other = next((o for o in sorted(added[kind_b]) if _same_fact(kind_a, value, kind_b, o)), None)
                if other is not None:
                    removed[kind_a].discard(value)
                    added[kind_b].discard(other)
                    break


def _cancel_implicit_one(one_sided: set[str], other: Details) -> None:
    """ "one server" restates "a server": drop a lone "1" when the other text has an article."""
    if "1" in one_sided and not other.words.isdisjoint(_ARTICLES):
        one_sided.discard("1")


def _cancel_ambiguous_dates(removed: set[str], added: set[str]) -> None:
    """ "04/03/2024" (either reading) restates "4 March 2024" and "April 3, 2024"."""
    for value in list(removed):
        readings = set(value.split("|"))
        for other in list(added):
            if readings & set(other.split("|")):
                removed.discard(value)
                added.discard(other)
                break


def _vocabulary(details: Details) -> set[str]:
    """Words of a text, their hyphen/dot parts and crude stems."""
    vocabulary: set[str] = set()
    for word in details.words:
        word = _strip_clitic(word)
        for piece in (word, word.replace("-", ""), *_SEPARATOR.split(word)):
            if piece:
                vocabulary.add(piece)
                vocabulary.add(_stem(piece))
    return vocabulary


def _in_vocabulary(name: str, vocabulary: set[str]) -> bool:
    if name in vocabulary or _stem(name) in vocabulary:
        return True
    if "-" in name and not _HAS_DIGIT.search(name):
        # "read-only" vs "read only", "family-owned" vs "a family owns"
        if name.replace("-", "") in vocabulary:
            return True
        return all(part in vocabulary or _stem(part) in vocabulary for part in name.split("-") if part)
    return False


def _cancel_names(removed: set[str], added: set[str], *, old: Details, new: Details) -> None:
    """Drop name differences that are only case, inflection or abbreviation."""
    # A name the other text also uses, only not capitalised, is the same name.
    for one_sided, other in ((removed, new), (added, old)):
        if not one_sided:
            continue
        vocabulary = _vocabulary(other)
        for value in list(one_sided):
            if _in_vocabulary(value, vocabulary):
                one_sided.discard(value)
    # "Postgres" vs "PostgreSQL": one name abbreviating the other.
    for value in list(removed):
        if not value.isalpha():
            continue
        for other in list(added):
            if other.isalpha() and min(len(value), len(other)) >= 5 and (
                value.startswith(other) or other.startswith(value)
            ):
                removed.discard(value)
                added.discard(other)
                break

