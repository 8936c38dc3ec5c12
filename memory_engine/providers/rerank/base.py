"""The rerank provider interface: a cross-encoder's relevance of each passage to a query."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any


class RerankError(Exception):
    """The provider could not rerank; the search keeps its fused order (``rerank_unavailable``)."""


class RerankProvider(ABC):
    """Scores passages against a query; higher is more relevant.

    Subclasses implement :meth:`score`. Built once per process from MEMORY_ENGINE['RERANK']
    (``model``, ``options``, ``timeout``); implementations must be thread-safe and raise
    RerankError on any failure, including an answer that does not score every passage once.
    """

    default_model = ""

    def __init__(self, *, model: str | None = None, options: dict[str, Any] | None = None,
                 timeout: float = 5.0) -> None:
        self.model_name = model or self.default_model
        self.options = options or {}
        self.timeout = timeout

    @abstractmethod
    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """One score per passage, in the passages' order."""
        raise NotImplementedError(".score() must be overridden")

    @staticmethod
    def scores_by_index(pairs: Sequence[tuple[int, float]], expected: int) -> list[float]:
        """The ``(index, score)`` pairs of an answer as a list in passage order; RerankError unless
        each passage is scored exactly once."""
        scores: list[float | None] = [None] * expected
        for index, value in pairs:
            if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < expected \
                    or scores[index] is not None:
                raise RerankError(f"the answer scores passage {index!r} of {expected} twice or out of range")
            scores[index] = float(value)
        missing = [i for i, value in enumerate(scores) if value is None]
        if missing:
            raise RerankError(f"the answer leaves {len(missing)} of {expected} passages unscored")
        return [float(value) for value in scores if value is not None]
