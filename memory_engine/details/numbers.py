"""Number words and canonical values: spelled-out numbers to digits, amounts, durations,
rates, times."""

from __future__ import annotations

import re
from decimal import Decimal

from .lexicon import (
    _CARDINALS,
    _DURATION_STEPS,
    _MONTH_ABBREVIATIONS,
    _MONTHS,
    _NUMERAL_WORDS,
    _ORDINALS,
    _OTHER_UNITS,
    _SCALE_SUFFIXES,
    _SCALES,
    _TIME_UNITS,
)


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


def _negative_sign(text: str, start: int) -> bool:
    """True for "-5" but not for the range "3-5" or the identifier "db-5"."""
    return start >= 1 and text[start - 1] == "-" and (start == 1 or text[start - 2] in " (\n\"'")


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
        value = _NUMERAL_WORDS.get(word, 0)
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
