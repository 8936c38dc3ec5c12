"""Relevance: does a search hit bear on the query at all?

Search ranks everything it finds; what the engine hands to a model (push injection, the
``search_knowledge`` tool) should carry only what bears on the question. This module judges each
hit of one answer from what the search already knows of it, with a small logistic model fitted on
the shared dev data (bench/relevance.py, docs/retrieval.md "Relevance"):

    relevance = gate × hit

- ``gate`` = σ(g₀ + g₁ · top_cosine): does the answer hold anything on the question? Its best
  cosine says so (off-topic questions find nearest neighbours too, but far ones).
- ``hit`` = σ(w₀ + Σ wᵢ · featureᵢ) over the hit's :data:`FEATURES`: its cosine, its cosine's gap
  to the answer's best, its lexical (BM25) score's share of the answer's best (squared), and the
  reciprocal of its rank in each channel (0 when the channel did not find it); ``rerank``, the
  rerank provider's score, when a deployment's own model weighs it.

A hit is relevant when its relevance is at least the threshold (SEARCH_MIN_RELEVANCE, an
agent's ``knowledge_config.min_relevance``, a search's ``min_relevance``). The model sees only
values inside one answer, so it needs no corpus statistics; its cosine terms are the embedder's
own scale: the built-in model (:data:`BUILTIN_MODEL`) is calibrated for all-MiniLM-L6-v2, and a
deployment with another embedder fits its own with ``bench/relevance.py --fit`` and sets
RELEVANCE_MODEL. Until it does, nothing is judged there (every hit counts as relevant, as before
the model existed) and system check memory_engine.W014 says why.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from django.core.exceptions import ImproperlyConfigured

from .conf import engine_settings

__all__ = [
    "BUILTIN_MODEL",
    "FEATURES",
    "GATE_FEATURES",
    "RelevanceModel",
    "Scored",
    "answer_features",
    "calibrated_for_embedder",
    "relevance_model",
]

#: What the gate reads of the whole answer.
GATE_FEATURES = ("top_cosine",)
#: What the hit model reads of each hit.
FEATURES = ("cosine", "cosine_gap", "lexical_share", "vector_rank", "lexical_rank", "rerank")
INTERCEPT = "intercept"


class Scored(Protocol):
    """What the model reads of a hit (memory_engine.selectors.search.SearchHit)."""

    @property
    def similarity_score(self) -> float | None: ...
    @property
    def lexical_score(self) -> float | None: ...
    @property
    def ranks(self) -> Mapping[str, int | None]: ...
    @property
    def rerank_score(self) -> float | None: ...


@dataclass(frozen=True)
class RelevanceModel:
    """A fitted relevance model: the gate's and the hit model's coefficients, by feature name
    (``intercept`` included; a feature left out weighs 0)."""

    version: str
    gate: Mapping[str, float]
    weights: Mapping[str, float]
    #: The embedding model the cosine terms were fitted with ("" when unknown).
    calibrated_for: str = ""

    def gate_value(self, answer: Mapping[str, float]) -> float:
        return _logistic(self.gate, answer)

    def hit_value(self, features: Mapping[str, float]) -> float:
        return _logistic(self.weights, features)

    def scores(self, hits: Sequence[Scored]) -> list[float] | None:
        """Each hit's relevance in [0, 1], in order; None when no hit has a cosine (no query
        vector: the model needs one)."""
        features = answer_features(hits)
        if features is None:
            return None
        answer, per_hit = features
        gate = self.gate_value(answer)
        return [gate * self.hit_value(f) for f in per_hit]


def _logistic(coefficients: Mapping[str, float], values: Mapping[str, float]) -> float:
    z = coefficients.get(INTERCEPT, 0.0) + sum(w * values.get(name, 0.0)
                                               for name, w in coefficients.items() if name != INTERCEPT)
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def answer_features(hits: Sequence[Scored]) -> tuple[dict[str, float], list[dict[str, float]]] | None:
    """The gate's features of the answer and each hit's features, or None when no hit carries a
    cosine. Values are relative to the answer (every candidate of the fusion, before the cut), so
    no corpus statistic enters: BM25 over its best, cosine against its best.

    A hit without a cosine (its memory or chunk has no stored vector: the embedder failed when it
    was written) is taken at the answer's best cosine: only its lexical evidence and its ranks
    tell it apart.
    """
    cosines = [c for c in (_number(h.similarity_score) for h in hits) if c is not None]
    if not cosines:
        return None
    top_cosine = max(cosines)
    top_lexical = max((s for s in (_number(h.lexical_score) for h in hits) if s is not None), default=0.0)
    per_hit = []
    for hit in hits:
        cosine = _number(hit.similarity_score)
        cosine = top_cosine if cosine is None else cosine
        lexical = _number(hit.lexical_score)
        share = max(0.0, lexical / top_lexical) if lexical is not None and top_lexical > 0 else 0.0
        vector_rank, lexical_rank = hit.ranks.get("vector"), hit.ranks.get("lexical")
        per_hit.append({
            "cosine": cosine,
            "cosine_gap": cosine - top_cosine,
            "lexical_share": share * share,
            "vector_rank": 1.0 / vector_rank if vector_rank else 0.0,
            "lexical_rank": 1.0 / lexical_rank if lexical_rank else 0.0,
            "rerank": _number(hit.rerank_score) or 0.0,
        })
    return {"top_cosine": top_cosine}, per_hit


def _number(value: Any) -> float | None:
    """``value`` as a finite float, else None (a missing score, a NaN cosine)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


