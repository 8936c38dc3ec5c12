"""What an extractor finds in a text: :class:`Mention`, the entity kinds, and the key two
names of one entity share (:func:`entity_key`)."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

#: The kinds of entity (``Entity.kind``). ``date`` keys are canonical (2023-05-07, 2023-05, 2023,
#: thursday); ``other`` is a named thing of none of the rest (an event, a disease, a law).
PERSON, ORGANIZATION, PLACE, PRODUCT, DATE, OTHER = "person", "organization", "place", "product", "date", "other"
ENTITY_KINDS: tuple[str, ...] = (PERSON, ORGANIZATION, PLACE, PRODUCT, DATE, OTHER)

#: What a mention is to its text (``Mention.role``): the speaker of a ``Name: text`` line, the
#: subject of the statement (its first name, before the verb), or any other mention.
SPEAKER, SUBJECT, MENTION = "speaker", "subject", "mention"

#: The longest name kept (Entity.name's column).
MAX_NAME_CHARS = 200


@dataclass(frozen=True)
class Mention:
    """A named thing in a text: its words as written (``name``), its kind, where it is
    (``start``/``end``, character offsets; -1 when the extractor does not say) and its role."""

    name: str
    kind: str
    start: int = -1
    end: int = -1
    role: str = MENTION

    @property
    def key(self) -> str:
        return entity_key(self.name, self.kind)


_POSSESSIVE = re.compile(r"['’]s?$")
_EDGE_PUNCTUATION = re.compile(r"^[\W_]+|[\W_]+$")
_LEADING_ARTICLE = re.compile(r"^the\s+")
#: An organisation's legal form at the end of its name: "Acme Corporation", "Acme Corp.", "Acme, Inc."
_LEGAL_FORM = re.compile(r"(?<=\w)[\s,]+(?:inc|incorporated|corp|corporation|co|ltd|limited|llc|plc|gmbh|ag|s\.?a"
                         r"|n\.?v|b\.?v|s\.?a\.?s|s\.?r\.?l|pty)\.?$")


def fold(text: str) -> str:
    """Case- and accent-insensitive text: NFKD, combining marks dropped, casefolded, blanks collapsed."""
    decomposed = unicodedata.normalize("NFKD", text)
    stripped = "".join(c for c in decomposed if not unicodedata.combining(c))
    return " ".join(stripped.casefold().split())


def entity_key(name: str, kind: str = OTHER) -> str:
    """The key of a name within its kind: folded, without a leading "the", a possessive or edge
    punctuation ("The Lisbon office's" -> "lisbon office"), an organisation's without its legal
    form ("Acme Corporation", "Acme Corp." and "Acme, Inc." -> "acme"). A date's key is
    canonical already (the extractor names dates by their canonical form)."""
    key = fold(name)
    if kind != DATE:
        key = _LEADING_ARTICLE.sub("", key)
        key = _POSSESSIVE.sub("", key)
    if kind == ORGANIZATION:
        key = _LEGAL_FORM.sub("", key)
    key = _EDGE_PUNCTUATION.sub("", key)
    return key[:MAX_NAME_CHARS]
