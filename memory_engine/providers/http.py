"""One small JSON-over-HTTP client with timeouts and retries, shared by HTTP providers.

Calls to URLs that API keys or staff configured (``guarded=True``, the default) connect only
to addresses the outbound guard allows (:mod:`memory_engine.guards`): the host is resolved
here and the connection made to a checked address, so a DNS answer cannot change between the
check and the connection. Redirects are never followed. Guarded calls go direct (no
``HTTP(S)_PROXY`` from the environment): the address checked must be the one reached.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import ssl
import time
from collections.abc import Iterable, Iterator
from typing import Any

import httpcore
import httpx

from memory_engine.conf import engine_settings
from memory_engine.guards import allowed_addresses
from memory_engine.text import redact_url

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


class RedactURLFilter(logging.Filter):
    """On the ``httpx`` logger: request URLs are logged without credentials or query string
    (HTTP handler and converter URLs may carry tokens)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(isinstance(arg, httpx.URL) for arg in record.args):
            record.args = tuple(redact_url(str(arg)) if isinstance(arg, httpx.URL) else arg for arg in record.args)
        return True


_httpx_logger = logging.getLogger("httpx")
if not any(isinstance(f, RedactURLFilter) for f in _httpx_logger.filters):
    _httpx_logger.addFilter(RedactURLFilter())


def scrub(text: str, headers: dict[str, str] | None) -> str:
    """``text`` with the values of the request's headers (keys, signatures) masked, in case
    the far end echoes them back in an error body."""
    for name, value in (headers or {}).items():
        if name.lower() == "content-type":
            continue
        for secret in {value, value.split(" ", 1)[-1]}:
            if len(secret) >= 8:
                text = text.replace(secret, "***")
    return text


