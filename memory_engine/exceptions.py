"""Domain errors, each with a stable machine-readable ``code``.

They are raised by services and selectors and mapped to HTTP once, in
``memory_engine.api.exceptions``.
"""

from __future__ import annotations

from typing import Any


class CodedError(Exception):
    """A failure inside a pure step (chunking, extraction, a converter) with a stable ``code``.

    Services turn it into a recorded document error or a MemoryEngineError; it carries
    no HTTP status of its own.
    """

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        self.code = code
        self.message = message
        self.details = details or {}
        super().__init__(message)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": self.details}


class MemoryEngineError(Exception):
    """Base class: ``code`` is stable and documented, ``message`` says what to do next."""

    code = "MEMORY_ENGINE_ERROR"
    status_code = 400
    default_message = "The request could not be processed."

    def __init__(self, message: str | None = None, *, details: dict[str, Any] | None = None,
                 code: str | None = None) -> None:
        self.message = message or self.default_message
        self.details = details or {}
        if code:
            self.code = code
        super().__init__(self.message)

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": self.details}


class ValidationFailed(MemoryEngineError):
    code = "VALIDATION_ERROR"
    default_message = "The request is invalid."


class NotAllowed(ValidationFailed):
    """Configuration asking for more than its author is trusted with (memory_engine.guards);
    ``code`` names the guard: CALLABLE_NOT_ALLOWED, CONVERTER_NOT_ALLOWED,
    LLM_OVERRIDE_NOT_ALLOWED or URL_NOT_ALLOWED. Raised at configuration time (400) and
    when a call is made (recorded on the rule firing or the document)."""

    code = "NOT_ALLOWED"
    default_message = "This configuration is not allowed; ask an operator."


class ContentEmpty(MemoryEngineError):
    code = "CONTENT_EMPTY"
    default_message = "Memory content is empty; send a non-blank `content` string."


class ContentTooLong(MemoryEngineError):
    code = "CONTENT_TOO_LONG"
    default_message = "Memory content is too long."


class ThresholdsInvalid(MemoryEngineError):
    code = "THRESHOLDS_INVALID"
    default_message = "Thresholds must lie in [0, 1] with supersede_threshold <= duplicate_threshold."


class AboutRequired(MemoryEngineError):
    code = "ABOUT_REQUIRED"
    default_message = "This store requires an `about` key for this kind of memory."


class NotFound(MemoryEngineError):
    code = "NOT_FOUND"
    status_code = 404
    default_message = "Not found."


class UnknownMemoryStore(MemoryEngineError):
    code = "MEMORY_STORE_NOT_FOUND"
    status_code = 404
    default_message = "No memory store with this id exists in your project."


class Conflict(MemoryEngineError):
    code = "CONFLICT"
    status_code = 409
    default_message = "The request conflicts with existing data."


class QuotaExceeded(MemoryEngineError):
    code = "QUOTA_EXCEEDED"
    status_code = 429
    default_message = "The project's storage quota is exhausted; delete data or raise the quota."


class ReadOnlyKey(MemoryEngineError):
    code = "READ_ONLY_KEY"
    status_code = 403
    default_message = "This API key is read-only; use a read-write key to change data."


class ModelPermissionRequired(MemoryEngineError):
    code = "MODEL_PERMISSION_REQUIRED"
    status_code = 403
    default_message = "Your user lacks the Django model permission this request needs (see details.missing)."


class ProjectRequired(MemoryEngineError):
    code = "PROJECT_REQUIRED"
    default_message = "Staff sessions must name a project with the X-Project-Id header or ?project_id=."


class EmbeddingNotConfigured(MemoryEngineError):
    code = "EMBEDDING_NOT_CONFIGURED"
    status_code = 503
    default_message = (
        "No embedding provider is configured; set MEMORY_ENGINE['EMBEDDING']['PROVIDER']."
    )


class EmbeddingFailed(MemoryEngineError):
    code = "EMBEDDING_FAILED"
    status_code = 503
    default_message = "The embedding provider failed; retry shortly."


class EmbeddingMismatch(MemoryEngineError):
    code = "EMBEDDING_MISMATCH"
    status_code = 503
    default_message = (
        "The configured embedding model or dimension differs from the database; run "
        "`manage.py memory_engine_reembed`."
    )


class DocumentError(MemoryEngineError):
    """Documents and ingestion (the ``code`` is set per case: PATH_INVALID, EMPTY_FILE, ...)."""

    code = "DOCUMENT_ERROR"
    default_message = "The document could not be accepted."


class PathInvalid(DocumentError):
    code = "PATH_INVALID"
    default_message = "Document paths look like /folder/name.pdf: no `..`, backslashes or control characters."


class PathTaken(DocumentError):
    code = "PATH_TAKEN"
    status_code = 409
    default_message = "A document with this path already exists in your project; choose another path or re-ingest it."


class FileTooLarge(DocumentError):
    code = "FILE_TOO_LARGE"
    status_code = 413
    default_message = "The file is larger than MAX_UPLOAD_BYTES."


class RequestTooLarge(MemoryEngineError):
    code = "REQUEST_TOO_LARGE"
    status_code = 413
    default_message = "The request body is larger than DATA_UPLOAD_MAX_MEMORY_SIZE."


class JSONTooDeep(MemoryEngineError):
    code = "JSON_TOO_DEEP"
    default_message = "The JSON body is nested too deeply (MAX_JSON_DEPTH)."


class InputInvalid(MemoryEngineError):
    """Text the database cannot store (NUL characters) or values out of its range."""

    code = "INPUT_INVALID"
    default_message = "The request contains a value the database cannot store (e.g. a NUL character)."


class UnsupportedContentType(DocumentError):
    code = "UNSUPPORTED_CONTENT_TYPE"
    status_code = 415
    default_message = "There is no extractor for this content type; add an ingestion rule with a converter."


class IngestionRuleInvalid(DocumentError):
    code = "INGESTION_RULE_INVALID"
    default_message = "The ingestion rule is invalid."


class CallbackRejected(DocumentError):
    code = "CALLBACK_INVALID"
    status_code = 403
    default_message = "The converter callback URL is invalid."


class LedgerImmutable(MemoryEngineError):
    code = "LEDGER_IMMUTABLE"
    default_message = "Memory assertions are append-only and cannot be changed or deleted."


class LLMError(MemoryEngineError):
    """A chat-completion call failed; ``code`` is LLM_NOT_CONFIGURED, LLM_TIMEOUT,
    LLM_HTTP_ERROR or LLM_BAD_RESPONSE."""

    code = "LLM_ERROR"
    status_code = 503
    default_message = "The language model call failed."


class RuleHandlerFailed(MemoryEngineError):
    """A memory rule handler raised, timed out or answered something unusable."""

    code = "HANDLER_FAILED"
    default_message = "The memory rule handler failed."


class UnknownScope(MemoryEngineError):
    """Ids that name no store/document of the caller's project (never says which exist elsewhere)."""

    code = "UNKNOWN_SCOPE"
    default_message = "Some memory_store_ids or document_ids do not exist in your project."


class SearchParameterInvalid(MemoryEngineError):
    """A search knob out of range; ``code`` names the knob (LIMIT_INVALID, RRF_K_INVALID, ...)."""

    code = "SEARCH_PARAMETER_INVALID"
    default_message = "A search parameter is out of range."
