"""Database connections across ``fork()`` and the engine's own threads.

A forked process inherits its parent's open PostgreSQL sockets and, with Django's psycopg pool
(``DATABASES[...]["OPTIONS"]["pool"]``), the pool object too: its idle connections, but not the
threads that open, check and return them. django-q2 forks its sentinel from ``qcluster`` (whose
system checks have opened the pool) and its workers, pusher and monitor from the sentinel;
gunicorn ``--preload`` forks its workers from a master that imported the application. Each
child then speaks on the same server sessions as its parent and siblings (replies land in the
wrong process: "can't change 'autocommit' now", "unexpected result EMPTY_QUERY from command
'BEGIN'", a worker waiting forever for a reply another process read) and waits in vain for its
pool to grow ("couldn't get a connection after 30 sec").

:func:`forget_inherited_connections` runs in every child right after the fork (registered by
the app's ``ready()``): the child lets go of what it inherited without closing it (closing
would end the parent's session: libpq sends Terminate on the shared socket) and opens its own
connections, and its own pool, on first use. The parent keeps its own untouched.

:func:`closes_connections` wraps the target of a thread the engine starts, so the connections
that thread opened go back (to the pool, or are closed) when it ends instead of staying
checked out until the process exits.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

__all__ = ["closes_connections", "forget_inherited_connections", "register_fork_handler"]

P = ParamSpec("P")
R = TypeVar("R")

#: What this process inherited from the process that forked it: kept referenced, never closed
#: or finalized here (a pool's finalizer signals threads that exist only in the parent).
_inherited: list[Any] = []
_registered = False


def forget_inherited_connections() -> None:
    """In a process just forked: drop the Django connections and psycopg pools of the parent.

    Only the forking thread exists in the child, so its connections are the only ones left to
    drop; a pool is kept per process and per alias on the backend class (``_connection_pools``).
    """
    from django.db import connections

    for alias in connections:
        wrapper = connections[alias]
        if wrapper.connection is not None:
            _inherited.append(wrapper.connection)
            wrapper.connection = None
        wrapper.run_on_commit = []
        if wrapper.in_atomic_block:
            # Forked inside a transaction: it is the parent's; this process cannot go on with it.
            wrapper.closed_in_transaction = True
            wrapper.needs_rollback = True
        pools = getattr(type(wrapper), "_connection_pools", None)
        if pools:
            _inherited.extend(pools.values())
            pools.clear()


def register_fork_handler() -> None:
    """Run :func:`forget_inherited_connections` in every child this process forks (once per process)."""
    global _registered
    if _registered or not hasattr(os, "register_at_fork"):
        return
    os.register_at_fork(after_in_child=forget_inherited_connections)
    _registered = True


def closes_connections(target: Callable[P, R]) -> Callable[P, R]:
    """Wrap a thread's target: the Django connections it opened are closed (returned to the
    pool) when it returns or raises. Django does this for request threads and django-q2 for
    tasks; a thread of the engine's own (an extractor, a converter call) has nobody else to."""

    @functools.wraps(target)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        from django.db import connections

        try:
            return target(*args, **kwargs)
        finally:
            connections.close_all()

    return run