#: The built-in model: fitted by ``bench/relevance.py --fit`` on the train half of the shared dev
#: data (LoCoMo dev conversations 1-4, the even SciFact train claims, and off-topic questions made
#: of them) with all-MiniLM-L6-v2 (int8 ONNX), 2026-12-04; with it SEARCH_MIN_RELEVANCE 0.35 and
#: EVIDENCE_STRONG_RELEVANCE 0.94 were chosen there. Figures: docs/benchmarks.md, "Relevance".
#: A new fit gets a new version.
BUILTIN_MODEL = RelevanceModel(
    version="minilm-l6-v2/1",
    gate={INTERCEPT: -15.051, "top_cosine": 38.451},
    weights={INTERCEPT: -2.347, "cosine": 2.198, "cosine_gap": 3.649, "lexical_share": 2.168,
             "vector_rank": 0.963, "lexical_rank": 1.587},
    calibrated_for="all-MiniLM-L6-v2",
)


def calibrated_for_embedder(model_name: str | None) -> bool:
    """Whether the built-in model's cosine terms fit the embedding model ``model_name``:
    all-MiniLM-L6-v2 on any runtime (onnx, sentence-transformers, Ollama's ``all-minilm``)."""
    name = (model_name or "").strip().lower().replace("_", "-").rsplit("/", 1)[-1]
    return "all-minilm-l6" in name or name in ("all-minilm", "all-minilm:latest")


def relevance_model(embedder: str | None = None) -> RelevanceModel | None:
    """The model that judges answers ranked with the embedding model ``embedder``:
    RELEVANCE_MODEL when the deployment sets one; else :data:`BUILTIN_MODEL` when ``embedder`` is
    the model it was calibrated for (or None: not asked); else None, and nothing is judged (every
    hit counts as relevant, as before the model existed; system check W014 says so).

    Raises ImproperlyConfigured for a feature name the model does not know (a typo would weigh 0;
    system check E021).
    """
    configured = engine_settings.RELEVANCE_MODEL
    if not configured:
        return BUILTIN_MODEL if embedder is None or calibrated_for_embedder(embedder) else None
    gate, weights = dict(configured.get("GATE") or {}), dict(configured.get("WEIGHTS") or {})
    for where, coefficients, known in (("GATE", gate, GATE_FEATURES), ("WEIGHTS", weights, FEATURES)):
        unknown = sorted(set(coefficients) - {INTERCEPT, *known})
        if unknown:
            raise ImproperlyConfigured(
                f"MEMORY_ENGINE['RELEVANCE_MODEL'][{where!r}] names unknown features {unknown}; "
                f"known: {', '.join((INTERCEPT, *known))}.")
    return RelevanceModel(version=str(configured.get("VERSION") or "custom"), gate=gate, weights=weights,
                          calibrated_for=str(configured.get("EMBEDDING_MODEL") or ""))
