"""One small JSON-over-HTTP client with timeouts and retries, shared by HTTP providers."""

from __future__ import annotations

import functools
import logging
import ssl
import time
from typing import Any

import httpx

logger = logging.getLogger("memory_engine.providers")

RETRY_STATUSES = {408, 425, 429, 500, 502, 503, 504}


@functools.lru_cache(maxsize=1)
def _ssl_context() -> ssl.SSLContext:
    """Built once: loading the CA bundle costs ~40 ms, which httpx.post would pay per call."""
    return httpx.create_ssl_context()


class ProviderHTTPError(Exception):
    """An HTTP provider call failed after its retries."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        self.status = status
        super().__init__(message)


def post_json(
    url: str,
    payload: dict[str, Any],
    *,
    headers: dict[str, str] | None = None,
    timeout: float = 30.0,
    retries: int = 2,
    backoff: float = 0.25,
    content: bytes | None = None,
) -> Any:
    """POST JSON (or the given raw body) and return the decoded answer.

    Retries connection errors, timeouts and 408/429/5xx with exponential backoff;
    4xx answers are not retried. Raises ProviderHTTPError with a message fit for an
    operator (never containing secrets from the headers).
    """
    last_error = "no attempt made"
    status: int | None = None
    for attempt in range(retries + 1):
        if attempt:
            time.sleep(backoff * (2 ** (attempt - 1)))
        try:
            if content is not None:
                response = httpx.post(url, content=content, headers=headers, timeout=timeout,
                                      verify=_ssl_context())
            else:
                response = httpx.post(url, json=payload, headers=headers, timeout=timeout, verify=_ssl_context())
        except httpx.TimeoutException:
            last_error, status = f"timed out after {timeout}s", None
            continue
        except httpx.HTTPError as exc:
            last_error, status = f"connection failed: {exc.__class__.__name__}", None
            continue
        status = response.status_code
        if status in RETRY_STATUSES:
            last_error = f"answered HTTP {status}"
            continue
        if status >= 400:
            raise ProviderHTTPError(f"{url} answered HTTP {status}: {response.text[:200]}", status=status)
        try:
            return response.json()
        except ValueError as exc:
            raise ProviderHTTPError(f"{url} answered invalid JSON", status=status) from exc
    logger.warning("provider call failed", extra={"url": url, "error": last_error})
    raise ProviderHTTPError(f"{url} {last_error} ({retries + 1} attempts)", status=status)
