"""Secrets at rest and signed URLs: the sealed PDF password, the converter's download URL
and its single-use callback URL (tokens travel in the X-Memory-Engine-Token header)."""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from typing import Any

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings
from django.core import signing
from django.urls import NoReverseMatch, reverse

from memory_engine.conf import engine_settings
from memory_engine.exceptions import (
    CallbackRejected,
    DownloadExpired,
    DownloadSignatureInvalid,
    NotFound,
    PDFEncrypted,
)
from memory_engine.models import Document

CALLBACK_SALT = "memory_engine.documents.converter-callback"
DOWNLOAD_SALT = "memory_engine.documents.download"


def _fernet() -> Fernet:
    key = hashlib.sha256(b"memory_engine.pdf-password:" + settings.SECRET_KEY.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(key))


def seal_password(password: str | None) -> str | None:
    return _fernet().encrypt(password.encode()).decode() if password else None


def open_password(document: Document) -> str | None:
    sealed = (document.converter_state or {}).get("password")
    if not sealed:
        return None
    try:
        return _fernet().decrypt(sealed.encode()).decode()
    except InvalidToken:
        # SECRET_KEY changed since upload: ask for the password again rather than crash.
        raise PDFEncrypted("The stored PDF password can no longer be read (the server's SECRET_KEY changed); "
                           "re-ingest with the `password` field set.",
                           details={"reason": "password_unreadable"}) from None


def _absolute(document: Document, view_name: str) -> str:
    # The token never goes into the URL (URLs end up in access logs); it travels in the
    # X-Memory-Engine-Token header.
    try:
        path = reverse(f"memory_engine:{view_name}", kwargs={"pk": document.pk})
    except NoReverseMatch:
        path = reverse(view_name, kwargs={"pk": document.pk})
    base = (engine_settings.PUBLIC_BASE_URL or (document.converter_state or {}).get("base_url") or "").rstrip("/")
    return f"{base}{path}"


def download_token(document: Document) -> tuple[str, str]:
    """``(url, token)`` serving the stored file for DOWNLOAD_URL_TTL seconds to a GET that
    sends the token in the X-Memory-Engine-Token header."""
    expires = int(time.time() + engine_settings.DOWNLOAD_URL_TTL)
    token = signing.dumps({"d": document.pk, "e": expires, "s": document.sha256[:16]}, salt=DOWNLOAD_SALT)
    return _absolute(document, "document-file"), token


def document_for_download(*, document_id: str, token: str) -> Document:
    """The document a download token grants, or 403/410/404."""
    claims = verified_token(token, salt=DOWNLOAD_SALT, document_id=document_id, what="download",
                            when_expired="the converter must fetch the file sooner",
                            invalid=DownloadSignatureInvalid, expired=DownloadExpired)
    document = Document.objects.filter(pk=document_id).first()
    if document is None or not document.file or document.sha256[:16] != claims.get("s"):
        raise NotFound("The file of this download URL no longer exists.")
    return document


def verified_token(token: str, *, salt: str, document_id: str, what: str, when_expired: str,
                   invalid: type[CallbackRejected], expired: type[CallbackRejected]) -> dict[str, Any]:
    """The payload of a signed URL token; ``invalid`` (a forged token, or one for another
    document) or ``expired`` otherwise. ``what`` names the URL in the messages."""
    try:
        claims = signing.loads(token or "", salt=salt)
    except signing.BadSignature:
        raise invalid(f"The {what} token is missing or invalid; send it in the X-Memory-Engine-Token "
                      "header.") from None
    if not isinstance(claims, dict) or claims.get("d") != document_id:
        raise invalid(f"The {what} URL belongs to another document.")
    if claims.get("e", 0) < time.time():
        raise expired(f"The {what} URL has expired; {when_expired}.")
    return claims


def new_callback(document: Document) -> tuple[dict[str, Any], str, str]:
    """``(state to keep, callback URL, its single-use token)``."""
    nonce = secrets.token_urlsafe(16)
    expires = int(time.time() + engine_settings.CONVERTER_CALLBACK_TTL)
    token = signing.dumps({"d": document.pk, "n": nonce, "e": expires}, salt=CALLBACK_SALT)
    return {"nonce": nonce, "expires_at": expires}, _absolute(document, "document-converter-callback"), token
