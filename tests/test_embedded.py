"""memory_engine.embedded: the development database helper of the [embedded] extra."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import psycopg
import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from memory_engine.embedded import (
    EMBEDDED_SHARED_BUFFERS_MAX,
    HANDLE_LIST,
    INITDB_SHARED_BUFFERS,
    HandleList,
    embedded_database,
    prune_handle_pids,
    release_embedded_servers,
    shared_buffers_target,
)


def test_without_the_extra_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "pgserver", None)  # what `import pgserver` meets when it is not installed
    with pytest.raises(ImproperlyConfigured) as raised:
        embedded_database(tmp_path / "pgdata")
    assert "pip install 'django-memory-engine[embedded]'" in str(raised.value)
    assert not (tmp_path / "pgdata").exists()


@pytest.mark.skipif("DATABASE_URL" in os.environ, reason="the suite runs on DATABASE_URL, not the embedded server")
def test_the_entry_reaches_postgresql_with_pgvector() -> None:
    """The suite's own server (the example project uses the helper): joining it gives an entry
    psycopg connects with, to a PostgreSQL that offers the vector extension."""
    data_dir = Path(os.environ.get("MEMORY_ENGINE_PGDATA", Path(settings.BASE_DIR) / ".pgdata"))
    entry = embedded_database(data_dir)
    assert entry["ENGINE"] == "django.db.backends.postgresql"
    with psycopg.connect(dbname=entry["NAME"], user=entry["USER"], host=entry["HOST"], port=entry["PORT"]) as conn:
        row = conn.execute("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'").fetchone()
    assert row is not None


MB = 1024 * 1024


def test_the_shared_buffers_target_is_a_quarter_of_memory_within_bounds() -> None:
    assert shared_buffers_target(64 * 1024 * MB) == EMBEDDED_SHARED_BUFFERS_MAX == 1024 * MB
    assert shared_buffers_target(2 * 1024 * MB) == 512 * MB
    assert shared_buffers_target(1000 * MB + 12345) == 250 * MB  # whole megabytes
    assert shared_buffers_target(256 * MB) == INITDB_SHARED_BUFFERS == 128 * MB  # never below initdb's


def _shared_buffers(entry: dict[str, Any]) -> tuple[int, bool]:
    with psycopg.connect(dbname=entry["NAME"], user=entry["USER"], host=entry["HOST"], port=entry["PORT"]) as conn:
        row = conn.execute("SELECT setting::bigint * 8192, pending_restart FROM pg_settings"
                           " WHERE name = 'shared_buffers'").fetchone()
    assert row is not None
    return int(row[0]), bool(row[1])


def _postgres_running(data_dir: Path) -> bool:
    return any(str(data_dir) in " ".join(p.info["cmdline"] or [])
               for p in psutil.process_iter(["name", "cmdline"]) if p.info["name"] == "postgres")


@pytest.fixture
def fresh_data_dir(tmp_path: Path) -> Iterator[Path]:
    data_dir = (tmp_path / "pgdata").resolve()
    yield data_dir
    release_embedded_servers(data_dir)
    assert not _postgres_running(data_dir)


def test_a_new_embedded_server_gets_its_shared_buffers_at_the_first_start(fresh_data_dir: Path) -> None:
    """initdb's 128MB would not hold a store's HNSW graph: the first start sizes the buffers and,
    holding the only handle, restarts the server; a size set with ALTER SYSTEM is kept."""
    target = shared_buffers_target(psutil.virtual_memory().total)
    entry = embedded_database(fresh_data_dir)
    assert _shared_buffers(entry) == (target, False)

    with psycopg.connect(dbname="postgres", user="postgres", host=entry["HOST"], autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET shared_buffers = '64MB'")
    release_embedded_servers(fresh_data_dir)
    assert not _postgres_running(fresh_data_dir)
    assert _shared_buffers(embedded_database(fresh_data_dir)) == (64 * MB, False)


def test_a_server_others_hold_gets_its_shared_buffers_at_the_next_start(fresh_data_dir: Path) -> None:
    """Another live process started the server (pgserver alone, initdb's size) and holds it: the
    size is set but the server is not restarted under it; the next start has it."""
    target = shared_buffers_target(psutil.virtual_memory().total)
    other = subprocess.Popen(
        [sys.executable, "-c", "import sys, time, pgserver; pgserver.get_server(sys.argv[1]); print('up', flush=True);"
         " time.sleep(120)", str(fresh_data_dir)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    try:
        assert other.stdout is not None and other.stdout.readline().strip() == "up"
        entry = embedded_database(fresh_data_dir)
        deadline = time.monotonic() + 10
        while _shared_buffers(entry) != (INITDB_SHARED_BUFFERS, True) and time.monotonic() < deadline:
            time.sleep(0.1)  # the configuration reload that shows the pending size is asynchronous
        assert _shared_buffers(entry) == (INITDB_SHARED_BUFFERS, True)
    finally:
        other.kill()  # no exit hook: its pid stays in the handle file, dead
        other.wait()
    release_embedded_servers(fresh_data_dir)  # the dead pid is dropped: the last handle stops the server
    assert not _postgres_running(fresh_data_dir)
    assert _shared_buffers(embedded_database(fresh_data_dir)) == (target, False)


@pytest.mark.parametrize("damaged", [b"", b"[4242, 42", b"\xff\xfe", b'{"pids": []}', b'["1"]'],
                         ids=["empty", "cut", "binary", "object", "strings"])
def test_an_empty_or_damaged_handle_list_counts_no_process_and_is_written_again(tmp_path: Path, caplog: Any,
                                                                                damaged: bytes) -> None:
    handles = tmp_path / HANDLE_LIST
    handles.write_bytes(damaged)
    with caplog.at_level("WARNING", logger="memory_engine.embedded"):
        assert prune_handle_pids(tmp_path) == []
    assert "was empty or damaged" in caplog.text
    assert handles.read_text() == "[]"
    HandleList(handles).get_and_add(os.getpid())
    assert handles.read_text() == f"[{os.getpid()}]"
    assert [p.name for p in tmp_path.iterdir()] == [HANDLE_LIST]  # written beside it, then renamed over it


def test_a_server_whose_handle_list_was_left_empty_starts_and_stops(fresh_data_dir: Path) -> None:
    """A process killed while pgserver rewrote the list in place (SIGTERM to runserver with its
    autoreloader) left it empty, and every later process died in its settings on pgserver's
    JSON parse error. The list now counts no process; this one's handle is written atomically,
    also when it lets go."""
    embedded_database(fresh_data_dir)
    release_embedded_servers(fresh_data_dir)  # a data directory made and let go (the server stopped)
    (fresh_data_dir / HANDLE_LIST).write_text("")
    entry = embedded_database(fresh_data_dir)
    with psycopg.connect(dbname=entry["NAME"], user=entry["USER"], host=entry["HOST"], port=entry["PORT"]) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    assert json.loads((fresh_data_dir / HANDLE_LIST).read_text()) == [os.getpid()]
    release_embedded_servers(fresh_data_dir)
    assert not _postgres_running(fresh_data_dir)
    assert json.loads((fresh_data_dir / HANDLE_LIST).read_text()) == []


CONNECTED_HOLDER = """
import sys, psycopg
from memory_engine.embedded import embedded_database
entry = embedded_database(sys.argv[1]) if sys.argv[2] == "handle" else None
host = entry["HOST"] if entry else sys.argv[3]
conn = psycopg.connect(dbname="postgres", user="postgres", host=host, autocommit=True)
print("up", flush=True)
for line in sys.stdin:
    print(conn.execute("SELECT 1").fetchone()[0], flush=True)
"""


def _connected_client(data_dir: Path, *args: str) -> subprocess.Popen[str]:
    """A process connected to the embedded server in ``data_dir`` (``handle``: that took a handle on
    it as the web server does; ``raw HOST``: a plain client, like psql) that answers each line on
    its stdin with a query's result; it exits when its stdin closes."""
    proc = subprocess.Popen([sys.executable, "-c", CONNECTED_HOLDER, str(data_dir), *args], cwd=settings.BASE_DIR,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "up"
    return proc


def _query(client: subprocess.Popen[str]) -> str:
    assert client.stdin is not None and client.stdout is not None
    client.stdin.write("SELECT 1\n")
    client.stdin.flush()
    return client.stdout.readline().strip()


def _postmaster_pid(data_dir: Path) -> int:
    return int((data_dir / "postmaster.pid").read_text().split()[0])


def test_a_connected_server_is_not_stopped_when_the_handle_list_lost_it(fresh_data_dir: Path) -> None:
    """The handle list was emptied under a running server, then a short-lived process joined and
    exited, alone in the list: it stopped the server under the connected one (every request then
    answered 503). Its stop decision now sees the other client in pg_stat_activity."""
    server = _connected_client(fresh_data_dir, "handle")
    try:
        (fresh_data_dir / HANDLE_LIST).write_text("")  # emptied while the server runs
        joined = subprocess.run(
            [sys.executable, "-c", "import sys; from memory_engine.embedded import embedded_database;"
             " embedded_database(sys.argv[1])", str(fresh_data_dir)],
            cwd=settings.BASE_DIR, capture_output=True, text=True, timeout=120)
        assert joined.returncode == 0, joined.stderr
        assert _postgres_running(fresh_data_dir)
        assert _query(server) == "1"
        postmaster = _postmaster_pid(fresh_data_dir)
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=120)
    # the last user stopped it, and its exit waited for the postmaster to exit (no poll needed)
    assert not psutil.pid_exists(postmaster) or psutil.Process(postmaster).status() == psutil.STATUS_ZOMBIE
    assert not _postgres_running(fresh_data_dir)


def test_a_plain_client_keeps_the_server_up_and_own_connections_do_not(fresh_data_dir: Path) -> None:
    """A client that never took a handle (psql, a tool) is a user too; this process's own open
    connections are not: the last handle stops the server under them."""
    entry = embedded_database(fresh_data_dir)
    client = _connected_client(fresh_data_dir, "raw", entry["HOST"])
    try:
        release_embedded_servers(fresh_data_dir)
        assert _postgres_running(fresh_data_dir)
        assert _query(client) == "1"
    finally:
        assert client.stdin is not None
        client.stdin.close()
        client.wait(timeout=60)
    entry = embedded_database(fresh_data_dir)
    own = psycopg.connect(dbname="postgres", user="postgres", host=entry["HOST"], autocommit=True)
    try:
        release_embedded_servers(fresh_data_dir)
        assert not _postgres_running(fresh_data_dir)
    finally:
        own.close()


ROLLED_BACK_BM25_WRITE = """
import django
django.setup()
from django.db import connection, transaction
with connection.cursor() as cursor:
    cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_textsearch")
    cursor.execute("CREATE TABLE notes (id int, body text)")
    cursor.execute("CREATE INDEX notes_bm25 ON notes USING bm25 (body) WITH (text_config = 'english')")
try:
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO notes VALUES (1, 'a write that is rolled back')")
        raise RuntimeError
except RuntimeError:
    pass
print("rolled back", flush=True)
"""


def test_a_process_stops_its_server_after_a_rolled_back_bm25_write(tmp_path: Path) -> None:
    """The embedded wheel's pg_textsearch 1.0.0 leaves a backend that rolled back a bm25 insert
    deaf to signals, so the fast shutdown would wait for it a minute and then be killed: the
    process closes its Django connections to the server before letting it go."""
    data_dir = tmp_path / "pgdata"
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "MEMORY_ENGINE_PGDATA": str(data_dir),
           "DJANGO_SETTINGS_MODULE": "example_project.settings", "PYTHONPATH": str(Path(settings.BASE_DIR))}
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", ROLLED_BACK_BM25_WRITE], cwd=settings.BASE_DIR, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "rolled back"
    assert "Failed to stop server" not in proc.stderr
    assert time.monotonic() - started < 30  # the shutdown did not wait out pg_ctl's minute
    assert not _postgres_running(data_dir.resolve())
    assert "not properly shut down" not in (data_dir / "log").read_text()



