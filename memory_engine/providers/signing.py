"""The one signer of outbound calls (HTTP converters, HTTP rule handlers) and of the
inbound converter callback.

``X-Memory-Engine-Signature: sha256=<hex>`` is HMAC-SHA256 with the configured secret
over the raw body, or over ``timestamp + "." + body`` when the call also sends
``X-Memory-Engine-Timestamp`` (rule handlers do, so a receiver can reject replays).
The two wire formats are documented in docs/documents.md (converters and their
callback: body only) and docs/rules.md (rule handlers: timestamped).
"""

from __future__ import annotations

import hashlib
import hmac

__all__ = ["SIGNATURE_HEADER", "TIMESTAMP_HEADER", "sign_body", "signature_matches"]

SIGNATURE_HEADER = "X-Memory-Engine-Signature"
TIMESTAMP_HEADER = "X-Memory-Engine-Timestamp"


def sign_body(secret: str, body: bytes, *, timestamp: str | None = None) -> str:
    """``sha256=<hex>``: HMAC-SHA256(secret, body), or of ``timestamp + "." + body``."""
    message = body if timestamp is None else timestamp.encode() + b"." + body
    return "sha256=" + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def signature_matches(secret: str, body: bytes, header: str | None, *, timestamp: str | None = None) -> bool:
    """Whether ``header`` is the signature of ``body`` (constant-time comparison)."""
    return bool(header) and hmac.compare_digest(sign_body(secret, body, timestamp=timestamp), header or "")
