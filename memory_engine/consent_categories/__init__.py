"""Consent categories (docs/memory.md, *Consent categories*): what a memory holds about a person.

* :mod:`.categories`: the six categories, their order of sensitivity, the three masked ones;
* :mod:`.pii`: the PII pass (identifiers, addresses, coordinates, dates of birth, diagnoses,
  medications);
* :mod:`.exemplars` and :mod:`.classifier`: the embedding pass and :func:`classify`, which raises
  the writer's claim by both passes and never lowers it.

Pure functions over text, tags and a vector: the write funnel supplies the vector and the
embedder (memory_engine.services.consent).
"""

from .categories import (
    DEFAULT,
    SENSITIVE,
    SENSITIVITY,
    ConsentCategory,
    is_sensitive,
    rank,
    upgrade,
    validate_categories,
)
from .classifier import ConsentVerdict, ExemplarIndex, IndexCache, classify, embedding_finding
from .pii import Finding, pii_findings

__all__ = [
    "DEFAULT",
    "SENSITIVE",
    "SENSITIVITY",
    "ConsentCategory",
    "ConsentVerdict",
    "ExemplarIndex",
    "Finding",
    "IndexCache",
    "classify",
    "embedding_finding",
    "is_sensitive",
    "pii_findings",
    "rank",
    "upgrade",
    "validate_categories",
]
