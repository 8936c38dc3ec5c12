"""The write funnel: the one function every memory write goes through (docs/write-funnel.md).

hash -> reuse the content row or embed once (best-effort) -> nearest live memories of the
same store and facet -> skip (reinforcing the kept memory) / supersede / create -> one
assertion, with the near matches below the supersede threshold as ``potential_duplicates``.

No model call happens inside the store lock: the embedder runs before it, so a slow
or failing embedder never holds other writers back, and a failure only means the
content row is stored without a vector (repaired by the next write of the text or by
``manage.py memory_engine_reembed --missing``).

Each step has its module: validation (the inputs), content (the content row), locks (the store
lock), memory_engine.selectors.dedup (the candidates), decision, ledger (what a decision writes).
This one runs them in one transaction, and runs it again when the connection lost a prepared
statement or the embedding model was switched under the write.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Unpack

from django.db import DatabaseError, DataError, transaction
from django.utils import timezone

from memory_engine.db import lost_prepared_statement, one_round_trip, stop_preparing
from memory_engine.exceptions import AboutRequired, InstructionRejected
from memory_engine.facets import validate_facet
from memory_engine.instruction_guard import Finding, findings
from memory_engine.instruction_guard.classifier import SCREEN_MODEL
from memory_engine.mentions.subject_keys import primary, sharing_keys, subject_keys
from memory_engine.models import Lineage, Memory, MemoryAssertion, MemoryStore, Provenance
from memory_engine.models.memories import MEMORY_TITLE_MAX_CHARS, Kind, Mechanism, Outcome, SourceType
from memory_engine.models.retention import RetentionClass
from memory_engine.providers.embeddings import get_embedding_provider, refresh_embedding_provider
from memory_engine.selectors.dedup import candidates_query, dedup_candidates

from ..judge import get_judge
from ..memory_schema import check_kind
from .consent_category import consent_of_write, validate_claim
from .content import Prepared, content_hash, embed_best_effort, model_switched, prepare_vector, resolve_content
from .decision import decide
from .ledger import record_decision
from .validation import (
    GUARDED_TIERS,
    About,
    WriteArguments,
    WriteRequest,
    check_keywords,
    check_memory_quota,
    ephemeral_expiry,
    refusal_of,
    resolve_thresholds,
    validate_confidence,
    validate_content,
    validate_expires_at,
    validate_kind,
    validate_text_field,
)

__all__ = ["WriteResult", "classify_consent", "judge_write", "judge_writes", "memory_write", "write_prepared",
           "write_request"]

logger = logging.getLogger("memory_engine.write")


@dataclass
class WriteResult:
    """What the funnel did: ``action`` is created, superseded or skipped."""

    action: str
    memory: Memory
    assertion: MemoryAssertion
    similarity: float | None = None
    decision_reason: str = ""
    changed_details: list[dict[str, Any]] = field(default_factory=list)
    replaced: Memory | None = None
    #: live memories of the same store and facet near the text, below the supersede threshold:
    #: ``[{"memory_id", "similarity"}]``, best first
    potential_duplicates: list[dict[str, Any]] = field(default_factory=list)
    #: a skip that reinforced the kept memory (False within REINFORCE_INTERVAL_SECONDS)
    reinforced: bool = False


def memory_write(*, store: MemoryStore, content: str, principal: str,
                 **arguments: Unpack[WriteArguments]) -> WriteResult:
    """Write one fact into a store: skip (reinforcing the kept memory), supersede or create, and
    record one assertion.

    A ``conversation_id`` is kept in the memory's metadata and makes it a ``conversation`` memory.
    ``kind`` defaults to a string ``tags["kind"]``, else ``fact``; ``confidence`` to
    DEFAULT_CONFIDENCE; ``provenance`` and ``lineage`` (docs/memory.md) are recorded on a created
    memory; ``expires_at`` to now + the store's ``ttl_default`` (always capped at its
    ``ttl_max``). A superseding memory inherits the retired one's kind, title and summary unless
    given. Dedup compares only live memories of the same ``facet``. ``agent`` is recorded on
    created memories (the agent that wrote it or for which it was written). ``consent_category`` is
    the writer's claim: the consent classifier runs once per write (memories.consent) and may raise
    it, never lower it; a skip or a supersede keeps the more sensitive of the write's and the
    matched memory's category, and the category's expiry caps the memory's (CONSENT_EXPIRY_DAYS,
    the store's ``consent_expiry_days``).

    Raises ContentEmpty / ContentTooLong / ValidationFailed / ConfidenceInvalid / FacetInvalid /
    ExpiresAtInvalid / KindUnknown / ThresholdsInvalid / AboutRequired / InstructionRejected /
    QuotaExceeded before anything is written (no assertion, as for every refusal).
    InstructionRejected: in an agent or institutional store, the text, title, summary or a string
    in tags/metadata/about reads as instructions to an AI (memory_engine.instruction_guard); the
    guard has no switch. Stores with ``judge_enabled`` consult the same-fact judge
    (memory_engine.services.judge) between JUDGE_FLOOR and the supersede threshold; ``judge`` may
    pass another callable ``(old, new, similarity) -> verdict``.
    """
    request = write_request(store=store, content=content, principal=principal, **arguments)
    return write_prepared(store, request, prepare_vector(store, request.text, request.digest))


def write_request(*, store: MemoryStore, content: str, principal: str,
                  **arguments: Unpack[WriteArguments]) -> WriteRequest:
    """memory_write's arguments checked and resolved (thresholds, kind, expiry, the instruction
    guard), before anything is written: the refusals memory_write lists."""
    check_keywords("memory_write", arguments, WriteArguments.__optional_keys__)
    # The defaults of what the write leaves out, applied here only: these, and None for the others.
    mechanism = arguments.get("mechanism", Mechanism.API)
    source_type = arguments.get("source_type", SourceType.MANUAL)
    retention_class = arguments.get("retention_class", RetentionClass.DURABLE)
    provenance = arguments.get("provenance", Provenance.UNKNOWN)
    lineage = arguments.get("lineage", Lineage.NATIVE)
    text = validate_content(content)
    tags = dict(arguments.get("tags") or {})
    metadata = dict(arguments.get("metadata") or {})
    if conversation_id := arguments.get("conversation_id"):
        metadata["conversation_id"], source_type = conversation_id, SourceType.CONVERSATION
    kind = arguments.get("kind")
    if kind is None and isinstance(tags.get("kind"), str) and tags["kind"].strip():
        kind = tags["kind"]  # the kind's place before it had a field
    kind = validate_kind(kind)
    title = validate_text_field(arguments.get("title"), name="title", limit=MEMORY_TITLE_MAX_CHARS)
    summary = validate_text_field(arguments.get("summary"), name="summary")
    stated_confidence = validate_confidence(arguments.get("confidence"))
    facet = validate_facet(arguments.get("facet"))
    expires_at = validate_expires_at(arguments.get("expires_at"), timezone.now())
    expires_at = ephemeral_expiry(retention_class, expires_at, timezone.now())
    about = About.parse(arguments.get("about"))
    consent_claim = validate_claim(arguments.get("consent_category"))
    dup_t, sup_t = resolve_thresholds(store, arguments.get("duplicate_threshold"),
                                      arguments.get("supersede_threshold"))
    if kind is not None:
        check_kind(store.project_id, kind)
    required = store.require_about_for_kinds or []
    if about is None and (kind or Kind.FACT) in required:
        raise AboutRequired(
            f"Store {store.name} requires `about: {{kind, key}}` for memories of kind {kind or Kind.FACT!r}.",
            details={"kind": kind or Kind.FACT, "require_about_for_kinds": required},
        )
    judge = arguments.get("judge")
    if judge is None and store.judge_enabled:
        judge = get_judge()
    return WriteRequest(
        text=text, digest=content_hash(text), tags=tags, metadata=metadata, source_type=source_type,
        about=about, kind=kind, title=title, summary=summary, confidence=stated_confidence, facet=facet,
        expires_at=expires_at, agent=arguments.get("agent"), retention_class=retention_class,
        thresholds=(dup_t, sup_t), judge=judge, principal=principal, mechanism=mechanism,
        generation_id=arguments.get("generation_id"), rule_id=arguments.get("rule_id"),
        provenance=Provenance(provenance), lineage=Lineage(lineage), consent_claim=consent_claim,
        subjects=subject_keys(text, about=(about.kind, about.key) if about else None),
        # the text as written, with its lines (a forged "Assistant:" turn is a line of its own there)
        raw=content if content != text else "",
    )


def judge_write(store: MemoryStore, request: WriteRequest, prepared: Prepared) -> None:
    """The instruction guard, once per write and outside the lock (as the embedder): its findings
    on the text (unless the content row holds one of the guard's current version) and on the
    title, tags and metadata go into ``request`` and are stored with the rows, so that reads
    apply their bar without judging again. In an agent or institutional store a write whose
    strings (the text as written and as stored, title, summary, tags, metadata, about) read as
    instructions at the write gate is refused (INSTRUCTION_REJECTED) before anything is written.
    The screen reads the text's vector when the engine's default embedder made it."""
    refusal = judge_writes(store, [request], [prepared])[0]
    if refusal is not None:
        raise refusal


def judge_writes(store: MemoryStore, requests: Sequence[WriteRequest],
                 prepared: Sequence[Prepared]) -> list[InstructionRejected | None]:
    """:func:`judge_write` for many writes, the classifier run once over all their strings; the
    refusal of each write (counted and logged) or None, in order."""
    provider = get_embedding_provider()
    screen = provider is not None and provider.model_name == SCREEN_MODEL
    guarded = store.tier in GUARDED_TIERS
    groups: list[list[Any]] = []
    vectors: dict[str, Sequence[float]] = {}
    known: list[Finding | None] = []
    for request, ready in zip(requests, prepared, strict=True):
        text_found = Finding.stored(ready.stored_guard)
        known.append(text_found)
        vector = ready.vector if ready.vector is not None else ready.stored_vector
        if screen and vector is not None and text_found is None:
            vectors[request.text] = vector
        about = request.about.as_dict() if request.about else None
        groups.extend([[] if text_found else [request.text], [request.title, request.tags, request.metadata],
                       [request.raw, request.summary, about] if guarded else []])
    found = findings(groups, vectors=vectors)
    refusals: list[InstructionRejected | None] = []
    for n, (request, text_found) in enumerate(zip(requests, known, strict=True)):
        on_text, on_fields, on_rest = found[3 * n:3 * n + 3]
        if text_found is None and on_text.by:
            request.guard = on_text.as_json()
        request.fields_guard = on_fields.as_json() if on_fields.by else None
        request.judged = True
        blocked = next((v for v in (f.verdict("write") for f in (text_found or on_text, on_fields, on_rest))
                        if v.blocked), None) if guarded else None
        refusals.append(None if blocked is None else refusal_of(store, blocked))
    return refusals


def classify_consent(request: WriteRequest, prepared: Prepared) -> None:
    """Set ``request.consent``: the consent classifier on the write's text, title, summary and
    tags, with its claim and the text's vector (made for the write, or held by its content row)."""
    request.consent = consent_of_write(text=request.text, claim=request.consent_claim, tags=request.tags,
                                       extra=(request.title, request.summary), vector=prepared.vector,
                                       stored_vector=prepared.stored_vector)


def write_prepared(store: MemoryStore, request: WriteRequest, prepared: Prepared) -> WriteResult:
    """Write a checked request whose text was embedded (or found stored) by prepare_vector; inside
    a caller's transaction it is one savepoint."""
    vector, notes, stored = prepared.vector, prepared.notes, prepared.stored
    if not request.judged:  # once per write, outside the lock
        judge_write(store, request, prepared)
    if request.consent is None:
        classify_consent(request, prepared)
    try:
        result = _record_prepared(store, request, vector, notes, stored=stored)
    except DataError as exc:
        if vector is None or not model_switched(exc):
            raise
        # The embedding model was switched since the embedder call, and the write's transaction
        # (a savepoint inside a caller's) rolled back: embed with the model now active, outside
        # the lock as always, and write again; when that call fails too, without a vector.
        logger.info("the embedding model changed during a write; embedding the text again")
        refresh_embedding_provider()
        vector, failure = embed_best_effort(request.text)
        result = _record_prepared(store, request, vector, {"embedding": failure} if failure else {}, stored=stored)
    memory, rounded = result.memory, None if result.similarity is None else round(result.similarity, 4)
    logger.info(
        "memory write outcome=%s reason=%s store=%s memory=%s assertion=%s similarity=%s mechanism=%s",
        result.action, result.decision_reason, store.pk, memory.pk, result.assertion.pk, rounded, request.mechanism,
        extra={"outcome": result.action, "decision_reason": result.decision_reason, "store_id": store.pk,
               "memory_id": memory.pk, "assertion_id": result.assertion.pk,
               "replaced_memory_id": result.replaced.pk if result.replaced else None, "similarity": rounded,
               "mechanism": str(request.mechanism), "generation_id": request.generation_id,
               "rule_id": request.rule_id,
               "reinforced": result.reinforced, "potential_duplicates": len(result.potential_duplicates)},
    )
    return result


def _states(request: WriteRequest) -> bool:
    """Whether the write states a fact a new value replaces: not a conversation turn, not an
    observation (both tell what happened; two of them are two events)."""
    return request.source_type != SourceType.CONVERSATION and request.kind != Kind.OBSERVATION


def _record_prepared(store: MemoryStore, request: WriteRequest, vector: list[float] | None, notes: dict[str, Any], *,
                     stored: bool | None) -> WriteResult:
    """_record; when a statement it prepared on the connection was lost (deallocated, or on
    another server session behind a pooling proxy: memory_engine.db.lost_prepared_statement), its
    transaction rolled back, so it runs once more, after this process stops preparing."""
    try:
        return _record(store, request, vector, dict(notes), stored=stored)
    except DatabaseError as exc:
        if not lost_prepared_statement(exc):
            raise
        stop_preparing(exc)
        return _record(store, request, vector, notes, stored=stored)


def _record(store: MemoryStore, request: WriteRequest, vector: list[float] | None, notes: dict[str, Any], *,
            stored: bool | None) -> WriteResult:
    """memory_write's transaction: under the store lock, the content row, the decision, the
    memory and its assertion. ``stored``: the content row as prepare_vector saw it. Raises
    DataError when ``vector`` no longer fits the content column (model_switched) before anything
    is written; no savepoint guards that statement, since the caller writes again in a new
    transaction."""
    digest, about, facet = request.digest, request.about, request.facet
    # The candidates statement goes with the content upsert, its branches chosen by what the
    # row was before the write (a new row has no same-text memory; a row without a vector, no
    # neighbours).
    # the memories sharing a subject: found only for a write whose subject is known
    sharing = sharing_keys(request.subjects) if primary(request.subjects) else []
    query = candidates_query(store, digest=digest, facet=facet, about=about, subjects=sharing,
                             neighbours=vector is not None or stored is True, new_content=stored is None)
    with transaction.atomic():  # inside a caller's atomic() block (a batch): a savepoint
        content_row, has_vector, inserted, found = resolve_content(store, request.text, digest, vector,
                                                                   guard=request.guard, lock_first=True,
                                                                   candidates=query, prepare=True)
        now = timezone.now()  # once the store lock is held: the store's writes get it in their order
        if query is None or found is None or not query.covers(new_content=inserted, neighbours=has_vector):
            # nothing was sent (no branch could match before the upsert), or another write of the
            # same text got in first: the statement now, with the branches the row needs
            found = dedup_candidates(store, content_row.pk, facet=facet, about=about, subjects=sharing,
                                     neighbours=has_vector, new_content=inserted)
        decision, neighbours = decide(found=found, has_vector=has_vector, content_row=content_row,
                                      text=request.text, about=about, subjects=request.subjects,
                                      thresholds=request.thresholds,
                                      judge=request.judge, notes=notes, states=_states(request))
        if decision.action == Outcome.CREATED:
            check_memory_quota(store)
        # The new memory, the replaced one's retirement (or the kept one's reinforcement) and the
        # assertion: one round trip.
        recorded = record_decision(store, request, decision, content_row=content_row, neighbours=neighbours,
                                   notes=notes, now=now)
        one_round_trip(recorded.writes, saved=recorded.inserted)
    return WriteResult(
        action=str(decision.action), memory=recorded.memory, assertion=recorded.assertion,
        similarity=decision.similarity, decision_reason=decision.reason, changed_details=decision.changes,
        replaced=recorded.replaced, potential_duplicates=recorded.potential_duplicates,
        reinforced=recorded.reinforced,
    )
