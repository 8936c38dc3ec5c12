"""Comparing two texts' details, absorbing differences that are only wording."""

from __future__ import annotations

import re

from .extractor import extract_details
from .lexicon import _ARTICLES
from .model import _KIND_FIELDS, DETAIL_KINDS, DetailChange, Details
from .names import _stem, _strip_clitic
from .patterns import _HAS_DIGIT, _SEPARATOR


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
        if kind == "order":
            swapped = _swapped(old, new)
            if swapped:
                changes.append(DetailChange(kind="order", old=tuple(_order_text(o) for o in swapped[0]),
                                            new=tuple(_order_text(o) for o in swapped[1])))
            continue
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


def _swapped(old: Details, new: Details) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]] | None:
    """The pairs the new text reverses ("trains over planes" -> "planes over trains"); a pair
    worded otherwise, or only in one text, is no change."""
    reversed_pairs = sorted(o for o in old.orders if (o[2], o[1], o[0]) in new.orders and o not in new.orders)
    if not reversed_pairs:
        return None
    return reversed_pairs, [(o[2], o[1], o[0]) for o in reversed_pairs]


def _order_text(order: tuple[str, str, str]) -> str:
    first, connector, second = order
    return f"from {first} to {second}" if connector == "from-to" else f"{first} {connector} {second}"


def _polarity(negated: bool) -> str:
    return "negated" if negated else "affirmative"


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
    for one_sided, other_side in ((removed, new), (added, old)):
        if not one_sided:
            continue
        vocabulary = _vocabulary(other_side)
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
