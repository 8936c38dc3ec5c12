"""Consent categories after the write (docs/memory.md, *Consent categories*); at write time the
funnel classifies (memory_engine.services.memories.consent_category).

* :func:`consent_revoke`: a subject withdraws consent for categories: their memories of those
  categories are erased, with a receipt (memory_engine.services.erasure);
* :func:`consent_reclassify`: the classifier over memories already stored (those written before
  consent categories existed, or after the exemplars or patterns improved), raising only.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from django.db import connection, transaction

from memory_engine.consent_categories import SENSITIVITY, classify, rank, validate_categories
from memory_engine.exceptions import ValidationFailed
from memory_engine.models import Document, ErasureReceipt, Memory, MemoryStore, Project
from memory_engine.models.memories import Tier
from memory_engine.policy import PURGE, Principal, check_legal_hold, require, visible
from memory_engine.providers.embeddings import EmbeddingError
from memory_engine.subjects import validate_subject

from .erasure import erase_rows
from .memories.consent_category import consent_index, consent_min_similarity

logger = logging.getLogger("memory_engine.consent_categories")


def validate_revoked_categories(value: Any) -> list[str]:
    """A revocation's ``categories``: a non-empty list of consent categories (sorted, no repeats)."""
    if not isinstance(value, list) or not value:
        raise ValidationFailed("`categories` must be a non-empty list of consent categories.",
                               details={"field": "categories"})
    try:
        return sorted(set(validate_categories(value)), key=rank)
    except (ValueError, TypeError):
        raise ValidationFailed(f"`categories` may name only {', '.join(SENSITIVITY)}.",
                               details={"field": "categories"}) from None


@transaction.atomic
def consent_revoke(*, project: Project, caller: Principal, subject_external_id: str,
                   categories: list[str]) -> ErasureReceipt:
    """The subject withdraws consent for ``categories``: every memory of those categories in the
    subject's (user-tier) store, live or not, is erased as a subject erasure erases it (contents,
    revisions, ledger text, the generations they came from; memory_engine.services.erasure), and
    the receipt is stored and returned (``selector_kind`` ``consent_categories+subject_external_id``,
    the selector kept only as its HMAC).

    As its caller (memory_engine.policy): a subject store outside the caller's reach is as none
    (an empty receipt, like an unknown subject); one it sees needs ``purge`` (403 GRANT_REQUIRED).
    409 LEGAL_HOLD, naming them, when one of the memories is held: nothing is erased then.
    400 SUBJECT_INVALID / VALIDATION_ERROR for a bad subject or category list."""
    validate_subject(subject_external_id, field="subject_external_id")
    revoked = validate_revoked_categories(categories)
    store = visible(caller, MemoryStore.objects.filter(project=project, tier=Tier.USER,
                                                       subject_external_id=subject_external_id), None).first()
    memories = Memory.objects.none()
    if store is not None:
        require(caller, PURGE, store)
        memories = Memory.objects.filter(store=store, store__project=project, consent_category__in=revoked)
    check_legal_hold(memories=memories)
    return erase_rows(project=project, principal=caller.label, documents=Document.objects.none(),
                      selector={"subject_external_id": subject_external_id, "consent_categories": revoked},
                      memories=memories)


#: Memories read per query by consent_reclassify.
RECLASSIFY_BATCH = 500

RECLASSIFY_SQL = """
SELECT m.id, m.consent_category, m.title, m.summary, m.tags, c.text, c.embedding::text
FROM memory_engine_memory m JOIN memory_engine_memorycontent c ON c.id = m.content_id
WHERE m.id > %(after)s {scope} ORDER BY m.id LIMIT %(limit)s"""


def consent_reclassify(*, store_ids: Sequence[str] | None = None, project_id: str | None = None) -> dict[str, int]:
    """Run the classifier over stored memories (all of them, or those of ``store_ids`` or of
    ``project_id``; live or not), each with its current category as the claim and its stored
    vector for the embedding pass: a memory's category is raised where a pass places it higher,
    never lowered. Expiries stay as they are. Returns how many memories were read and how many
    were raised into each category (``manage.py memory_engine_classify_consent``)."""
    scope, params = "", dict[str, Any]()
    if store_ids is not None:
        scope, params = "AND m.store_id = ANY(%(stores)s)", {"stores": list(store_ids)}
    elif project_id is not None:
        scope, params = "AND m.project_id = %(project)s", {"project": project_id}
    try:
        index = consent_index()
    except EmbeddingError as exc:
        logger.warning("consent reclassification without the embedding pass: %s", exc)
        index = None
    counts: dict[str, int] = {"read": 0}
    after = ""
    while True:
        with connection.cursor() as cursor:
            cursor.execute(RECLASSIFY_SQL.format(scope=scope), {**params, "after": after, "limit": RECLASSIFY_BATCH})
            rows = cursor.fetchall()
        if not rows:
            return counts
        for memory_id, current, title, summary, tags, text, vector_text in rows:
            vector = [float(v) for v in vector_text.strip("[]").split(",")] if vector_text else None
            verdict = classify(text, claim=current, tags=tags if isinstance(tags, dict) else None,
                               extra=(title, summary), vector=vector, index=index,
                               min_similarity=consent_min_similarity())
            if verdict.category != current:
                Memory.objects.filter(pk=memory_id, consent_category=current).update(
                    consent_category=verdict.category)
                counts[verdict.category] = counts.get(verdict.category, 0) + 1
        counts["read"] += len(rows)
        after = rows[-1][0]


__all__ = ["consent_reclassify", "consent_revoke", "validate_revoked_categories"]
