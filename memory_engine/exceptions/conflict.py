"""The request does not fit the state of the data: 409."""

from __future__ import annotations

from .base import MemoryEngineError


class Conflict(MemoryEngineError):
    code = "CONFLICT"
    status_code = 409
    default_message = "The request conflicts with existing data."


class DistillerBusy(Conflict):
    code = "DISTILLER_BUSY"
    default_message = "Another tick of this distiller is running; its run will show what it wrote."


class DistillerDisabled(Conflict):
    code = "DISTILLER_DISABLED"
    default_message = "This distiller is disabled; enable it to tick."


class NameTaken(Conflict):
    code = "NAME_TAKEN"
    default_message = "This name is already taken in your project."


class TierStoreExists(Conflict):
    code = "TIER_STORE_EXISTS"
    default_message = "This subject (or agent) already has its memory store."


class PathTaken(Conflict):
    code = "PATH_TAKEN"
    default_message = "A document with this path already exists in your project; choose another path or re-ingest it."


class NotInTrash(Conflict):
    code = "NOT_IN_TRASH"
    default_message = "This memory is not in the trash; only a forgotten agent or institutional memory can be restored."


class TrashExpired(Conflict):
    code = "TRASH_EXPIRED"
    default_message = ("This memory has been in the trash longer than its store's trash_days; it can no longer be "
                       "restored and the next sweep deletes it.")


class LegalHold(Conflict):
    code = "LEGAL_HOLD"
    default_message = ("Rows under legal hold cannot be forgotten, purged or erased; an operator must change "
                       "their retention_class first (details name them).")


class DocumentNotForgotten(Conflict):
    code = "DOCUMENT_NOT_FORGOTTEN"
    default_message = ("This document still has a durable version that is not tombstoned: forget it "
                       "(POST .../forget) before purging it.")


class InstructionWithheld(Conflict):
    code = "INSTRUCTION_WITHHELD"
    default_message = ("This memory reads as instructions to an AI, so it is not returned toward a model; it stays "
                       "stored (GET /api/v1/memories/{id} shows it to the project).")


class GenerationAlreadyCompleted(Conflict):
    code = "GENERATION_ALREADY_COMPLETED"
    default_message = "This generation is already completed."


class EmbeddingModelState(Conflict):
    code = "EMBEDDING_MODEL_STATE"
    default_message = "The embedding model is not in a state that allows this (details.state)."


class StagedGenerationState(Conflict):
    code = "STAGED_GENERATION_STATE"
    default_message = "The staged generation is not in a state that allows this (see details.status)."


class LinkExists(Conflict):
    code = "LINK_EXISTS"
    default_message = "This link (same source, target and kind) already exists (see details.id)."
