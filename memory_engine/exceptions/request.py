"""The request is wrong, in its content (400) or its form: a method or media type not taken
(405, 406, 415), too large (413), too often or over quota (429).

The caller may not or the request names nothing: :mod:`.access`; it does not fit the state of the
data: :mod:`.conflict`."""

from __future__ import annotations

from .base import MemoryEngineError


class ValidationFailed(MemoryEngineError):
    code = "VALIDATION_ERROR"
    default_message = "The request is invalid."


class QueryRequired(ValidationFailed):
    """A search with neither a query nor a scope to list: nothing to do, said plainly."""

    code = "QUERY_REQUIRED"
    default_message = ("Send a non-empty `query`, or name what to list without one (memory_store_ids, "
                       "document_ids, document_paths, tags or agent_id: its first rows in order).")


class UnknownField(ValidationFailed):
    """A field the endpoint (or tool) does not take: refused, never silently ignored."""

    code = "UNKNOWN_FIELD"
    default_message = "The request names fields this endpoint does not take (see details.fields)."


class FieldReadOnly(ValidationFailed):
    """A field the operation shows but cannot change: refused, never silently kept as it was."""

    code = "FIELD_READ_ONLY"
    default_message = "The request sets fields this operation cannot change (see details.fields)."


class MalformedRequest(MemoryEngineError):
    code = "MALFORMED_REQUEST"
    default_message = "The request is malformed."


class JSONSentAsForm(MalformedRequest):
    """A JSON document sent without ``Content-Type: application/json``: read as a form, its
    whole text would be one unknown field name."""

    code = "JSON_SENT_AS_FORM"
    default_message = ("The body looks like JSON but was read as a form (its Content-Type is "
                       "application/x-www-form-urlencoded, curl's default for -d); send it with the header "
                       "`Content-Type: application/json`.")


class JSONTooDeep(MemoryEngineError):
    code = "JSON_TOO_DEEP"
    default_message = "The JSON body is nested too deeply (MAX_JSON_DEPTH)."


class InputInvalid(MemoryEngineError):
    """Text the database cannot store (NUL characters) or values out of its range."""

    code = "INPUT_INVALID"
    default_message = "The request contains a value the database cannot store (e.g. a NUL character)."


class TitleTooLong(ValidationFailed):
    code = "TITLE_TOO_LONG"
    default_message = "The document title is longer than MAX_TITLE_CHARS."


class ExternalRefInvalid(ValidationFailed):
    code = "EXTERNAL_REF_INVALID"
    default_message = "`source` and `external_ref` must be non-empty, printable and short enough."


class ContentEmpty(MemoryEngineError):
    code = "CONTENT_EMPTY"
    default_message = "Memory content is empty; send a non-blank `content` string."


class FeedCursorInvalid(ValidationFailed):
    code = "FEED_CURSOR_INVALID"
    default_message = "`after` is not a cursor of this feed; send a `next_cursor` it returned, or omit it."


class ContentInvalid(ValidationFailed):
    code = "CONTENT_INVALID"
    default_message = "`content` must be a string without NUL characters."


class ContentTooLong(MemoryEngineError):
    code = "CONTENT_TOO_LONG"
    default_message = "Memory content is too long."


class ThresholdsInvalid(MemoryEngineError):
    code = "THRESHOLDS_INVALID"
    default_message = "Thresholds must lie in [0, 1] with supersede_threshold <= duplicate_threshold."


class ThresholdsNotAllowed(ValidationFailed):
    code = "THRESHOLDS_NOT_ALLOWED"
    default_message = "The write_memory tool writes on the store's thresholds only."


class AboutRequired(MemoryEngineError):
    code = "ABOUT_REQUIRED"
    default_message = "This store requires an `about` key for this kind of memory."


class InstructionRejected(MemoryEngineError):
    """The text (or a string in its tags/metadata/about) reads as instructions to an AI."""

    code = "INSTRUCTION_REJECTED"
    default_message = ("The memory reads as instructions to an AI (overriding instructions, addressing a model, "
                       "or a chat-template marker); memories hold facts, not instructions.")


class FacetInvalid(MemoryEngineError):
    code = "FACET_INVALID"
    default_message = ("`facet` must be 1-128 ASCII letters, digits and . _ : / -, starting with a letter or digit.")


class SubjectInvalid(MemoryEngineError):
    code = "SUBJECT_INVALID"
    default_message = ("A subject (an end user's external id) must be a string of 1-200 characters without NUL "
                       "or surrounding whitespace.")


class TierInvalid(MemoryEngineError):
    """A store's tier and its owner disagree (user needs a subject, agent an agent, institutional neither)."""

    code = "TIER_INVALID"
    default_message = ("`tier` is user (with `subject_external_id`), agent (with `agent_id`) or institutional "
                       "(with neither).")


class TierImmutable(MemoryEngineError):
    code = "TIER_IMMUTABLE"
    default_message = "A store's tier and owner (subject or agent) are fixed at creation; create another store."


