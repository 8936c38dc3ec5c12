"""Run calls at once, each in a thread of its own: for tests of concurrent writers."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from django.db import close_old_connections, connection


def at_once(call: Callable[..., Any], arguments: Sequence[Any], *, expected: tuple[type[BaseException], ...] = (),
            timeout: float = 120) -> list[Any]:
    """``call(argument)`` for every argument, all released together (a barrier), each thread on a
    database connection of its own (closed at its end). Returns what the calls returned, in the
    order they finished; an exception of ``expected`` is returned in its place, any other fails."""
    barrier = threading.Barrier(len(arguments))
    results: list[Any] = []
    errors: list[BaseException] = []

    def run(argument: Any) -> None:
        try:
            barrier.wait(timeout=30)
            results.append(call(argument))
        except expected as exc:
            results.append(exc)
        except BaseException as exc:  # noqa: BLE001  (reported below)
            errors.append(exc)
        finally:
            close_old_connections()
            connection.close()

    threads = [threading.Thread(target=run, args=(argument,)) for argument in arguments]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout)
    assert not any(thread.is_alive() for thread in threads), "a writer did not finish"
    assert errors == [], errors
    return results
