"""Pending converters: the signed, single-use callback that delivers their pages."""

from __future__ import annotations

import json

from django.db import transaction
from django.utils import timezone

from memory_engine.exceptions import (
    CallbackBodyInvalid,
    CallbackExpired,
    CallbackSignatureInvalid,
    CallbackUsed,
    ConverterError,
    ConverterFailed,
    NotFound,
)
from memory_engine.models import Document
from memory_engine.models.documents import DocumentStatus
from memory_engine.providers.converters import parse_answer
from memory_engine.providers.signing import signature_matches
from memory_engine.queue import enqueue_document_ingest_on_commit

from .runs import fail_ingestion
from .tokens import CALLBACK_SALT, verified_token


def converter_callback(*, document_id: str, token: str, body: bytes, signature: str | None) -> Document:
    """Accept pages from a pending converter: signed, single use, before expiry.

    403 CALLBACK_SIGNATURE_INVALID (forged token or, when the rule has a secret, a missing
    or wrong ``X-Memory-Engine-Signature``), 410 CALLBACK_EXPIRED, 409 CALLBACK_USED.
    On success the document goes back to ``pending`` and a worker finishes it.
    """
    claims = verified_token(token, salt=CALLBACK_SALT, document_id=document_id, what="callback",
                            when_expired="re-ingest the document to ask the converter again",
                            invalid=CallbackSignatureInvalid, expired=CallbackExpired)
    # the document's project first (the URL names the document alone): the lock then names it,
    # which a distributed PostgreSQL needs for a row lock (docs/scaling.md)
    project_id = Document.objects.filter(pk=document_id).values_list("project_id", flat=True).first()
    with transaction.atomic():
        document = Document.objects.select_for_update().filter(project_id=project_id, pk=document_id).first()
        if document is None:
            raise NotFound("The document of this callback no longer exists.")
        state = dict(document.converter_state or {})
        callback = dict(state.get("callback") or {})
        if callback.get("nonce") != claims.get("n") or callback.get("used"):
            raise CallbackUsed("This callback URL was already used (or superseded by a newer ingestion).")
        rule = document.ingestion_rule
        if rule is not None and rule.converter_secret and not signature_matches(rule.converter_secret, body,
                                                                                  signature):
            raise CallbackSignatureInvalid("The X-Memory-Engine-Signature header does not match the body.")
        try:
            result = parse_answer(json.loads(body or b"null"), source="callback")
        except ValueError as exc:
            raise CallbackBodyInvalid("The body is not JSON; send {\"pages\": [...]}.") from exc
        except ConverterFailed as exc:  # the converter reports its own failure: recorded on the document
            state["callback"] = {**callback, "used": True}
            document.converter_state = state
            document.save(update_fields=["converter_state", "updated_at"])
            fail_ingestion(document.project_id, document_id, state.get("run"), exc)
            document.refresh_from_db()
            return document
        except ConverterError as exc:
            raise CallbackBodyInvalid(exc.message, details=exc.details) from exc
        if result.pending:
            raise CallbackBodyInvalid("Send the pages: {\"pages\": [...]}.")
        callback["used"] = True
        state["callback"] = callback
        state["delivered_pages"] = [{"text": page.text, "page": page.number} for page in result.pages]
        document.converter_state = state
        if state.get("awaiting_callback") and document.status == DocumentStatus.PROCESSING:
            document.status = DocumentStatus.PENDING
            enqueue_document_ingest_on_commit(document.pk, document.project_id)
        # else the converter's own run is still in flight and picks the pages up itself.
        document.heartbeat_at = timezone.now()
        document.save()
    return document