class _GuardedBackend(httpcore.NetworkBackend):
    """Opens TCP connections only to addresses :func:`memory_engine.guards.allowed_addresses`
    allows for the host; TLS still verifies the certificate against the host name."""

    def __init__(self) -> None:
        self._backend = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        try:
            addresses = allowed_addresses(host, port)
        except (OSError, UnicodeError) as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
        error: Exception = httpcore.ConnectError(f"cannot connect to {host}")
        for address in addresses:
            try:
                return self._backend.connect_tcp(address, port, timeout=timeout, local_address=local_address,
                                                 socket_options=socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                error = exc
        raise error

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("unix sockets are not reachable from guarded calls")

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


class _GuardedTransport(httpx.HTTPTransport):
    """httpx's transport with its connection pool on :class:`_GuardedBackend`."""

    def __init__(self) -> None:
        super().__init__(verify=_ssl_context(), trust_env=False)
        # httpx offers no public way to pass a network backend; its pool is `_pool` (httpx 0.28).
        self._pool = httpcore.ConnectionPool(ssl_context=_ssl_context(), network_backend=_GuardedBackend())


@contextlib.contextmanager
def _post(url: str, *, content: bytes, headers: dict[str, str], timeout: float,
          guarded: bool) -> Iterator[httpx.Response]:
    transport = _GuardedTransport() if guarded else None
    with (
        httpx.Client(transport=transport, verify=_ssl_context(), timeout=timeout, follow_redirects=False) as client,
        client.stream("POST", url, content=content, headers=headers) as response,
    ):
        yield response


def _read_bounded(response: httpx.Response, *, deadline: float, max_bytes: int) -> bytes:
    """The body, refusing more than ``max_bytes`` or reading past ``deadline`` (a slow drip
    of bytes resets httpx's per-read timeout but not this one)."""
    received = bytearray()
    for chunk in response.iter_bytes():
        received += chunk
        if len(received) > max_bytes:
            raise ProviderHTTPError(f"answered more than {max_bytes} bytes", status=response.status_code)
        if time.monotonic() > deadline:
            raise httpx.ReadTimeout("total deadline exceeded")
    return bytes(received)


def post_json(
    url: str,
    payload: dict[str, Any],
    *,
    headers: dict[str, str] | None = None,
    timeout: float = 30.0,
    retries: int = 2,
    backoff: float = 0.25,
    content: bytes | None = None,
    guarded: bool = True,
) -> Any:
    """POST JSON (or the given raw body) and return the decoded answer.

    ``timeout`` bounds connecting and each read, and each attempt as a whole (capped by
    HTTP_MAX_SECONDS); answers over HTTP_MAX_RESPONSE_BYTES are refused. Retries connection
    errors, timeouts and 408/429/5xx with exponential backoff; 4xx answers are not retried,
    redirects are not followed. Raises ProviderHTTPError with a message fit for an operator
    (no credentials, query strings or header values), and URLNotAllowed, without
    retrying, when ``guarded`` and the host has no address the outbound guard allows. Pass
    ``guarded=False`` only for URLs from the deployment's own settings.
    """
    shown = redact_url(url)
    timeout = float(timeout)
    total = min(timeout, engine_settings.HTTP_MAX_SECONDS)
    max_bytes = engine_settings.HTTP_MAX_RESPONSE_BYTES
    body = content if content is not None else json.dumps(payload).encode()
    send_headers = {"Content-Type": "application/json", **(headers or {})}
    last_error = "no attempt made"
    status: int | None = None
    for attempt in range(retries + 1):
        if attempt:
            time.sleep(backoff * (2 ** (attempt - 1)))
        try:
            deadline = time.monotonic() + total
            with _post(url, content=body, headers=send_headers, timeout=timeout, guarded=guarded) as response:
                status = response.status_code
                if status in RETRY_STATUSES:
                    last_error = f"answered HTTP {status}"
                    continue
                data = _read_bounded(response, deadline=deadline, max_bytes=max_bytes)
        except httpx.TimeoutException:
            last_error, status = f"timed out after {timeout:g}s", None
            continue
        except httpx.HTTPError as exc:
            last_error, status = f"connection failed: {exc.__class__.__name__}", None
            continue
        except ProviderHTTPError as exc:
            raise ProviderHTTPError(f"{shown} {exc}", status=exc.status) from None
        if 300 <= status < 400:
            raise ProviderHTTPError(f"{shown} answered HTTP {status}, a redirect (redirects are not followed)",
                                    status=status)
        if status >= 400:
            text = scrub(data[:2000].decode("utf-8", "replace"), headers)[:200]
            raise ProviderHTTPError(f"{shown} answered HTTP {status}: {text}", status=status)
        try:
            return json.loads(data)
        except ValueError as exc:
            raise ProviderHTTPError(f"{shown} answered invalid JSON", status=status) from exc
    logger.warning("provider call failed: %s %s", shown, last_error, extra={"url": shown, "error": last_error})
    raise ProviderHTTPError(f"{shown} {last_error} ({retries + 1} attempts)", status=status)


def post_once(url: str, *, content: bytes, headers: dict[str, str], timeout: float) -> int:
    """POST ``content`` once through the outbound guard and return the HTTP status (any answer
    body up to HTTP_MAX_RESPONSE_BYTES is read and dropped). Redirects are not followed. A
    connection error or timeout raises ProviderHTTPError (operator-safe message), a refused
    address URLNotAllowed. For callers that keep their own retry schedule (webhooks)."""
    shown = redact_url(url)
    total = min(float(timeout), engine_settings.HTTP_MAX_SECONDS)
    try:
        deadline = time.monotonic() + total
        with _post(url, content=content, headers={"Content-Type": "application/json", **headers},
                   timeout=float(timeout), guarded=True) as response:
            _read_bounded(response, deadline=deadline, max_bytes=engine_settings.HTTP_MAX_RESPONSE_BYTES)
            return response.status_code
    except httpx.TimeoutException:
        raise ProviderHTTPError(f"{shown} timed out after {timeout:g}s") from None
    except httpx.HTTPError as exc:
        raise ProviderHTTPError(f"{shown} connection failed: {exc.__class__.__name__}") from None
