"""Callable converters: ``fn(*, data, content_type, filename, document)`` by import path.

The call runs in a helper thread so the rule's ``converter_timeout`` holds: after it, the
ingestion fails with ``CONVERTER_TIMEOUT``. Python cannot stop a thread, so a callable
that hangs keeps its thread until it returns; give long-running work to an HTTP
converter that answers ``{"status": "pending"}`` instead.
"""

from __future__ import annotations

import concurrent.futures
import threading
from typing import Any

from django.utils.module_loading import import_string

from memory_engine.exceptions import ConverterError, ConverterFailed, ConverterNotFound, ConverterTimeout
from memory_engine.fork_safety import closes_connections

from . import ConverterRequest, ConverterResult, parse_answer


def load_callable(path: str) -> Any:
    try:
        function = import_string(path)
    except ImportError as exc:
        raise ConverterNotFound(f"Cannot import the converter {path!r}: {exc}",
                                details={"converter_path": path}) from exc
    if not callable(function):
        raise ConverterNotFound(f"{path!r} is not callable.", details={"converter_path": path})
    return function


def run_callable_converter(rule: Any, request: ConverterRequest) -> ConverterResult:
    function = load_callable(rule.converter_path)
    source = rule.converter_path
    outcome: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def call() -> None:
        try:
            outcome.set_result(function(data=request.data, content_type=request.content_type,
                                        filename=request.filename, document=request.document))
        except BaseException as exc:  # noqa: BLE001  (reported to the ingesting thread)
            outcome.set_exception(exc)

    # The converter may read the database: what it opens goes back when it returns.
    threading.Thread(target=closes_connections(call), name=f"converter:{source}", daemon=True).start()
    try:
        answer = outcome.result(timeout=rule.converter_timeout)
    except concurrent.futures.TimeoutError:
        raise ConverterTimeout(f"The converter {source} did not answer within {rule.converter_timeout:g}s.",
                               details={"timeout": rule.converter_timeout}) from None
    except ConverterError:
        raise
    except Exception as exc:
        raise ConverterFailed(f"The converter {source} raised {type(exc).__name__}: {exc}"[:500],
                              details={"error": type(exc).__name__}) from exc
    return parse_answer(answer, source=source)
