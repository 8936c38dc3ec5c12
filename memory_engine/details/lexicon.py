"""Normalisation tables and the vocabularies the patterns are built from (numerals,
months, units, currencies, negation cues, words that are not names)."""

from __future__ import annotations

import re
import unicodedata
from decimal import Decimal


def normalize_text(text: str) -> str:
    """Return ``text`` in the form every pattern of the package expects.

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
_TIME_UNITS: dict[str, tuple[str, int | None]] = {
    name: (canon, seconds)
    for names, canon, seconds in (
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
    )
    for name in names
}


# Largest-first units a convertible duration is expressed in.
_DURATION_STEPS = (("week", 604800), ("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1))


_OTHER_UNITS: dict[str, str] = {
    name: canon
    for names, canon in (
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
    )
    for name in names
}


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


def _lowered(text: str) -> str:
    """Lower-case ``text`` keeping every character at its index."""
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered
    # A few characters lower-case to two ("İ"); keep those as they are.
    return "".join(c.lower() if len(c.lower()) == 1 else c for c in text)
