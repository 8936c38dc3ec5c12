"""Facets: the container a memory may belong to (base layer: imports only exceptions).

A facet is 1-128 ASCII letters, digits and ``. _ : / -``, starting with a letter or digit,
compared exactly. A recall or list with a facet sees that facet's memories and the
cross-cutting ones (no facet), never another facet's (docs/memory.md).
"""

from __future__ import annotations

import re
from typing import Any

from memory_engine.exceptions import FacetInvalid

__all__ = ["FACET_PATTERN", "validate_facet"]

FACET_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}")


def validate_facet(value: Any, *, field: str = "facet") -> str | None:
    """The facet as given, None for none (None or ""); else 400 FACET_INVALID."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not FACET_PATTERN.fullmatch(value):
        shown = value if isinstance(value, str) else repr(value)
        raise FacetInvalid(details={"field": field, "value": shown[:200]})
    return value
