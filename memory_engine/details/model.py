"""The result types of detail extraction: :class:`Details` and :class:`DetailChange`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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
    "order",
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
    #: Two things set against each other, in their order ("trains over planes" ->
    #: ("trains", "over", "planes")): only their reversal is a change.
    orders: frozenset[tuple[str, str, str]] = frozenset()
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
