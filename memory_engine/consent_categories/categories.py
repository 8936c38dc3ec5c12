"""The consent categories a memory carries and their order of sensitivity (docs/memory.md,
*Consent categories*).

A memory's category is the most sensitive of what its writer claimed and what the classifier
found (:func:`upgrade`): a pass may raise it, nothing lowers it. The three sensitive categories
are masked on the memory map and are what a consent revocation usually names.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import models

from memory_engine.conf import CONSENT_CATEGORY_NAMES


class ConsentCategory(models.TextChoices):
    """What a memory holds about a person, from least to most sensitive."""

    CONTEXT = "memory:context", "context: the task, the work, the situation at hand"
    PREFERENCES = "memory:preferences", "preferences: likes, dislikes, ways of working"
    HISTORY = "memory:history", "history: what happened before, past events and interactions"
    LOCATION = "memory:location", "location: addresses, coordinates, whereabouts"
    IDENTITY = "memory:identity", "identity: identity numbers, bank accounts, dates of birth"
    HEALTH = "memory:health", "health: diagnoses, medications, symptoms, treatment"


#: Least to most sensitive. Health first among the sensitive ones (a special category of personal
#: data in GDPR art. 9), then identity (identifiers a person cannot change, the means of identity
#: fraud), then location (where someone is or lives); among the others, a person's past says more
#: about them than their tastes, and their tastes more than the task at hand.
SENSITIVITY: tuple[str, ...] = (
    ConsentCategory.CONTEXT,
    ConsentCategory.PREFERENCES,
    ConsentCategory.HISTORY,
    ConsentCategory.LOCATION,
    ConsentCategory.IDENTITY,
    ConsentCategory.HEALTH,
)
#: Masked on the memory map on every serve, whoever asks.
SENSITIVE: frozenset[str] = frozenset({ConsentCategory.LOCATION, ConsentCategory.IDENTITY, ConsentCategory.HEALTH})
#: A memory nothing claimed and no pass placed.
DEFAULT = ConsentCategory.CONTEXT

_RANK = {category: rank for rank, category in enumerate(SENSITIVITY)}


def rank(category: str) -> int:
    """The category's place in :data:`SENSITIVITY` (0: least sensitive); KeyError for an unknown one."""
    return _RANK[category]


def upgrade(*categories: str | None) -> str:
    """The most sensitive of ``categories`` (None is no claim); :data:`DEFAULT` when none is given."""
    given = [category for category in categories if category is not None]
    return max(given, key=rank) if given else DEFAULT


def is_sensitive(category: str) -> bool:
    return category in SENSITIVE


def validate_categories(values: Iterable[str]) -> list[str]:
    """The known categories among ``values``; ValueError naming the first unknown one."""
    out = []
    for value in values:
        if value not in _RANK:
            raise ValueError(value)
        out.append(value)
    return out


# The settings name the categories without importing this module (a lower layer): the same names.
assert CONSENT_CATEGORY_NAMES == SENSITIVITY, (CONSENT_CATEGORY_NAMES, SENSITIVITY)
