"""Named things in text: who and what a fact is about (base layer: standard library only).

:mod:`.model` (the :class:`Mention` type, the entity kinds and the key two names of one entity
share), :mod:`.vocabulary` (word lists), :mod:`.rules` (the rule extractor) and
:mod:`.statements` (a statement's subject, attribute and value, for updates found by subject).
Import from the package.
"""

from __future__ import annotations

from .model import (
    DATE,
    ENTITY_KINDS,
    MAX_NAME_CHARS,
    MENTION,
    ORGANIZATION,
    OTHER,
    PERSON,
    PLACE,
    PRODUCT,
    SPEAKER,
    SUBJECT,
    Mention,
    entity_key,
    fold,
)
from .rules import canonical_date, extract_mentions
from .statements import Statement, ValueChange, changed_value, statement, subject_of, value_update

__all__ = [
    "DATE",
    "ENTITY_KINDS",
    "MAX_NAME_CHARS",
    "MENTION",
    "ORGANIZATION",
    "OTHER",
    "PERSON",
    "PLACE",
    "PRODUCT",
    "SPEAKER",
    "SUBJECT",
    "Mention",
    "Statement",
    "ValueChange",
    "canonical_date",
    "changed_value",
    "entity_key",
    "extract_mentions",
    "fold",
    "statement",
    "subject_of",
    "value_update",
]