class LifetimeInvalid(MemoryEngineError):
    code = "LIFETIME_INVALID"
    default_message = ("A store's `ttl_default` and `ttl_max` are positive seconds (default not above max) "
                       "and `trash_days` a non-negative number of days.")


class KindUnknown(MemoryEngineError):
    code = "KIND_UNKNOWN"
    default_message = "The project's memory schema does not declare this kind."


class SchemaInvalid(MemoryEngineError):
    code = "SCHEMA_INVALID"
    default_message = ("A memory schema's `kinds` and `relation_types` must be lists of "
                       "{name, display_name?, description?} with unique names.")


class ConfidenceInvalid(MemoryEngineError):
    code = "CONFIDENCE_INVALID"
    default_message = "`confidence` must be a number between 0 and 1."


class ExpiresAtInvalid(MemoryEngineError):
    code = "EXPIRES_AT_INVALID"
    default_message = "`expires_at` must be a date-time with a time zone, in the future."


class ProjectRequired(MemoryEngineError):
    code = "PROJECT_REQUIRED"
    default_message = "Staff sessions must name a project with the X-Project-Id header or ?project_id=."


class UnknownScope(MemoryEngineError):
    """Ids that name no store/document of the caller's project (never says which exist elsewhere)."""

    code = "UNKNOWN_SCOPE"
    default_message = "Some memory_store_ids or document_ids do not exist in your project."


class SearchParameterInvalid(MemoryEngineError):
    """A search knob out of range; groups the codes below, one class per knob."""

    default_message = "A search parameter is out of range."


class LimitInvalid(SearchParameterInvalid):
    code = "LIMIT_INVALID"
    default_message = "`limit` is out of range."


class MinSimilarityInvalid(SearchParameterInvalid):
    code = "MIN_SIMILARITY_INVALID"
    default_message = "`min_similarity` is out of range."


class MinRelevanceInvalid(SearchParameterInvalid):
    code = "MIN_RELEVANCE_INVALID"
    default_message = "`min_relevance` lies in [0, 1]."


class RRFKInvalid(SearchParameterInvalid):
    code = "RRF_K_INVALID"
    default_message = "`rrf_k` is out of range."


class HalfLifeInvalid(SearchParameterInvalid):
    code = "HALF_LIFE_INVALID"
    default_message = "`recency_half_life_days` is out of range."


class WeightInvalid(SearchParameterInvalid):
    code = "WEIGHT_INVALID"
    default_message = "`vector_weight` and `lexical_weight` lie in [0, 100]."


class TagFilterTooLarge(ValidationFailed):
    code = "TAG_FILTER_TOO_LARGE"
    default_message = "The tags filter names more keys than MAX_TAG_FILTER_KEYS."


class KnowledgeConfigInvalid(ValidationFailed):
    code = "KNOWLEDGE_CONFIG_INVALID"
    default_message = "The agent's knowledge configuration has unknown or malformed keys."


class ToolFormatInvalid(ValidationFailed):
    code = "TOOL_FORMAT_INVALID"
    default_message = "Unknown tool-schema `provider`."


class NoWriteMemoryStore(ValidationFailed):
    code = "NO_WRITE_MEMORY_STORE"
    default_message = "The agent has no write memory store; set its write_memory_store_id first."


class GenerationAgentMismatch(ValidationFailed):
    code = "GENERATION_AGENT_MISMATCH"
    default_message = "The generation belongs to another agent."


class HandlerInvalid(ValidationFailed):
    """A memory rule's handler type or configuration is wrong."""

    code = "HANDLER_INVALID"
    default_message = "The memory rule handler configuration is invalid."


class NotAllowed(ValidationFailed):
    """Configuration asking for more than its author is trusted with (memory_engine.guards).

    Raised at configuration time (400) and when a call is made (recorded on the rule firing
    or the document). Groups the four guards' codes below.
    """

    default_message = "This configuration is not allowed; ask an operator."


class CallableNotAllowed(NotAllowed):
    code = "CALLABLE_NOT_ALLOWED"
    default_message = "The rule handler's callable is not under RULE_CALLABLE_PREFIXES; ask an operator."


class ConverterNotAllowed(NotAllowed):
    code = "CONVERTER_NOT_ALLOWED"
    default_message = "The converter callable is not under CONVERTER_CALLABLE_PREFIXES; ask an operator."


class LLMOverrideNotAllowed(NotAllowed):
    code = "LLM_OVERRIDE_NOT_ALLOWED"
    default_message = "Memory rules on this deployment may not change this setting of its language model."


class URLNotAllowed(NotAllowed):
    code = "URL_NOT_ALLOWED"
    default_message = "The URL is not http(s) or leads to a private, loopback or link-local address."


class PathInvalid(MemoryEngineError):
    code = "PATH_INVALID"
    default_message = "Document paths look like /folder/name.pdf: no `..`, backslashes or control characters."


class IngestionRuleInvalid(MemoryEngineError):
    code = "INGESTION_RULE_INVALID"
    default_message = "The ingestion rule is invalid."


