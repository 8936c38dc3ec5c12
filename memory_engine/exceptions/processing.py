"""The server or a provider failed (5xx), and the failures recorded on rows: a document's
ingestion, a memory rule's firing (their ``status_code`` is the one a request meeting them
is answered with)."""

from __future__ import annotations

from .base import MemoryEngineError

# --- 500 / 503: the server or a provider ----------------------------------------------------------


class ServerError(MemoryEngineError):
    code = "SERVER_ERROR"
    status_code = 500
    default_message = "Internal server error."


class DatabaseUnavailable(MemoryEngineError):
    code = "DATABASE_UNAVAILABLE"
    status_code = 503
    default_message = "The database is unavailable; retry shortly."


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


class LLMError(MemoryEngineError):
    """A chat-completion call failed (recorded on rule firings and judge verdicts)."""

    code = "LLM_ERROR"
    status_code = 503
    default_message = "The language model call failed."


class LLMNotConfigured(LLMError):
    code = "LLM_NOT_CONFIGURED"
    default_message = "No language model is configured; set MEMORY_ENGINE['LLM'] = {'BASE_URL': ..., 'MODEL': ...}."


class LLMTimeout(LLMError):
    code = "LLM_TIMEOUT"
    default_message = "The model endpoint timed out."


class LLMHTTPError(LLMError):
    code = "LLM_HTTP_ERROR"
    default_message = "The model endpoint failed."


class LLMBadResponse(LLMError):
    code = "LLM_BAD_RESPONSE"
    default_message = "The model endpoint gave an unusable answer."


class JudgeUnparseable(LLMError):
    """Recorded in a memory assertion's ``details.judge.error_code``."""

    code = "JUDGE_UNPARSEABLE"
    default_message = "the judge's answer was neither yes nor no"


# --- recorded on a document: ingestion failures ---------------------------------------------------


class ExtractionError(MemoryEngineError):
    """A file that cannot be turned into pages (memory_engine.extraction); groups the codes below."""

    default_message = "The file cannot be read."


class EmptyFile(ExtractionError):
    code = "EMPTY_FILE"
    default_message = "The uploaded file is empty (0 bytes); upload the file again."


class TextDecodeError(ExtractionError):
    code = "TEXT_DECODE_ERROR"
    default_message = "The file is neither UTF-8 nor plain Latin-1 text; re-save it as UTF-8 and upload it again."


class UnsupportedContentType(ExtractionError):
    code = "UNSUPPORTED_CONTENT_TYPE"
    status_code = 415
    default_message = "There is no extractor for this content type; add an ingestion rule with a converter."


class PDFEncrypted(ExtractionError):
    code = "PDF_ENCRYPTED"
    default_message = "The PDF is password-protected; upload it again with the `password` field set."


class PDFDamaged(ExtractionError):
    code = "PDF_DAMAGED"
    default_message = "The PDF is damaged and could not be read."


class PDFTooLarge(ExtractionError):
    code = "PDF_TOO_LARGE"
    default_message = "The PDF has more pages than MAX_PDF_PAGES; split it."


class NoTextLayer(ExtractionError):
    code = "NO_TEXT_LAYER"
    default_message = "The PDF has no text layer (it is probably a scan); add an OCR converter rule."


class ChunkingError(MemoryEngineError, ValueError):
    """Chunking cannot proceed (memory_engine.chunking); groups the codes below."""

    default_message = "The document cannot be chunked."


class ChunkSettingsInvalid(ChunkingError):
    code = "CHUNK_SETTINGS_INVALID"
    default_message = "The chunk strategy, size or overlap is out of range."


class ChunkTooLarge(ChunkingError):
    code = "CHUNK_TOO_LARGE"
    default_message = "A `whole` chunk is longer than MAX_CHUNK_CHARS; use the recursive strategy."


class ConverterError(MemoryEngineError):
    """A converter failed or answered something unusable (memory_engine.providers.converters)."""

    default_message = "The converter failed."


class ConverterFailed(ConverterError):
    code = "CONVERTER_FAILED"
    default_message = "The converter failed or reported a failure."


class ConverterTimeout(ConverterError):
    code = "CONVERTER_TIMEOUT"
    default_message = "The converter did not answer in time."


class ConverterBadResponse(ConverterError):
    code = "CONVERTER_BAD_RESPONSE"
    default_message = "The converter answered an unexpected shape."


class ConverterEmpty(ConverterError):
    code = "CONVERTER_EMPTY"
    default_message = "The converter returned no text; check the converter and re-ingest the document."


class ConverterNotFound(ConverterError):
    """Also answered (400) when an ingestion rule names a callable that cannot be imported."""

    code = "CONVERTER_NOT_FOUND"
    default_message = "The converter callable cannot be imported."


class NoText(MemoryEngineError):
    code = "NO_TEXT"
    default_message = "No text was found in the document (every page is empty)."


class TooManyChunks(MemoryEngineError):
    code = "TOO_MANY_CHUNKS"
    default_message = "The document makes more chunks than MAX_CHUNKS_PER_DOCUMENT."


class FileMissing(MemoryEngineError):
    code = "FILE_MISSING"
    default_message = "The document has no stored file; upload it again."


class IngestionStalled(MemoryEngineError):
    code = "INGESTION_STALLED"
    default_message = "The worker stopped responding repeatedly; check the worker logs, then re-ingest."


class IngestionError(MemoryEngineError):
    code = "INGESTION_ERROR"
    default_message = "Ingestion stopped on an unexpected error; re-ingest it, and report it if it happens again."


# --- recorded on a generation: memory rule firings ------------------------------------------------


class RuleHandlerFailed(MemoryEngineError):
    """A memory rule handler raised, timed out or answered something unusable."""

    code = "HANDLER_FAILED"
    default_message = "The memory rule handler failed."


class HandlerTimeout(RuleHandlerFailed):
    code = "HANDLER_TIMEOUT"
    default_message = "The handler did not answer in time."


class HandlerHTTPError(RuleHandlerFailed):
    code = "HANDLER_HTTP_ERROR"
    default_message = "The handler's endpoint failed."


class HandlerBadResponse(RuleHandlerFailed):
    code = "HANDLER_BAD_RESPONSE"
    default_message = "The handler must answer a list of facts."


class HandlerNotFound(RuleHandlerFailed):
    code = "HANDLER_NOT_FOUND"
    default_message = "The handler's callable cannot be imported."


class UnparseableResponse(RuleHandlerFailed):
    code = "UNPARSEABLE_RESPONSE"
    default_message = "The model's answer holds no JSON array."


class InvalidFacts(RuleHandlerFailed):
    code = "INVALID_FACTS"
    default_message = "Some items were not a string or {content, tags}."


class WriteFailed(MemoryEngineError):
    code = "WRITE_FAILED"
    default_message = "Writing a fact failed."


class RuleFiringStalled(MemoryEngineError):
    code = "RULE_FIRING_STALLED"
    default_message = "The worker running this rule stopped repeatedly without finishing."
