"""Changed-detail extraction for the memory write funnel.

Sentence embedders are poor at telling a restatement from an update: the default
model scores "The staging database runs PostgreSQL 15 on a host called db-stage-2."
against the same sentence with ``16`` at cosine 0.968, so a cosine-only dedup would
skip a real update. Before the funnel decides "skip", it compares the incoming text
with the matched memory's text on the details that make a fact true or false:
numbers, dates, times, quantities with units, currency amounts, versions, names and
identifiers, and negation polarity.

The package is pure Python (standard library only) and deterministic. Every pattern
is anchored at token starts and free of nested quantifiers, so extraction is linear
in the length of the text.

Precision matters as much as recall: a restatement that only reorders clauses or
rephrases must produce *no* change, otherwise it would wrongly supersede the
memory. Each detail is therefore normalised to a canonical form ("fifteen",
"15.0" -> "15"; "3pm" -> "15:00"; "14 days" -> "2 week"; "$1,200" -> "1200 USD"),
and a few cross-checks in :func:`compare_details` absorb differences that are only
a matter of wording (a name whose capitalisation changed, "a server" vs "one
server", "version 15" vs "15").

Modules: :mod:`.model` (the result types), :mod:`.lexicon` (normalisation and
vocabularies), :mod:`.patterns` (the compiled patterns), :mod:`.numbers` (number words
and canonical values), :mod:`.names` (names, identifiers, negation cues),
:mod:`.extractor` (the passes) and :mod:`.compare`. Import from the package.
"""

from __future__ import annotations

from .compare import changed_details, compare_details
from .extractor import extract_details
from .lexicon import normalize_text
from .model import DETAIL_KINDS, DetailChange, Details

__all__ = [
    "DETAIL_KINDS",
    "DetailChange",
    "Details",
    "changed_details",
    "compare_details",
    "extract_details",
    "normalize_text",
]
