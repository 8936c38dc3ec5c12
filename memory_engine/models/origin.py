"""Where a document version or a memory comes from (docs/memory.md, *Provenance and lineage*)."""

from __future__ import annotations

from django.db import models


class Provenance(models.TextChoices):
    """Stated by its writer, inferred (a model read it out of a conversation or a document), or unknown."""

    STATED = "stated"
    INFERRED = "inferred"
    UNKNOWN = "unknown"


class Lineage(models.TextChoices):
    """Written here (native), brought from elsewhere (imported), or derived from other records."""

    NATIVE = "native"
    IMPORTED = "imported"
    DERIVED = "derived"
