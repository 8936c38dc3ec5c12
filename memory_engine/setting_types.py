"""The declared types of ``MEMORY_ENGINE`` settings (memory_engine.conf.TYPES).

A coercer takes the configured value and returns it in its declared type, or raises
:class:`InvalidSetting` saying what was expected: ``integer("30")`` is ``30``, ``boolean("false")``
is False, ``optional(integer)(None)`` is None.
"""

from __future__ import annotations

import copy
import math
import re
import reprlib
from collections.abc import Callable
from typing import Any


class InvalidSetting(ValueError):
    """A value that does not fit its declared type; ``path`` leads to it inside a nested dict."""

    def __init__(self, expected: str, value: Any, path: tuple[str, ...] = ()) -> None:
        super().__init__(expected)
        self.expected, self.value, self.path = expected, value, path

    def describe(self, name: str) -> str:
        path = (name, *self.path)
        where = "MEMORY_ENGINE" + "".join(f"[{key!r}]" for key in path)
        # Never echo a credential into a log.
        shown = type(self.value).__name__ if "KEY" in path[-1].upper() else reprlib.repr(self.value)
        return f"{where} must be {self.expected}; got {shown}."


Coerce = Callable[[Any], Any]


def integer(value: Any) -> int:
    """An int, an integral float or a numeric string (from the environment); never a bool."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise InvalidSetting("an integer", value)


def number(value: Any) -> int | float:
    """An int or a float as given (so messages keep ``300s``), or a numeric string; never a bool or NaN."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value):
        return value
    if isinstance(value, str):
        try:
            return integer(value)
        except InvalidSetting:
            try:
                parsed = float(value.strip())
            except ValueError:
                pass
            else:
                if not math.isnan(parsed):
                    return parsed
    raise InvalidSetting("a number", value)


_TRUE, _FALSE = {"true", "yes", "on", "1"}, {"false", "no", "off", "0", ""}


def boolean(value: Any) -> bool:
    """True/False, 0/1, or a string such as "false" (which ``bool()`` would call true)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise InvalidSetting("True or False", value)


def probability(value: Any) -> int | float:
    """A number in [0, 1]."""
    result = number(value)
    if not 0 <= result <= 1:
        raise InvalidSetting("a number from 0 to 1", value)
    return result


def number_map(value: Any) -> dict[str, int | float]:
    """A dict of names to numbers (a model's coefficients)."""
    items = mapping(value)
    out = {}
    for key, item in items.items():
        try:
            out[str(key)] = number(item)
        except InvalidSetting:
            raise InvalidSetting("a number", item, (str(key),)) from None
    return out


def text(value: Any) -> str:
    if isinstance(value, str):
        return value
    raise InvalidSetting("a string", value)


def string_list(value: Any) -> list[str]:
    """A list (or tuple/set) of strings; None is empty. A bare string is refused: it would be
    read as its characters."""
    if value is None:
        return []
    if isinstance(value, (list, tuple, set, frozenset)) and all(isinstance(item, str) for item in value):
        return list(value)
    raise InvalidSetting("a list of strings", value)


def mapping(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    raise InvalidSetting("a dict", value)


def optional(coerce: Coerce, *, none: Any = None) -> Coerce:
    """``coerce``, or ``none`` for None."""

    def coerce_optional(value: Any) -> Any:
        if value is None:
            return copy.copy(none)
        try:
            return coerce(value)
        except InvalidSetting as exc:
            if exc.path:  # a key inside a nested dict: None is not what it lacks
                raise
            raise InvalidSetting(f"{exc.expected} or None", value) from None

    return coerce_optional


def one_of(*choices: str) -> Coerce:
    """One of ``choices``, in any case (read back lower-case)."""

    def coerce_choice(value: Any) -> str:
        if isinstance(value, str) and value.strip().lower() in choices:
            return value.strip().lower()
        raise InvalidSetting("one of " + ", ".join(repr(c) for c in choices), value)

    return coerce_choice


def names_of(*choices: str) -> Coerce:
    """A list of names from ``choices``, in any case (read back upper-case)."""

    def coerce_names(value: Any) -> list[str]:
        names = [name.strip().upper() for name in string_list(value)]
        if any(name not in choices for name in names):
            raise InvalidSetting("a list of " + ", ".join(choices), value)
        return names

    return coerce_names


_RATE = re.compile(r"\s*\d+\s*/[smhd][a-z]*")


def rate(value: Any) -> str:
    """A DRF throttle rate: ``"20/min"`` (requests / s, m, h or d)."""
    if isinstance(value, str) and _RATE.fullmatch(value):
        return value
    raise InvalidSetting('a rate such as "20/min"', value)


def section(types: dict[str, Coerce], *, any_case: bool = False) -> Coerce:
    """A nested dict whose known keys are coerced by ``types``; other keys are kept as given
    (``W020`` names them). ``any_case``: keys are read upper-case and empty values dropped."""

    def coerce_section(value: Any) -> dict[str, Any]:
        value = dict(mapping(value))
        if any_case:
            value = {str(key).upper(): item for key, item in value.items() if item not in (None, "")}
        for key, coerce in types.items():
            if key in value:
                try:
                    value[key] = coerce(value[key])
                except InvalidSetting as exc:
                    raise InvalidSetting(exc.expected, exc.value, (key, *exc.path)) from None
        return value

    return coerce_section
