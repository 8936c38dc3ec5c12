"""Read replicas (docs/scaling.md, *Read replicas*): reads that may run on a streaming replica do,
everything else stays on the primary.

Off until ``MEMORY_ENGINE["READ_REPLICAS"]`` names aliases of ``DATABASES`` (and the host adds
:class:`ReplicaRouter` to ``DATABASE_ROUTERS``). Then the reads of a request that only reads —
listings, details, search, the agent context and read tools, the feed — run on a replica, chosen
per request by :func:`reads_from_replica`; every write, every read inside a write and every read
of a request that writes stays on the primary. A principal's reads wait for its own writes: each
write records the primary's WAL position for its principal (:func:`note_write`, in the cache for
``READ_YOUR_WRITES_SECONDS``), and until a replica has replayed that far the principal reads from
the primary. A replica that cannot be reached is left alone for ``REPLICA_RETRY_SECONDS`` and
the request reads from the primary; one that fails mid-request is retried there by the caller.

Search runs on a replica only when the replica's lexical channel answers there: pg_textsearch
before 1.3 keeps part of its bm25 index in the primary's memory only (docs/retrieval.md,
*Restarts*), and such a replica finds nothing lexically, so the search stays on the primary.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from typing import Any

from django.core.cache import cache
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

from memory_engine.conf import engine_settings

logger = logging.getLogger("memory_engine.replicas")

__all__ = ["ReplicaRouter", "current_read_alias", "mark_down", "note_write", "read_connection", "reading_replica",
           "reads_from_replica", "replica_aliases"]

_read_alias: ContextVar[str | None] = ContextVar("memory_engine_read_alias", default=None)
#: alias -> monotonic time until which it is not tried again (per process).
_down_until: dict[str, float] = {}
#: alias -> whether search may run there (per process, checked once).
_searchable: dict[str, bool] = {}
#: pg_textsearch from this version WAL-logs its whole index: a replica answers BM25 like the primary.
LEXICAL_REPLICATED_FROM = (1, 3)


def replica_aliases() -> list[str]:
    return list(engine_settings.READ_REPLICAS)


def current_read_alias() -> str:
    """The alias reads of this request (or task) run on now: a replica inside
    :func:`reads_from_replica`, else the primary."""
    return _read_alias.get() or DEFAULT_DB_ALIAS


def reading_replica() -> bool:
    return _read_alias.get() is not None


def read_connection() -> Any:
    """The connection for raw read SQL (search): the replica chosen for this request, or the primary."""
    return connections[current_read_alias()]


class ReplicaRouter:
    """``DATABASE_ROUTERS = ["memory_engine.replicas.ReplicaRouter"]``: the ORM's reads follow
    :func:`reads_from_replica`; writes and migrations go to the primary."""

    def db_for_read(self, model: Any, **hints: Any) -> str | None:
        return _read_alias.get()

    def db_for_write(self, model: Any, **hints: Any) -> str | None:
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool | None:
        return True

    def allow_migrate(self, db: str, app_label: str, model_name: str | None = None, **hints: Any) -> bool | None:
        return False if db in replica_aliases() else None


def mark_down(alias: str, exc: BaseException | None = None) -> None:
    """Leave ``alias`` alone for REPLICA_RETRY_SECONDS (its connection is dropped)."""
    _down_until[alias] = time.monotonic() + engine_settings.REPLICA_RETRY_SECONDS
    logger.warning("read replica %s unavailable, reading from the primary for %ss: %s", alias,
                   engine_settings.REPLICA_RETRY_SECONDS, exc, extra={"alias": alias})
    with suppress(DatabaseError):
        connections[alias].close()


def _position_key(principal: str) -> str:
    return f"memory_engine:replicas:written:{principal}"


def note_write(principal: str) -> None:
    """After ``principal``'s write committed: its later reads wait for a replica that replayed it."""
    if not replica_aliases():
        return
    try:
        with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
            cursor.execute("SELECT pg_current_wal_lsn()::text")
            position = cursor.fetchone()[0]
    except DatabaseError:
        return
    cache.set(_position_key(principal), position, engine_settings.READ_YOUR_WRITES_SECONDS)


def _caught_up(cursor: Any, principal: str) -> bool:
    position = cache.get(_position_key(principal))
    if position is None:
        return True
    cursor.execute("SELECT COALESCE(pg_wal_lsn_diff(pg_last_wal_replay_lsn(), %s::pg_lsn) >= 0, true)", [position])
    return bool(cursor.fetchone()[0])


def _can_search(alias: str, cursor: Any) -> bool:
    if alias not in _searchable:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'pg_textsearch'")
        row = cursor.fetchone()
        version = tuple(int(part) for part in row[0].split(".")[:2]) if row else None
        cursor.execute("SELECT count(*) FROM pg_indexes WHERE indexdef ILIKE '%% USING bm25%%'")
        uses_bm25 = bool(cursor.fetchone()[0])
        _searchable[alias] = not uses_bm25 or (version is not None and version >= LEXICAL_REPLICATED_FROM)
    return _searchable[alias]


def choose_replica(principal: str, *, search: bool = False) -> str | None:
    """A replica that can serve ``principal`` now (reachable, caught up with its writes, and for a
    search one whose lexical channel answers); None: the primary."""
    now = time.monotonic()
    for alias in replica_aliases():
        if _down_until.get(alias, 0) > now:
            continue
        try:
            with connections[alias].cursor() as cursor:
                if not _caught_up(cursor, principal):
                    return None  # its own write is not there yet: the primary has it
                if search and not _can_search(alias, cursor):
                    return None
            return alias
        except DatabaseError as exc:
            mark_down(alias, exc)
    return None


@contextmanager
def reads_from_replica(principal: str, *, search: bool = False) -> Iterator[str]:
    """Run the reads inside on a replica when one can serve ``principal``; yields the alias used."""
    alias = choose_replica(principal, search=search) if replica_aliases() else None
    token = _read_alias.set(alias)
    try:
        yield alias or DEFAULT_DB_ALIAS
    finally:
        _read_alias.reset(token)


def use_primary() -> Any:
    """Switch the reads of the current context back to the primary (after a replica failed)."""
    return _read_alias.set(None)
