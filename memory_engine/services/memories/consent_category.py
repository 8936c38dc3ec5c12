"""A write's consent category (docs/memory.md, *Consent categories*): the funnel's step between
the vector and the transaction.

* :func:`consent_of_write`: the classifier (memory_engine.consent_categories) once per write, on the vector
  the funnel made or the one the text's content row holds (never embedding the text again);
* :func:`consent_classify`: the same for any text, embedding it when no vector is given;
* :func:`consent_outcome`: the category a write leaves on its memory, raised to that of the
  memory a skip keeps or a supersede retires;
* :func:`consent_expiry_cap`: the latest expiry a memory of a category may have in a store (the
  store's ``consent_expiry_days``, else CONSENT_EXPIRY_DAYS for its tier).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from memory_engine.conf import engine_settings, reloads_with_settings
from memory_engine.consent_categories import SENSITIVITY, ConsentVerdict, ExemplarIndex, IndexCache, classify, upgrade
from memory_engine.exceptions import LifetimeInvalid, ValidationFailed
from memory_engine.models import MemoryStore
from memory_engine.providers.embeddings import EmbeddingError, get_embedding_provider, refresh_embedding_provider

__all__ = ["consent_classify", "consent_expiry_cap", "consent_expiry_days", "consent_index", "consent_min_similarity",
           "consent_of_write", "consent_outcome", "validate_claim", "validate_consent_expiry_days"]

logger = logging.getLogger("memory_engine.consent_categories")

_indexes = IndexCache()
# An index is kept per embedder for the process; which one a stored vector is compared with is
# decided again after the settings change (the embedder may be another).
reloads_with_settings(_indexes.forget_latest)


def consent_min_similarity() -> float:
    return float(engine_settings.CONSENT_EMBEDDING_MIN_SIMILARITY)


def consent_index() -> ExemplarIndex | None:
    """The exemplar centroids for the deployment's embedder (made on first use, kept until the
    settings change); None without an embedder. Raises EmbeddingError when it cannot embed them."""
    provider = get_embedding_provider()
    if provider is None:
        return None
    model = f"{type(provider).__module__}.{type(provider).__qualname__}:{provider.model_name}/{provider.dimensions}"
    if _indexes.has(model):
        return _indexes.get(model, provider.embed_documents)
    index = _indexes.get(model, provider.embed_documents)
    # Embedding the exemplars took a while: the model registry is read again now, as it is due,
    # rather than by the next write (whose round trips it would add to).
    refresh_embedding_provider()
    return index


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
    """The category of a memory being written (memory_engine.consent_categories.classify). ``vector``: the
    text's vector when the caller has it; without one the text is embedded here when ``embed``
    (False: the embedder just failed for this text, so the embedding pass is skipped). Never
    raises for an embedder failure: the PII pass and the claim still decide."""
    provider = get_embedding_provider()
    if provider is None:
        return classify(text, claim=claim, tags=tags, extra=extra, embedding_skipped="embedding_not_configured")
    if vector is None and not embed:
        return classify(text, claim=claim, tags=tags, extra=extra, embedding_skipped="embedding_failed")
    try:
        index = consent_index()
        if vector is None:
            vector = provider.embed_documents([text])[0]
    except EmbeddingError as exc:
        logger.warning("consent classifier: the embedding pass is skipped: %s", exc)
        return classify(text, claim=claim, tags=tags, extra=extra, embedding_skipped="embedding_failed")
    return classify(text, claim=claim, tags=tags, extra=extra, vector=vector, index=index,
                    min_similarity=consent_min_similarity())


def consent_of_write(*, text: str, claim: str | None, tags: dict[str, Any] | None, extra: Sequence[str | None],
                     vector: Sequence[float] | None, stored_vector: Sequence[float] | None) -> ConsentVerdict:
    """The category of a write: ``vector`` is the text's, just made by the embedder (None when it
    failed, or when the content row holds one: ``stored_vector``). With a stored vector the
    centroids are those this process used last, so a restatement asks neither the embedder nor the
    model registry (the funnel's skip costs no round trip); the first write of a process builds them.
    A vector of another dimension than the centroids' (a model switch under way) gets no embedding
    pass."""
    if vector is not None or stored_vector is None:
        return consent_classify(text=text, claim=claim, tags=tags, extra=extra, vector=vector, embed=False)
    index = _indexes.latest()
    if index is None:
        try:
            index = consent_index()
        except EmbeddingError as exc:
            logger.warning("consent classifier: the embedding pass is skipped: %s", exc)
            return classify(text, claim=claim, tags=tags, extra=extra, embedding_skipped="embedding_failed")
        if index is None:
            return classify(text, claim=claim, tags=tags, extra=extra, embedding_skipped="embedding_not_configured")
    return classify(text, claim=claim, tags=tags, extra=extra, vector=stored_vector, index=index,
                    min_similarity=consent_min_similarity())


def consent_outcome(verdict: ConsentVerdict, *, earlier: str | None) -> tuple[str, dict[str, Any]]:
    """The category a write leaves on its memory and what its assertion records (``details.consent``):
    the verdict's, raised to ``earlier`` (the category of the memory a skip keeps or a supersede
    retires) when that is more sensitive."""
    category = upgrade(verdict.category, earlier)
    details = {**verdict.as_details(), "category": category}
    if category != verdict.category:
        details["kept_from_memory"] = earlier
    return category, details


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
    """A store's ``consent_expiry_days``: ``{category: days}`` with days a positive number or null
    (400 LIFETIME_INVALID)."""
    if not isinstance(value, dict):
        raise LifetimeInvalid("`consent_expiry_days` must be an object of consent categories to days.",
                              details={"field": "consent_expiry_days"})
    for category, days in value.items():
        if category not in SENSITIVITY:
            raise LifetimeInvalid(f"`consent_expiry_days` names an unknown consent category: {str(category)[:50]!r}.",
                                  details={"field": "consent_expiry_days", "category": str(category)[:50]})
        if days is not None and (isinstance(days, bool) or not isinstance(days, (int, float)) or not days > 0):
            raise LifetimeInvalid("`consent_expiry_days` values must be a positive number of days, or null.",
                                  details={"field": "consent_expiry_days", "category": category})
