"""The search knobs, each declared once (:data:`SEARCH_KNOBS`): name, type, range, default,
setting and doc. The REST request's fields, the admin playground's, the search's and a transform
config's checks and the ``SEARCH_*`` settings' rows (:meth:`Knob.setting_row`) derive from here."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from memory_engine.setting_types import InvalidSetting, boolean, integer, number

from .declaration import Setting


def _plain(bound: float) -> str:
    return f"{bound:g}"


@dataclass(frozen=True)
class Knob:
    """One search knob, declared once: its type (bool, int or float), its range (``low`` / ``high``,
    None: unbounded; ``low_open``: ``low`` itself is out, for a knob without ``high``), its default
    and what it does.

    ``setting`` names the ``MEMORY_ENGINE`` key whose value a search runs with when the request
    leaves the knob unset (``default`` is then that setting's default); without one, ``default``
    is the request's own. ``request``: a search request may set it; ``config``: a transform
    config's ``search`` object may (memory_engine.ranking_knobs). ``unset`` says what an unset
    request value means where the default alone does not. Derived from here: the REST request's
    fields (memory_engine.api.search), the admin playground's (memory_engine.admin.console), the
    search's checks (selectors.search.validation), the config's (ranking_knobs) and the settings'
    (:meth:`coerce`, and their rows of docs/settings.md)."""

    name: str
    kind: type
    doc: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    setting: str | None = None
    default: Any = None
    request: bool = True
    config: bool = False
    unset: str = ""

    @property
    def nullable(self) -> bool:
        """A request may leave it unset (None): the setting's value, or no such filter, applies."""
        return self.setting is not None or self.default is None

    def fits(self, value: Any) -> bool:
        """``value`` is of the knob's type (an int is a number too, a bool never is) and in range."""
        if self.kind is bool:
            return isinstance(value, bool)
        if isinstance(value, bool) or not isinstance(value, int if self.kind is int else (int, float)):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return math.isfinite(value) and (self.high is None or value <= self.high)

    @property
    def bounds(self) -> str:
        """The range in a few characters: ``0–1``, ``> 0``, ``≥ 0``; "" when unbounded."""
        if self.low is not None and self.high is not None:
            return f"{_plain(self.low)}–{_plain(self.high)}"
        if self.low is not None:
            return f"{'>' if self.low_open else '≥'} {_plain(self.low)}"
        return "" if self.high is None else f"≤ {_plain(self.high)}"

    @property
    def expected(self) -> str:
        """What a value must be, in words: ``a number > 0``, ``an integer from 1 to 100``."""
        if self.kind is bool:
            return "true or false"
        noun = "an integer" if self.kind is int else "a number"
        if self.low is not None and self.high is not None:
            return f"{noun} from {_plain(self.low)} to {_plain(self.high)}"
        return f"{noun} {self.bounds}".rstrip()

    @property
    def help_text(self) -> str:
        """The knob's line in the REST schema: what it does, its range, what unset means."""
        if self.unset:
            unset = self.unset
        elif self.setting is not None:
            shown = f"{self.default}".lower() if self.kind is bool else f"{self.default}"
            config = "a generation's config knob, else " if self.config else ""
            unset = f"default: {config}the {self.setting} setting ({shown})"
        else:
            unset = f"default: {self.default}"
        return f"{self.doc}: {self.expected}; {unset}." if self.kind is not bool else f"{self.doc}; {unset}."

    def coerce(self, value: Any) -> Any:
        """The setting's coercer: the knob's type (a numeric or boolean string too) and range."""
        coerced = {bool: boolean, int: integer, float: number}[self.kind](value)
        if not self.fits(coerced):
            raise InvalidSetting(self.expected, value)
        return coerced

    def setting_row(self, meaning: str) -> Setting:
        """The knob's setting: its default, type and range from here, ``meaning`` for docs/settings.md."""
        assert self.setting is not None
        kind = {bool: "bool", int: "int", float: "number"}[self.kind] + (f" ({self.bounds})" if self.bounds else "")
        shown = f"`{self.default}`" if self.kind is bool else f"{self.default}"
        return Setting(self.setting, self.default, self.coerce, kind, shown, meaning)


#: The knobs of a search, by name (docs/retrieval.md); the first nine a request may set.
SEARCH_KNOBS: dict[str, Knob] = {knob.name: knob for knob in (
    Knob("limit", int, "How many hits to return", low=1, high=100, default=10),
    Knob("min_similarity", float, "Cosine floor for vector candidates (they are dropped before the fusion)",
         low=-1, high=1, unset="unset: no floor"),
    Knob("min_relevance", float, "Keep only hits whose relevance reaches this; the order stays the ranking's",
         low=0, high=1, setting="SEARCH_MIN_RELEVANCE", default=0.35,
         unset="unset: keep every hit, each marked `relevant` at the SEARCH_MIN_RELEVANCE setting"),
    Knob("rrf_k", float, "RRF constant k", low=0, low_open=True, setting="SEARCH_RRF_K", default=5, config=True),
    Knob("recency_half_life_days", float, "Recency half-life in days of memories whose store and tier name none "
         "(0: no decay)", low=0, default=0),
    Knob("vector_weight", float, "Weight of the vector channel in the fusion", low=0, high=100,
         setting="SEARCH_VECTOR_WEIGHT", default=1.0, config=True),
    Knob("lexical_weight", float, "Weight of the lexical channel in the fusion", low=0, high=100,
         setting="SEARCH_LEXICAL_WEIGHT", default=1.25, config=True),
    Knob("dedupe_documents", bool, "One best chunk per document", setting="SEARCH_DEDUPE_DOCUMENTS", default=False,
         config=True),
    Knob("mmr", bool, "Maximal marginal relevance over the stored vectors", setting="SEARCH_MMR", default=False,
         config=True),
    Knob("authority_weight", float, "The authority prior's weight", low=0, high=1,
         setting="SEARCH_AUTHORITY_WEIGHT", default=0.0, request=False, config=True),
    Knob("boosts", bool, "Bounded boosts: recency by class", setting="SEARCH_BOOSTS", default=False,
         request=False, config=True),
    Knob("corroboration_support", float, "Corroboration: each supporting link's boost", low=0, high=1,
         setting="SEARCH_CORROBORATION_SUPPORT", default=0.0, request=False, config=True),
    Knob("corroboration_contradict", float, "Corroboration: each contradicting link's penalty", low=0, high=1,
         setting="SEARCH_CORROBORATION_CONTRADICT", default=0.0, request=False, config=True),
    Knob("corroboration_cap", int, "Corroboration: most links of each kind that count", low=1, high=100,
         setting="SEARCH_CORROBORATION_CAP", default=3, request=False, config=True),
    Knob("rerank", bool, "The rerank provider's order of the fused top, whenever RERANK configures one",
         default=True, request=False, config=True),
)}