class RuleExists(IngestionRuleInvalid):
    code = "RULE_EXISTS"
    default_message = "Another ingestion rule already handles this content type glob; edit it instead."


class RuleAmbiguous(IngestionRuleInvalid):
    code = "RULE_AMBIGUOUS"
    default_message = "Another ingestion rule is exactly as specific and matches the same content types."


class CallbackBodyInvalid(ValidationFailed):
    code = "CALLBACK_BODY_INVALID"
    default_message = "Send the pages: {\"pages\": [...]}."


class LedgerImmutable(MemoryEngineError):
    code = "LEDGER_IMMUTABLE"
    default_message = "Memory assertions are append-only and cannot be changed or deleted."


class MethodNotAllowed(MemoryEngineError):
    code = "METHOD_NOT_ALLOWED"
    status_code = 405
    default_message = "Method not allowed."


class NotAcceptable(MemoryEngineError):
    code = "NOT_ACCEPTABLE"
    status_code = 406
    default_message = "Could not satisfy the request Accept header; accept JSON."


class RequestTooLarge(MemoryEngineError):
    code = "REQUEST_TOO_LARGE"
    status_code = 413
    default_message = "The request body is larger than DATA_UPLOAD_MAX_MEMORY_SIZE."


class FileTooLarge(RequestTooLarge):
    code = "FILE_TOO_LARGE"
    default_message = "The file is larger than MAX_UPLOAD_BYTES."

    @classmethod
    def sized(cls, size: int, limit: int, *, what: str = "The file", overhead: int = 0) -> FileTooLarge:
        """The error for ``size`` bytes over ``limit`` (MAX_UPLOAD_BYTES, plus ``overhead``: the
        multipart framing a request body may add), said in MiB with the settings' names; the byte
        figures in ``details``."""
        setting = "MEMORY_ENGINE['MAX_UPLOAD_BYTES']"
        if overhead:
            setting += (f" = {human_bytes(limit - overhead)} + MULTIPART_OVERHEAD_BYTES = {human_bytes(overhead)} "
                        "for the request's framing")
        return cls(f"{what} is {human_bytes(size)}; the limit is {human_bytes(limit)} ({setting}).",
                   details={"bytes": size, "max_bytes": limit})


def human_bytes(count: int) -> str:
    """``count`` bytes as a person reads a size: ``"51 MiB"``, ``"60.2 MiB"``, ``"512 KiB"``, ``"900 bytes"``."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count // size} {unit}" if count % size == 0 else f"{count / size:.1f} {unit}"
    return f"{count} byte{'' if count == 1 else 's'}"


class BatchTooLarge(RequestTooLarge):
    code = "BATCH_TOO_LARGE"
    default_message = ("The batch holds more items than its limit (MAX_BATCH_DOCUMENTS, MAX_BATCH_MEMORIES); send it "
                       "in smaller batches.")


class UnsupportedMediaType(MemoryEngineError):
    code = "UNSUPPORTED_MEDIA_TYPE"
    status_code = 415
    default_message = "The request's Content-Type is not accepted; send JSON or multipart."


class QuotaExceeded(MemoryEngineError):
    code = "QUOTA_EXCEEDED"
    status_code = 429
    default_message = "The project's storage quota is exhausted; delete data or raise the quota."


class Throttled(MemoryEngineError):
    code = "THROTTLED"
    status_code = 429
    default_message = "Request was throttled; retry after Retry-After seconds."


class TransformConfigInvalid(ValidationFailed):
    code = "TRANSFORM_CONFIG_INVALID"
    default_message = "The transform config is invalid (see details.field)."


class EmbeddingModelNotActive(ValidationFailed):
    code = "EMBEDDING_MODEL_NOT_ACTIVE"
    default_message = ("A transform config can only name the deployment's active embedding provider and model "
                       "(switch models with `manage.py memory_engine_embedding_model`).")


class EmbeddingModelUnknown(ValidationFailed):
    code = "EMBEDDING_MODEL_UNKNOWN"
    default_message = ("No such embedding model: name a key of MEMORY_ENGINE['EMBEDDING_MODELS'] (or EMBEDDING) "
                       "to register, or a registered model's name to build or switch to.")


class EmbeddingDimensionsTooLarge(ValidationFailed):
    code = "EMBEDDING_DIMENSIONS_TOO_LARGE"
    default_message = ("The model's vectors have more dimensions than an HNSW index takes: 2,000 as vector, "
                       "4,000 as halfvec.")


class EmbeddingProbeFailed(ValidationFailed):
    code = "EMBEDDING_PROBE_FAILED"
    default_message = "The embedding model did not answer the dimension probe (details.error says why)."


class LinkInvalid(ValidationFailed):
    code = "LINK_INVALID"
    default_message = "The evidence link is invalid (see details.field)."


class EntityMergeInvalid(ValidationFailed):
    code = "ENTITY_MERGE_INVALID"
    default_message = "The merge names no other entity, or the entity itself (see details.entity_ids)."