def test_a_test_holding_the_bm25_tables_keeps_vacuum_out_until_it_ends(bm25_tables_held: None, store: Any) -> None:
    """tests/conftest.py's bm25_tables_held: a VACUUM that arrives after the test's bm25 write
    cannot take the table (so it never waits on the index lock), and the test's ANALYZE runs."""
    from django.db import connection

    from memory_engine.services.memories import memory_write

    memory_write(store=store, content="The release train leaves at noon.", principal="test")  # a bm25 write
    entry = connection.settings_dict
    outcome: list[str] = []

    def vacuum() -> None:  # as autovacuum would, from another backend
        with psycopg.connect(dbname=entry["NAME"], user=entry["USER"], host=entry["HOST"], port=entry["PORT"],
                             password=entry["PASSWORD"] or None, autocommit=True) as other:
            other.execute("SET lock_timeout = '500ms'")
            try:
                other.execute("VACUUM memory_engine_memorycontent")
                outcome.append("vacuumed")
            except psycopg.errors.LockNotAvailable:
                outcome.append("kept out")

    thread = threading.Thread(target=vacuum)
    thread.start()
    thread.join(timeout=10)  # a VACUUM that took the table waits on the index lock until the test ends
    assert outcome == ["kept out"]
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memory_engine_memorycontent")
