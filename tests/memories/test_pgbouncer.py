"""The write funnel behind a real PgBouncer in transaction mode (docs/write-funnel.md, "Prepared
statements").

A transaction-pooling proxy hands each transaction to whichever server session is free, so a
statement the funnel prepared on one session is missing on the next: the write that meets it
rolls back and runs again unprepared, and the process stops preparing. With
WRITE_PREPARED_STATEMENTS off nothing is prepared. Either way every write lands once, with one
assertion. PgBouncer listens on a loopback port in front of the suite's database; ``make test``
installs it (as root), elsewhere these tests skip, and fail under CI=true.
"""

from __future__ import annotations

import logging
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.db import connection, connections

from memory_engine import db
from memory_engine.models import Memory, MemoryAssertion
from memory_engine.services.memories import memory_write
from tests.factories import MemoryStoreFactory, ProjectFactory
from tests.plans import queries_sent
from tests.skips import require
from tests.threads import at_once

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

DATABASE = "Our main database is hosted in Frankfurt"
PLANTS = "The office plants are watered on Mondays"
INVOICES = "Invoices are paid by the finance team within 30 days"


def pgbouncer_binary() -> str | None:
    return shutil.which("pgbouncer") or next(
        (path for path in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer") if os.access(path, os.X_OK)), None)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Bouncer:
    """A PgBouncer in transaction mode in front of the suite's database."""

    port: int
    user: str
    database: str
    log: Path

    @contextmanager
    def console(self) -> Iterator[psycopg.Connection[Any]]:
        """PgBouncer's admin console (simple queries only)."""
        with psycopg.connect(host="127.0.0.1", port=self.port, dbname="pgbouncer", user=self.user,
                             autocommit=True, cursor_factory=psycopg.ClientCursor) as console:
            yield console

    def reconnect(self) -> None:
        """Close every server session once it is released: the next transaction of any client
        runs on a new one (as when a pool recycles its sessions, or hands the transaction to another)."""
        with self.console() as console:
            console.execute("RECONNECT")
        deadline = time.monotonic() + 20
        while self.server_sessions():  # RECONNECT closes released sessions as it goes
            assert time.monotonic() < deadline, "PgBouncer kept its server sessions"
            time.sleep(0.05)

    def server_sessions(self) -> int:
        with self.console() as console:
            rows = console.execute("SHOW SERVERS").fetchall()
        return len(rows)

    @contextmanager
    def in_front(self) -> Iterator[None]:
        """The suite's connections (this thread's and any new thread's) go through PgBouncer, on
        server sessions of this test's own: pg_textsearch 1.0 fails a session that used a bm25
        index before another session truncated its table (as the flush after a transactional
        test does) with "could not read blocks" (docs/operations.md)."""
        self.reconnect()
        entry = connection.settings_dict
        saved = {key: entry.get(key) for key in ("HOST", "PORT", "USER", "PASSWORD")}
        connections.close_all()
        entry.update(HOST="127.0.0.1", PORT=str(self.port), USER=self.user, PASSWORD="")
        try:
            yield
        finally:
            connections.close_all()
            entry.update(saved)


@pytest.fixture(scope="module")
def bouncer(django_db_setup: Any) -> Iterator[Bouncer]:
    binary = pgbouncer_binary()
    require("pgbouncer", "" if binary else "pgbouncer is not installed: apt-get install pgbouncer "
                                           "(make test does it when run as root)")
    assert binary is not None
    entry = dict(connection.settings_dict)  # the test database's, once django_db_setup made it
    database = entry["NAME"]
    host, user = entry["HOST"] or "127.0.0.1", entry["USER"] or "postgres"
    target = f"host={host} port={entry['PORT'] or 5432} user={user}"
    if entry.get("PASSWORD"):
        target += f" password={entry['PASSWORD']}"
    folder = Path(tempfile.mkdtemp(prefix="memory-engine-pgbouncer-"))
    port = free_port()
    (folder / "users.txt").write_text(f'"{user}" ""\n')
    (folder / "pgbouncer.ini").write_text(f"""[databases]
* = {target}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {folder / "users.txt"}
admin_users = {user}
pool_mode = transaction
default_pool_size = 4
max_client_conn = 100
server_round_robin = 1
ignore_startup_parameters = extra_float_digits, options
logfile = {folder / "pgbouncer.log"}
pidfile = {folder / "pgbouncer.pid"}
""")
    command = [binary, str(folder / "pgbouncer.ini")]
    if os.getuid() == 0:
        # PgBouncer refuses to run as root: it runs as whoever owns the server's socket directory
        # (the embedded server's user), which it must reach.
        owner = pwd.getpwuid(os.stat(host).st_uid).pw_name if host.startswith("/") else "nobody"
        command[1:1] = ["-u", owner]
        shutil.chown(folder, owner)
        for file in folder.iterdir():
            shutil.chown(file, owner)
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    bouncer = Bouncer(port=port, user=user, database=database, log=folder / "pgbouncer.log")
    try:
        deadline = time.monotonic() + 20
        while True:
            assert process.poll() is None, f"pgbouncer exited: {process.stderr.read() if process.stderr else ''}"
            try:
                with psycopg.connect(host="127.0.0.1", port=port, dbname=database, user=user, connect_timeout=2):
                    break
            except psycopg.OperationalError:
                assert time.monotonic() < deadline, f"pgbouncer did not answer: {bouncer.log.read_text()[-2000:]}"
                time.sleep(0.1)
        yield bouncer
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(autouse=True)
def _preparing() -> Iterator[None]:
    """Each test starts preparing, whatever a test before it lost (and so stopped)."""
    db._resume_preparing()
    yield
    db._resume_preparing()


def write(store: Any, text: str) -> Any:
    return memory_write(store=store, content=text, principal="test")


def backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


@pytest.mark.django_db(transaction=True)
def test_pgbouncer_runs_each_transaction_on_the_server_session_it_has_free(bouncer: Bouncer) -> None:
    """What the funnel meets behind it: after the pool's sessions are closed, the same client
    connection's next transaction runs on another server session."""
    with bouncer.in_front():
        before = backend_pid()
        bouncer.reconnect()
        assert backend_pid() != before


@pytest.mark.django_db(transaction=True)
def test_a_write_on_a_server_session_without_its_statements_falls_back_and_lands_once(
        bouncer: Bouncer, caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStoreFactory(project=ProjectFactory())
    with bouncer.in_front():
        with queries_sent() as sent:
            first = write(store, PLANTS)
        assert first.action == "created"
        assert any(query.startswith("PREPARE me_") for query in sent), sent  # prepared on this session
        assert db.prepares_statements()
        bouncer.reconnect()  # the next transaction runs on a session that never saw them
        with caplog.at_level(logging.WARNING, logger="memory_engine.db"), queries_sent() as sent:
            second = write(store, DATABASE)
        assert second.action == "created"
        assert any("EXECUTE me_" in query for query in sent), sent  # tried prepared, then ran again
        assert "stops preparing" in caplog.text and "WRITE_PREPARED_STATEMENTS" in caplog.text
        assert not db.prepares_statements()
        with queries_sent() as sent:
            again = write(store, DATABASE)
        assert again.action == "skipped" and again.memory.pk == second.memory.pk
        assert not any("PREPARE" in query or "EXECUTE" in query for query in sent), sent
    outcomes = list(MemoryAssertion.objects.filter(store=store).order_by("created_at").values_list("outcome",
                                                                                                    flat=True))
    assert outcomes == ["created", "created", "skipped"]  # the rolled-back attempt left nothing
    assert Memory.objects.filter(store=store).count() == 2


@pytest.mark.django_db(transaction=True)
def test_with_prepared_statements_off_pgbouncer_changes_nothing(bouncer: Bouncer, settings: Any,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "WRITE_PREPARED_STATEMENTS": False}
    store = MemoryStoreFactory(project=ProjectFactory())
    with bouncer.in_front(), caplog.at_level(logging.WARNING, logger="memory_engine.db"):
        results = []
        for text in (PLANTS, DATABASE, PLANTS, INVOICES):
            bouncer.reconnect()
            with queries_sent() as sent:
                results.append(write(store, text))
            assert not any("PREPARE" in query or "EXECUTE" in query for query in sent), sent
    assert [result.action for result in results] == ["created", "created", "skipped", "created"]
    assert "stops preparing" not in caplog.text
    assert MemoryAssertion.objects.filter(store=store).count() == 4


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_through_pgbouncer_land_each_write_once(bouncer: Bouncer) -> None:
    """Eight writers on four server sessions, prepared statements on: each text is one memory,
    each write one assertion, whichever sessions their transactions ran on."""
    store = MemoryStoreFactory(project=ProjectFactory())
    texts = [PLANTS, DATABASE, INVOICES, PLANTS, DATABASE, INVOICES, PLANTS, DATABASE]
    with bouncer.in_front():
        at_once(lambda text: [write(store, text) for _ in range(3)], texts)
    assert sorted(Memory.objects.filter(store=store).values_list("content__text", flat=True)) == sorted(
        {PLANTS, DATABASE, INVOICES})
    assert MemoryAssertion.objects.filter(store=store).count() == 3 * len(texts)
    assert MemoryAssertion.objects.filter(store=store, outcome="created").count() == 3
