"""A real streaming replica of the test server: ``pg_basebackup`` of the embedded PostgreSQL and a
hot standby on a loopback port, started once for the module and stopped after it. Tests add it to
``DATABASES`` as ``replica`` for their own duration (``replica`` fixture)."""

from __future__ import annotations

import importlib.util
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, connections

from memory_engine.embedded import EmbeddedStandby

ALIAS = "replica"


class Standby(EmbeddedStandby):
    """The engine's embedded standby, with the waits a test needs."""

    def execute(self, sql: str) -> Any:
        with connections[ALIAS].cursor() as cursor:
            cursor.execute(sql)
            return cursor.fetchone() if cursor.description else None

    def catch_up(self, timeout: float = 30) -> None:
        """Wait until the standby has replayed everything the primary committed so far."""
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_current_wal_lsn()::text")
            target = cursor.fetchone()[0]
        deadline = time.monotonic() + timeout
        while True:
            with connections[ALIAS].cursor() as cursor:
                cursor.execute("SELECT pg_wal_lsn_diff(pg_last_wal_replay_lsn(), %s::pg_lsn) >= 0", [target])
                if cursor.fetchone()[0]:
                    return
            assert time.monotonic() < deadline, "the standby did not catch up"
            time.sleep(0.05)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def standby(django_db_setup: Any, django_db_blocker: Any) -> Iterator[Standby]:
    host = connection.settings_dict.get("HOST") or ""
    if importlib.util.find_spec("pgserver") is None or not host.startswith("/"):
        pytest.skip("the replica tests make a standby of the embedded PostgreSQL (the [embedded] extra)")
    server = Standby(primary_host=host, root=Path(tempfile.mkdtemp(prefix="memory-engine-standby-")) / "standby",
                     port=_free_port()).create()
    server.start()
    # MIRROR: a test that names this alias in its databases never flushes it (a standby is read-only);
    # the alias exists before each test's database setup, so tests may name it (module pytestmark).
    connections.settings[ALIAS] = {**server.database(connection.settings_dict),
                                   "TEST": {**connection.settings_dict.get("TEST", {}), "MIRROR": "default"}}
    try:
        yield server
    finally:
        with django_db_blocker.unblock():
            connections[ALIAS].close()
        del connections[ALIAS]
        del connections.settings[ALIAS]
        server.remove()
        shutil.rmtree(server.root.parent, ignore_errors=True)


@pytest.fixture
def replica(standby: Standby, settings: Any) -> Standby:
    """The standby as the engine's READ_REPLICAS for this test; data must be committed to reach it
    (the module's tests are transactional)."""
    from memory_engine import replicas

    settings.DATABASE_ROUTERS = ["memory_engine.replicas.ReplicaRouter"]
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "READ_REPLICAS": [ALIAS], "REPLICA_RETRY_SECONDS": 0}
    replicas._down_until.clear()
    replicas._searchable.clear()
    return standby
