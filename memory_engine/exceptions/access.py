"""The caller may not (401, 403; a signed URL refused, used or expired: 403, 409, 410), or the
request names nothing it can reach (404)."""

from __future__ import annotations

from .base import MemoryEngineError


class AuthenticationRequired(MemoryEngineError):
    code = "AUTHENTICATION_REQUIRED"
    status_code = 401
    default_message = ("No credentials were sent: send your API key as `Authorization: Bearer <key>` (a staff "
                       "user's session works too).")


class AuthenticationFailed(MemoryEngineError):
    code = "AUTHENTICATION_FAILED"
    status_code = 401
    default_message = "Incorrect authentication credentials."


class PermissionDenied(MemoryEngineError):
    code = "PERMISSION_DENIED"
    status_code = 403
    default_message = "You do not have permission to perform this action."


class ReadOnlyKey(PermissionDenied):
    code = "READ_ONLY_KEY"
    default_message = "This API key is read-only; use a read-write key to change data."


class GrantRequired(PermissionDenied):
    code = "GRANT_REQUIRED"
    default_message = "Your grants do not allow this action on this object (see details.action)."


class PrincipalInactive(PermissionDenied):
    """A rule or a webhook subscription acts as the principal that set it up; that principal is gone."""

    code = "PRINCIPAL_INACTIVE"
    default_message = ("The key or user this rule or subscription acts as is revoked, deleted or no longer "
                       "a staff member of the project (see details.principal); set it up again as an active one.")


class ModelPermissionRequired(PermissionDenied):
    code = "MODEL_PERMISSION_REQUIRED"
    default_message = "Your user lacks the Django model permission this request needs (see details.missing)."


class CallbackRejected(PermissionDenied):
    """A signed converter URL (callback or file download) refused; groups the codes below."""

    code = "CALLBACK_INVALID"
    default_message = "The converter callback URL is invalid."


class CallbackSignatureInvalid(CallbackRejected):
    code = "CALLBACK_SIGNATURE_INVALID"
    default_message = "The callback token or signature is missing or invalid."


class DownloadSignatureInvalid(CallbackRejected):
    code = "DOWNLOAD_SIGNATURE_INVALID"
    default_message = "The download token is missing or invalid."


class CallbackExpired(CallbackRejected):
    code = "CALLBACK_EXPIRED"
    status_code = 410
    default_message = "The callback URL has expired; re-ingest the document."


class DownloadExpired(CallbackRejected):
    code = "DOWNLOAD_EXPIRED"
    status_code = 410
    default_message = "The download URL has expired."


class CallbackUsed(CallbackRejected):
    code = "CALLBACK_USED"
    status_code = 409
    default_message = "This callback URL was already used (or superseded by a newer ingestion)."


class NotFound(MemoryEngineError):
    code = "NOT_FOUND"
    status_code = 404
    default_message = "Not found."


class MemoryStoreNotFound(NotFound):
    code = "MEMORY_STORE_NOT_FOUND"
    default_message = "No memory store with this id exists in your project."


class AgentNotFound(NotFound):
    code = "AGENT_NOT_FOUND"
    default_message = "No agent with this id exists in your project."


class GenerationNotFound(NotFound):
    code = "GENERATION_NOT_FOUND"
    default_message = "No generation with this id exists in your project."


class RuleNotFound(NotFound):
    code = "RULE_NOT_FOUND"
    default_message = "No rule with this id exists in your project."


class DistillerNotFound(NotFound):
    code = "DISTILLER_NOT_FOUND"
    default_message = "No distiller with this id exists in your project."


class DocumentVersionNotFound(NotFound):
    code = "DOCUMENT_VERSION_NOT_FOUND"
    default_message = "This document has no version with this id."


class ProjectNotFound(NotFound):
    code = "PROJECT_NOT_FOUND"
    default_message = "No such project."


class TransformConfigNotFound(NotFound):
    code = "TRANSFORM_CONFIG_NOT_FOUND"
    default_message = "No transform config with this id or name in your project."


class StagedGenerationNotFound(NotFound):
    code = "STAGED_GENERATION_NOT_FOUND"
    default_message = "No staged generation (replay run) with this id in your project."


class StagedGenerationForbidden(PermissionDenied):
    code = "STAGED_GENERATION_FORBIDDEN"
    default_message = ("Staged generations (generation search, promote, demote) are for staff sessions only; "
                       "API keys cannot use them.")


class LinkEndNotFound(NotFound):
    code = "LINK_END_NOT_FOUND"
    default_message = ("An end of the link is not a memory or document version of this project "
                       "(both ends must be in the link's project; see details.field).")


class LinkNotFound(NotFound):
    code = "LINK_NOT_FOUND"
    default_message = "No evidence link with this id in your project."


class EntityNotFound(NotFound):
    code = "ENTITY_NOT_FOUND"
    default_message = "No entity with this id in your project (or none you can see)."
