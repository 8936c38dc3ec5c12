"""Names, identifiers and negation cues in the words the extraction passes left over."""

from __future__ import annotations

from .lexicon import _ACRONYM_STOPWORDS, _HONORIFICS, _NEGATION_WORDS, _SENTENCE_STARTERS, _TITLE_CASE_FUNCTION_WORDS
from .patterns import _HAS_DIGIT, _HAS_LETTER, _SEPARATOR


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
        return not (len(lower) >= 7 and lower.endswith(("ly", "ing")))  # "Currently", "Starting"
    return lower not in _TITLE_CASE_FUNCTION_WORDS
