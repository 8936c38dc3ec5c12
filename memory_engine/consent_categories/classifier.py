"""The consent classifier: the writer's claim, raised by the PII pass and the embedding pass.

:func:`classify` takes the text (and the strings a memory carries besides it), the claim, and,
for the embedding pass, the text's vector and an :class:`ExemplarIndex`. It returns a
:class:`ConsentVerdict`: the category (the most sensitive of the claim and every finding: a pass
may raise a claim, nothing lowers it) and the findings, by pass and pattern, for the ledger.

The embedding pass compares the vector with one centroid per category, built from the exemplars
(:mod:`.exemplars`) with the same embedder, and names the nearest when its cosine reaches
``min_similarity``. Measured on all-MiniLM-L6-v2 with ``bench/consent.py`` (docs/benchmarks.md,
*Consent categories*): centroids beat a 5-nearest-exemplar vote, and no margin over the second
category paid for what it lost.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .categories import SENSITIVITY, rank, upgrade
from .exemplars import EXEMPLARS
from .pii import Finding, pii_findings

Embed = Callable[[list[str]], Sequence[Sequence[float]]]


@dataclass(frozen=True)
class ExemplarIndex:
    """One unit-length centroid per category, from the exemplars embedded by one model."""

    model: str
    categories: tuple[str, ...]
    centroids: np.ndarray

    @classmethod
    def build(cls, embed: Embed, *, model: str, exemplars: dict[str, Sequence[str]] | None = None) -> ExemplarIndex:
        by_category: dict[str, Sequence[str]] = dict(exemplars if exemplars is not None else EXEMPLARS)
        categories = tuple(category for category in SENSITIVITY if by_category.get(category))
        texts = [text for category in categories for text in by_category[category]]
        vectors = _unit(np.asarray(embed(texts), dtype=np.float32))
        rows, start = [], 0
        for category in categories:
            count = len(by_category[category])
            rows.append(vectors[start:start + count].mean(axis=0))
            start += count
        return cls(model=model, categories=categories, centroids=_unit(np.stack(rows)))

    def nearest(self, vector: Sequence[float]) -> tuple[str, float] | None:
        """The category whose centroid is nearest ``vector`` and its cosine; None for a vector of
        another dimension or without direction."""
        array = np.asarray(vector, dtype=np.float32)
        norm = float(np.linalg.norm(array))
        if array.shape != (self.centroids.shape[1],) or not norm:
            return None
        cosines = self.centroids @ (array / norm)
        best = int(np.argmax(cosines))
        return self.categories[best], float(cosines[best])


def _unit(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return matrix / np.where(norms == 0, 1, norms)


@dataclass(frozen=True)
class ConsentVerdict:
    """The category a memory gets, what its writer claimed and why it differs."""

    category: str
    claimed: str | None
    findings: list[Finding] = field(default_factory=list)
    #: why the embedding pass did not run (no vector, no embedder), "" when it ran
    embedding_skipped: str = ""

    @property
    def upgraded(self) -> bool:
        """Whether a pass raised the writer's claim."""
        return self.claimed is not None and rank(self.category) > rank(self.claimed)

    def as_details(self) -> dict[str, Any]:
        """What the assertion records (``details.consent``): categories and pattern names, never
        the text a pattern matched."""
        details: dict[str, Any] = {"category": self.category, "claimed": self.claimed,
                                   "findings": [finding.as_dict() for finding in self.findings]}
        if self.embedding_skipped:
            details["embedding_skipped"] = self.embedding_skipped
        return details


def embedding_finding(vector: Sequence[float] | None, index: ExemplarIndex | None, *,
                      min_similarity: float) -> Finding | None:
    """The embedding pass: the nearest category when its centroid's cosine reaches ``min_similarity``."""
    if vector is None or index is None:
        return None
    nearest = index.nearest(vector)
    if nearest is None or nearest[1] < min_similarity:
        return None
    category, similarity = nearest
    return Finding(category=category, source="embedding", pattern="exemplars", similarity=similarity)


def classify(text: str, *, claim: str | None = None, tags: dict[str, Any] | None = None,
             extra: Sequence[str | None] = (), vector: Sequence[float] | None = None,
             index: ExemplarIndex | None = None, min_similarity: float = 0.2,
             embedding_skipped: str = "") -> ConsentVerdict:
    """The category of a memory: ``claim`` raised by what the PII pass finds in ``text``, ``extra``
    (title, summary) and ``tags``, and by the embedding pass over ``vector`` (skipped without a
    vector or an index; ``embedding_skipped`` says why). Upgrades only: never below ``claim``."""
    findings = pii_findings(text, tags=tags, extra=[part for part in extra if part])
    found = embedding_finding(vector, index, min_similarity=min_similarity)
    if found is not None:
        findings.append(found)
    elif not embedding_skipped and (vector is None or index is None):
        embedding_skipped = "no_vector" if vector is None else "no_index"
    category = upgrade(claim, *(finding.category for finding in findings))
    return ConsentVerdict(category=category, claimed=claim, findings=findings, embedding_skipped=embedding_skipped)


class IndexCache:
    """One :class:`ExemplarIndex` per embedding model, built on first use (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._indexes: dict[str, ExemplarIndex] = {}
        self._latest: ExemplarIndex | None = None

    def get(self, model: str, embed: Embed) -> ExemplarIndex:
        index = self._indexes.get(model)
        if index is None:
            with self._lock:
                index = self._indexes.get(model)
                if index is None:
                    index = self._indexes[model] = ExemplarIndex.build(embed, model=model)
        self._latest = index
        return index

    def has(self, model: str) -> bool:
        return model in self._indexes

    def latest(self) -> ExemplarIndex | None:
        """The index :meth:`get` answered last (None before the first, or after :meth:`forget_latest`)."""
        return self._latest

    def forget_latest(self) -> None:
        self._latest = None

    def clear(self) -> None:
        with self._lock:
            self._indexes.clear()
            self._latest = None
