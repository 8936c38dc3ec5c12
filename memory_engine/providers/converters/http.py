"""HTTP converters: POST the file (base64 or a signed download URL) as JSON.

Request body::

    {"document": {"id", "path", "title", "content_type", "filename", "size_bytes", "sha256"},
     "file": "<base64>" | null, "download_url": "https://.../file" | null, "download_token": "..." | null,
     "callback_url": "https://.../converter-callback", "callback_token": "...", "sent_at": 1700000000}

When the rule has a secret, the header ``X-Memory-Engine-Signature: sha256=<hex>`` carries
HMAC-SHA256(secret, raw body) (:mod:`memory_engine.providers.signing`) so the converter can tell
the call is ours. The answer is ``{"pages": [...]}`` or ``{"status": "pending"}`` (then
``POST {"pages": [...]}`` to ``callback_url`` later, signed the same way). The download and the callback carry their
token in the ``X-Memory-Engine-Token`` header, never in the URL (URLs reach access logs).
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from typing import Any

from memory_engine.conf import engine_settings
from memory_engine.exceptions import ConverterFailed, ConverterTimeout
from memory_engine.providers.http import ProviderHTTPError, post_json
from memory_engine.providers.signing import SIGNATURE_HEADER, sign_body

from . import ConverterRequest, ConverterResult, parse_answer

#: Carries the signed token of a callback or download URL.
TOKEN_HEADER = "X-Memory-Engine-Token"


def run_http_converter(rule: Any, request: ConverterRequest) -> ConverterResult:
    document = request.document
    use_url = rule.file_delivery == "download_url"
    payload = {
        "document": {
            "id": document.pk, "path": document.path, "title": document.title,
            "content_type": request.content_type, "filename": request.filename,
            "size_bytes": len(request.data), "sha256": hashlib.sha256(request.data).hexdigest(),
        },
        "file": None if use_url else base64.b64encode(request.data).decode("ascii"),
        "download_url": request.download_url if use_url else None,
        "download_token": request.download_token if use_url else None,
        "callback_url": request.callback_url,
        "callback_token": request.callback_token,
        "sent_at": int(time.time()),
    }
    body = json.dumps(payload).encode()
    headers = {"Content-Type": "application/json"}
    if rule.converter_secret:
        headers[SIGNATURE_HEADER] = sign_body(rule.converter_secret, body)
    try:
        answer = post_json(rule.converter_url, payload, content=body, headers=headers,
                           timeout=rule.converter_timeout, retries=engine_settings.HTTP_RETRIES)
    except ProviderHTTPError as exc:
        # The outbound guard's URLNotAllowed passes through: the pipeline records it on the document.
        error = ConverterTimeout if "timed out" in str(exc) else ConverterFailed
        raise error(f"The HTTP converter failed: {exc}", details={"status": exc.status}) from exc
    return parse_answer(answer, source=rule.converter_url)
