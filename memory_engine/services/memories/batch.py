"""Many writes into one store at once (``POST /api/v1/memories/batch``, ``manage.py
memory_engine_import``): the funnel's decisions exactly as writing the items one by one in their
order (each sees the ones before it), in one transaction, with their texts embedded together.

Each item is checked first (a refused item writes nothing and the others go on), the texts whose
content rows hold no vector yet go to the embedder in one call, and the items are written in
order inside one transaction, each in its savepoint: an item the funnel refuses at write time
(``QUOTA_EXCEEDED``) or that fails in the database is rolled back alone and reported, and the
others commit together. Per-item errors, not all-or-nothing: an import of a thousand facts is
not lost to one bad line, and the answer says which line and why. :class:`BatchSummary` counts
what a batch did (items per action, refused items, written items per decision reason) for the
API's answer and the import's report.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import DatabaseError, connection, transaction

from memory_engine.conf import engine_settings
from memory_engine.exceptions import BatchTooLarge, MemoryEngineError, WriteFailed
from memory_engine.models import MemoryStore
from memory_engine.models.memories import Mechanism

from .content import Prepared, embed_many_best_effort, json_value, parse_vector
from .funnel import WriteResult, classify_consent, judge_writes, write_prepared, write_request
from .validation import WriteRequest

__all__ = ["ACTIONS", "BatchOutcome", "BatchSummary", "memory_write_batch"]

logger = logging.getLogger("memory_engine.write")


@dataclass
class BatchOutcome:
    """What became of one item: its funnel result, or the error that refused it."""

    index: int
    result: WriteResult | None = None
    error: MemoryEngineError | None = None


#: The funnel's actions, in the order a summary names them.
ACTIONS = ("created", "superseded", "skipped")


@dataclass
class BatchSummary:
    """What writes did, counted: items per action, items refused, and written items per
    ``(action, decision_reason)``. The reasons are the funnel's strings as they come (a new reason
    is counted without a change here)."""

    decisions: Counter[tuple[str, str]] = field(default_factory=Counter)
    refused: int = 0

    @classmethod
    def of(cls, outcomes: Iterable[BatchOutcome]) -> BatchSummary:
        summary = cls()
        for outcome in outcomes:
            summary.add(outcome)
        return summary

    def add(self, outcome: BatchOutcome) -> None:
        if outcome.result is None:
            self.refused += 1
            return
        self.decisions[outcome.result.action, outcome.result.decision_reason or "unknown"] += 1

    @property
    def actions(self) -> Counter[str]:
        """Written items per action."""
        counts: Counter[str] = Counter()
        for (action, _), count in self.decisions.items():
            counts[action] += count
        return counts

    @property
    def written(self) -> int:
        """Items the funnel decided on (created, superseded or skipped)."""
        return sum(self.decisions.values())

    def reasons(self, action: str | None = None) -> dict[str, int]:
        """Written items per decision reason (of one action, or all), most frequent first."""
        counts: Counter[str] = Counter()
        for (done, reason), count in self.decisions.items():
            if action is None or done == action:
                counts[reason] += count
        return dict(sorted(counts.items(), key=lambda pair: (-pair[1], pair[0])))

    def as_dict(self) -> dict[str, Any]:
        """``{"created", "superseded", "skipped", "refused", "reasons": {reason: count}}``."""
        actions = self.actions
        return {**{action: actions[action] for action in ACTIONS}, "refused": self.refused,
                "reasons": self.reasons()}


def prepare_vectors(store: MemoryStore, requests: Sequence[WriteRequest]) -> list[Prepared]:
    """prepare_vector for many texts: one look at the store's content rows (their vectors), one
    embedder call for the texts none of them holds with a vector (each distinct text once), and
    each request's consent category classified on its text's vector (funnel.classify_consent)."""
    if not requests:
        return []
    with connection.cursor() as cursor:
        cursor.execute("SELECT content_hash, embedding::text, guard FROM memory_engine_memorycontent "
                       "WHERE project_id = %s AND store_id = %s AND content_hash = ANY(%s)",
                       [store.project_id, store.pk, list({r.digest for r in requests})])
        found = cursor.fetchall()
    rows: dict[str, str | None] = {digest: text for digest, text, _ in found}
    guards = {digest: json_value(guard) for digest, _, guard in found}
    stored = {digest: parse_vector(text) for digest, text in rows.items()}
    missing: dict[str, str] = {}
    for request in requests:
        if stored.get(request.digest) is None:
            missing.setdefault(request.digest, request.text)
    vectors = dict(zip(missing, embed_many_best_effort(list(missing.values())), strict=True))
    prepared = []
    for request in requests:
        if stored.get(request.digest) is not None:
            ready = Prepared(None, {}, True, stored[request.digest], guards.get(request.digest))
        else:
            vector, failure = vectors[request.digest]
            ready = Prepared(vector, {"embedding": failure} if failure else {},
                             None if request.digest not in rows else False, stored_guard=guards.get(request.digest))
        classify_consent(request, ready)
        prepared.append(ready)
    return prepared


def memory_write_batch(*, store: MemoryStore, items: Sequence[dict[str, Any]], principal: str,
                       mechanism: str = Mechanism.API, progress: Callable[[int], None] | None = None,
                       **common: Any) -> list[BatchOutcome]:
    """Write ``items`` (each memory_write's keyword arguments but ``store``, ``principal`` and
    ``mechanism``; ``common`` ones, such as thresholds, apply to every item) into ``store``, in
    order; one outcome per item, in the same order. 413 BATCH_TOO_LARGE over MAX_BATCH_MEMORIES.
    ``progress`` is called with how many items were settled since its last call: the items
    refused by the checks at once, then each item as it is written or refused (a caller's progress
    bar moves record by record, not batch by batch)."""
    limit = engine_settings.MAX_BATCH_MEMORIES
    if len(items) > limit:
        raise BatchTooLarge(f"The batch holds {len(items)} memories; the limit is {limit} (MAX_BATCH_MEMORIES).",
                            details={"items": len(items), "max_items": limit})
    outcomes = [BatchOutcome(index) for index in range(len(items))]
    checked: list[tuple[int, WriteRequest]] = []
    for index, item in enumerate(items):
        try:
            checked.append((index, write_request(store=store, principal=principal, mechanism=mechanism,
                                                 **{**common, **item})))
        except MemoryEngineError as exc:
            outcomes[index].error = exc
    if progress is not None and len(checked) < len(items):
        progress(len(items) - len(checked))
    ready = prepare_vectors(store, [request for _, request in checked])
    refusals = judge_writes(store, [request for _, request in checked], ready)
    with transaction.atomic():
        for (index, request), prepared, refusal in zip(checked, ready, refusals, strict=True):
            if refusal is not None:  # INSTRUCTION_REJECTED: nothing of it is written
                outcomes[index].error = refusal
                if progress is not None:
                    progress(1)
                continue
            try:
                outcomes[index].result = write_prepared(store, request, prepared)
            except MemoryEngineError as exc:  # QUOTA_EXCEEDED: this item's savepoint rolled back
                outcomes[index].error = exc
            except DatabaseError as exc:
                logger.exception("batch write: item %d failed in the database", index)
                outcomes[index].error = WriteFailed(f"{exc.__class__.__name__}: {exc}")
            if progress is not None:
                progress(1)
    return outcomes
