"""The write funnel and what it is made of (docs/write-funnel.md).

``memory_write`` (funnel) is the one function every memory write goes through. Its steps each
have a module with one job: ``validation`` (a write's inputs, refused before anything is
written), ``content`` (the content row: hash, embedding, upsert), ``locks`` (the store lock),
``decision`` (skip, supersede or create, and why), ``consent`` (the memory's consent category
and its expiry) and ``ledger`` (the rows a decision writes and its one assertion); ``batch``
writes many items through the same steps in one transaction. The candidates it decides on are a
read: memory_engine.selectors.dedup.
"""

from __future__ import annotations

from .batch import BatchOutcome, memory_write_batch
from .consent_category import validate_consent_expiry_days
from .content import content_hash, embed_best_effort, embed_many_best_effort, model_switched, normalize_text
from .decision import Reason
from .funnel import WriteResult, memory_write
from .locks import lock_store
from .validation import (
    About,
    MemoryFields,
    WriteArguments,
    check_keywords,
    validate_content,
    validate_thresholds,
)

__all__ = ["About", "BatchOutcome", "MemoryFields", "Reason", "WriteArguments", "WriteResult", "check_keywords",
           "content_hash", "embed_best_effort", "embed_many_best_effort", "lock_store",
           "memory_write", "memory_write_batch", "model_switched", "normalize_text", "validate_consent_expiry_days",
           "validate_content", "validate_thresholds"]
