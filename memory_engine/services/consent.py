"""Consent categories at write time and their revocation (docs/memory.md, *Consent categories*).

* :func:`consent_classify`: the classifier (memory_engine.consent) with the deployment's embedder:
  the write funnel calls it once per write, with the vector it made (or none when the text's
  content row already had one: the text is embedded here then, unless the embedder just failed);
* :func:`consent_expiry_cap`: the latest expiry a memory of a category may have in a store
  (the store's ``consent_expiry_days``, else CONSENT_EXPIRY_DAYS for its tier);
* :func:`consent_revoke`: a subject withdraws consent for categories: their memories of those
  categories are erased, with a receipt (memory_engine.services.erasure).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from memory_engine.conf import engine_settings, reloads_with_settings
from memory_engine.consent import SENSITIVITY, ConsentVerdict, IndexCache, classify, validate_categories
from memory_engine.exceptions import ValidationFailed
from memory_engine.models import MemoryStore
from memory_engine.providers.embeddings import EmbeddingError, get_embedding_provider

logger = logging.getLogger("memory_engine.consent")

_indexes = IndexCache()
reloads_with_settings(_indexes.clear)


def consent_min_similarity() -> float:
    return float(engine_settings.CONSENT_EMBEDDING_MIN_SIMILARITY)


def validate_claim(value: Any) -> str | None:
    """A writer's ``consent_category``: one of the categories, or None (no claim)."""
    if value is None:
        return None
    if isinstance(value, str) and value in SENSITIVITY:
        return value
    raise ValidationFailed(f"`consent_category` must be one of {', '.join(SENSITIVITY)}.",
                           details={"field": "consent_category"})


def consent_classify(*, text: str, claim: str | None = None, tags: dict[str, Any] | None = None,
                     extra: Sequence[str | None] = (), vector: Sequence[float] | None = None,
                     embed: bool = True) -> ConsentVerdict:
    """The category of a memory being written (memory_engine.consent.classify). ``vector``: the
    text's vector when the caller has it; without one the text is embedded here when ``embed``
    (False: the embedder just failed for this text, so the embedding pass is skipped). Never
    raises for an embedder failure: the PII pass and the claim still decide."""
    provider = get_embedding_provider()
    if provider is None:
        return classify(text, claim=claim, tags=tags, extra=extra, embedding_skipped="embedding_not_configured")
    try:
        index = _indexes.get(f"{provider.model_name}/{provider.dimensions}", provider.embed_documents)
        if vector is None:
            if not embed:
                return classify(text, claim=claim, tags=tags, extra=extra, embedding_skipped="embedding_failed")
            vector = provider.embed_documents([text])[0]
    except EmbeddingError as exc:
        logger.warning("consent classifier: the embedding pass is skipped: %s", exc)
        return classify(text, claim=claim, tags=tags, extra=extra, embedding_skipped="embedding_failed")
    return classify(text, claim=claim, tags=tags, extra=extra, vector=vector, index=index,
                    min_similarity=consent_min_similarity())


def consent_expiry_days(store: MemoryStore, category: str) -> float | None:
    """Days a memory of ``category`` may live in ``store``: the store's own entry when it has
    one (null: no limit), else CONSENT_EXPIRY_DAYS for the store's tier; None: no limit."""
    own = store.consent_expiry_days or {}
    if category in own:
        return own[category]
    return engine_settings.CONSENT_EXPIRY_DAYS.get(category, {}).get(store.tier)


def consent_expiry_cap(store: MemoryStore, category: str, expires_at: datetime | None,
                       now: datetime) -> datetime | None:
    """``expires_at``, or the category's limit in ``store`` from ``now`` when that comes first."""
    days = consent_expiry_days(store, category)
    if days is None:
        return expires_at
    cap = now + timedelta(days=days)
    return cap if expires_at is None or expires_at > cap else expires_at


def validate_consent_expiry_days(value: Any) -> None:
    """A store's ``consent_expiry_days``: ``{category: days}`` with days a positive number or null."""
    if not isinstance(value, dict):
        raise ValidationFailed("`consent_expiry_days` must be an object of consent categories to days.",
                               details={"field": "consent_expiry_days"})
    for category, days in value.items():
        try:
            validate_categories([category])
        except ValueError:
            raise ValidationFailed(f"`consent_expiry_days` names an unknown consent category: {category!r}.",
                                   details={"field": "consent_expiry_days", "category": str(category)[:50]}) from None
        if days is not None and (isinstance(days, bool) or not isinstance(days, (int, float)) or not days > 0):
            raise ValidationFailed("`consent_expiry_days` values must be a positive number of days, or null.",
                                   details={"field": "consent_expiry_days", "category": category})


__all__ = ["consent_classify", "consent_expiry_cap", "consent_expiry_days", "consent_min_similarity",
           "validate_claim", "validate_consent_expiry_days"]
