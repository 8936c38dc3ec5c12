"""The extraction passes over one text (:func:`extract_details`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal

from .lexicon import (
    _ALL_UNITS,
    _BEFORE_BARE_MAY,
    _CURRENCY_ALIASES,
    _CURRENCY_SYMBOLS,
    _CURRENCY_WORDS,
    _MONTHS,
    _ONE_PRONOUN_BEFORE,
    _SCALES,
    _SECOND_UNIT_BEFORE,
    _SPACED_SINGLE_UNITS,
    _UPPER_SINGLE_UNITS,
    _lowered,
    normalize_text,
)
from .model import _KIND_FIELDS, _MASK, Details
from .names import _analyse_token
from .numbers import (
    _decimal,
    _duration,
    _fmt_amount,
    _fmt_number,
    _fmt_time,
    _month_number,
    _negative_sign,
    _per,
    _scaled,
    _spell_numbers,
    _unit_key,
)
from .patterns import (
    _ALTERNATE_RE,
    _CALENDAR_RE,
    _CALENDAR_WORDS,
    _CLOCK_PHRASE_RE,
    _CURRENCY_PREFIX_RE,
    _CURRENCY_SUFFIX_RE,
    _DECADE_RE,
    _DIGIT_SCALE_RE,
    _HAS_DIGIT,
    _IP_RE,
    _ISO_DATE_RE,
    _NO_CUE_RE,
    _NOT_BEFORE_RATE,
    _NUMBER_RE,
    _NUMERAL_RUN_RE,
    _NUMERIC_DATE_RE,
    _ORDER_RE,
    _PREV_WORD_RE,
    _QUANTITY_RE,
    _RATE_ARTICLE_RE,
    _RATE_CONTEXT_WORDS,
    _RATE_EVERY_RE,
    _RATE_SLASH_RE,
    _TEXT_DATE_DAY_FIRST_RE,
    _TEXT_DATE_MONTH_FIRST_RE,
    _TIME_RE,
    _TITLE_AFTER_RE,
    _TOKEN_RE,
    _URL_RE,
    _VERSION_DOTTED_RE,
    _VERSION_V_RE,
    _VERSION_WORD_RE,
    _WORD_OR_MASK_RE,
    _WORDS_RE,
    _YEAR_RE,
)


def extract_details(text: str) -> Details:
    """Extract the normalised details of ``text``.

    >>> sorted(extract_details("We have three servers running PostgreSQL 15.").numbers)
    ['15', '3']
    """
    return _Extractor(text).run()


def _previous_word(text: str, end: int) -> str:
    """The word (or mask) right before ``end``, lower-cased; '' if none."""
    match = _PREV_WORD_RE.search(text, max(0, end - 40), end)
    return match.group(1).lower() if match else ""


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
        orders = self._orders()
        return Details(
            numbers=frozenset(self.found["numbers"]),
            dates=frozenset(self.found["dates"]),
            times=frozenset(self.found["times"]),
            quantities=frozenset(self.found["quantities"]),
            currencies=frozenset(self.found["currencies"]),
            versions=frozenset(self.found["versions"]),
            names=frozenset(self.found["names"]),
            negated=negated,
            orders=orders,
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
        if len(unit_raw) == 1 and unit_raw.isalpha() and (
            (match.group("sep") and unit_raw not in _SPACED_SINGLE_UNITS)
            or (unit_raw.isupper() and unit_raw not in _UPPER_SINGLE_UNITS)
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

    # -- order --------------------------------------------------------------- #

    def _orders(self) -> frozenset[tuple[str, str, str]]:
        """Pairs of words set against each other, in their order (``_ORDER_RE``)."""
        found = set()
        for match in _ORDER_RE.finditer(self.lower):
            if match.group(1):
                first, connector, second = match.group(2), "from-to", match.group(3)
            else:
                first, connector, second = match.group(4), " ".join(match.group(5).split()), match.group(6)
            if _MASK not in first + second and first != second:
                found.add((first, connector, second))
        return frozenset(found)

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
