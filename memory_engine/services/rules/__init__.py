"""Memory rules: when a generation completes, extract facts into a store.

The ``generation_completed`` receiver (:func:`enqueue_memory_rules`) only looks up
the matching rules and enqueues one django-q2 task per rule on commit, with ids.
Each task calls :func:`memory_rule_fire`: build the transcript, run the handler
(a provider of :mod:`memory_engine.providers.rule_handlers`: the built-in LLM extractor,
a Python callable, or an HTTP tool), write every candidate through the write funnel
(mechanism ``rule``), and record the per-rule counts on
``generation.extraction[rule_id] = {created, superseded, skipped, failed, error}``.

A handler that raises, times out or answers nonsense contributes nothing and records
its error; the turn itself is never blocked or failed. Generations made by a rule
handler (``started_by_rule``), by an agent that handles a rule (``handler_config
["agent_id"]``), or descending from such a generation through ``initiator`` fire no
rules, so a handler that runs an agent cannot loop.

Modules: :mod:`.selection` (which rules fire, loop prevention), :mod:`.ledger` (pending
markers, counts, enqueueing, the sweep), :mod:`.firing` (running a rule, the admin's dry
run) and :mod:`.management` (create, update, the handler configuration check).
"""

from __future__ import annotations

from memory_engine.providers.rule_handlers import Fact

from .firing import build_transcript, coerce_fact, coerce_facts, memory_rule_dry_run, memory_rule_fire
from .ledger import (
    PENDING,
    enqueue_rule_firing,
    is_pending,
    mark_firing_pending,
    new_counts,
    record_rule_counts,
    rule_firing_sweep,
)
from .management import memory_rule_create, memory_rule_update, validate_rule_handler
from .selection import MAX_INITIATOR_DEPTH, enqueue_memory_rules, fires_rules, handler_agent_ids, matching_rule_ids

__all__ = [
    "MAX_INITIATOR_DEPTH",
    "PENDING",
    "Fact",
    "build_transcript",
    "coerce_fact",
    "coerce_facts",
    "enqueue_memory_rules",
    "enqueue_rule_firing",
    "fires_rules",
    "handler_agent_ids",
    "is_pending",
    "mark_firing_pending",
    "matching_rule_ids",
    "memory_rule_create",
    "memory_rule_dry_run",
    "memory_rule_fire",
    "memory_rule_update",
    "new_counts",
    "record_rule_counts",
    "rule_firing_sweep",
    "validate_rule_handler",
]
