"""Benchmark bootstrap: Django on a dedicated database, the data directory, result files.

Benchmarks never touch the development or test databases: each uses its own database
on the same server (created and migrated on first use). The real-world data they read
(``paraphrase/``, ``scifact/``, ``locomo/``, ``pdfs/``; see docs/benchmarks.md) is never
part of the repository: :func:`parse_args` gives every benchmark a ``--data DIR`` option.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.abc
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
# The same variable points the test suite's corpus group at this data.
DATA_ENV = "MEMORY_ENGINE_TEST_CORPUS"
DEFAULT_DATA = ROOT.parent / "shared" / "data"


def copy_rows(cursor: Any, table: str, columns: str, rows: list[tuple[Any, ...]]) -> None:
    """``rows`` into ``table``'s ``columns`` (comma-separated) with one ``COPY``."""
    with cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def production_django() -> None:
    """Run the example project as a deployment does, with DEBUG off (and the checkout's secret
    key, which DEBUG off needs), unless DJANGO_DEBUG says otherwise; the benchmarks that start a
    server already did. With DEBUG on, Django's debug cursor records every query (in the write
    funnel that cost nothing measurable: 9.57 against 9.62 ms own time p50, 2026-12-02). Set before Django
    reads its settings: on import of this module, which every benchmark imports first."""
    sys.path.insert(0, str(ROOT))
    from example_project.secret_key import checkout_secret_key

    os.environ.setdefault("DJANGO_DEBUG", "false")
    os.environ.setdefault("DJANGO_SECRET_KEY", checkout_secret_key(ROOT / ".secret_key"))


production_django()


def parse_args(parser: argparse.ArgumentParser) -> argparse.Namespace:
    """Parse the command line with ``--data DIR`` added; ``args.data`` is then an existing directory.

    Without ``--data``: ``$MEMORY_ENGINE_TEST_CORPUS``, else ``../shared/data`` beside the
    repository when it exists; otherwise the benchmark stops with a usage error.
    """
    parser.add_argument("--data", type=Path, metavar="DIR",
                        help=f"the evaluation data directory (paraphrase/, scifact/, locomo/, pdfs/); "
                             f"default: ${DATA_ENV}, else ../shared/data beside the repository if it exists")
    args = parser.parse_args()
    if args.data is None:
        env = os.environ.get(DATA_ENV, "").strip()
        args.data = Path(env) if env else DEFAULT_DATA if DEFAULT_DATA.is_dir() else None
    if args.data is None:
        parser.error(f"no evaluation data: pass --data DIR (the directory holding paraphrase/, scifact/, "
                     f"locomo/, pdfs/) or set {DATA_ENV}")
    args.data = args.data.expanduser().resolve()
    if not args.data.is_dir():
        parser.error(f"data directory {args.data} does not exist")
    return args


def setup_django(db_name: str = "bench_memory_engine", *, migrate: bool = True, fresh: bool = False) -> None:
    """Point Django at ``db_name`` (created if missing; dropped first when ``fresh``), migrate it,
    and set Django up. The name is set before Django reads its settings: the example project's
    connection pool keeps the database it was opened on."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
    os.environ["MEMORY_ENGINE_DB_NAME"] = db_name
    os.environ.setdefault("MEMORY_ENGINE_LOG_LEVEL", "WARNING")
    import django
    from django.conf import settings

    django.setup()
    import psycopg

    admin = dict(settings.DATABASES["default"])
    conninfo = {"dbname": "postgres", "user": admin["USER"] or None, "host": admin["HOST"] or None,
                "port": admin["PORT"] or None, "password": admin["PASSWORD"] or None}
    with psycopg.connect(**{k: v for k, v in conninfo.items() if v}, autocommit=True) as conn:
        if fresh:
            conn.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [db_name]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{db_name}"')
    if migrate:
        from django.core.management import call_command

        call_command("migrate", verbosity=0, interactive=False)


def use_lexical_backend(backend: str) -> None:
    """Build the indexes ``backend`` ("bm25" | "tsvector" | "auto") needs, if they are not there.

    The tsvector fallback is measured on the same database by swapping its indexes
    (``manage.py memory_engine_rebuild_lexical --backend``); run it with the matching
    KNOWLEDGE_LEXICAL_BACKEND setting.
    """
    from django.db import transaction

    from memory_engine.lexical import TSVECTOR, build_lexical_indexes, lexical_status

    current = lexical_status()
    wanted = TSVECTOR if backend == TSVECTOR else "bm25"
    has = {"bm25": all(k.endswith("_bm25") for k in current.index_configs) and bool(current.index_configs),
           TSVECTOR: all(k.endswith("_gin") for k in current.index_configs) and bool(current.index_configs)}
    if not has[wanted]:
        with transaction.atomic():
            build_lexical_indexes(backend=wanted)


def start_server(db_name: str, port: int, **env: str) -> subprocess.Popen[bytes]:
    """``manage.py runserver`` on 127.0.0.1:``port`` against the bench database, once it answers.

    DEBUG off (with the checkout's secret key), no rate limit, warnings only, and the database
    connections in a pool of 10 as ``make run`` serves (runserver handles each request in a
    thread of its own: without a pool each request would open a PostgreSQL connection, and the
    bench would time that); ``env`` adds to or overrides the server's environment."""
    from example_project.secret_key import checkout_secret_key

    environment = dict(os.environ, MEMORY_ENGINE_DB_NAME=db_name, MEMORY_ENGINE_RATE="1000000/min",
                       DJANGO_DEBUG="false", MEMORY_ENGINE_LOG_LEVEL="WARNING")
    environment.update({"DB_POOL_MAX_SIZE": "10", **env})
    environment.setdefault("DJANGO_SECRET_KEY", checkout_secret_key(ROOT / ".secret_key"))  # DEBUG off needs a key
    proc = subprocess.Popen([sys.executable, str(ROOT / "manage.py"), "runserver", "--noreload",
                             f"127.0.0.1:{port}"], cwd=ROOT, env=environment, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/", timeout=1)
        except urllib.error.HTTPError:
            return proc
        except OSError:
            time.sleep(0.5)
            continue
        return proc
    proc.kill()
    raise SystemExit("runserver did not start")


def percentile(values: list[float], pct: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary_ms(values: list[float]) -> dict[str, float]:
    """p50/p95/p99/mean of durations given in seconds, in milliseconds."""
    return {
        "p50_ms": round(percentile(values, 50) * 1000, 3),
        "p95_ms": round(percentile(values, 95) * 1000, 3),
        "p99_ms": round(percentile(values, 99) * 1000, 3),
        "mean_ms": round(statistics.fmean(values) * 1000, 3) if values else float("nan"),
        "n": len(values),
    }


def print_table(headers: list[str], rows: list[list[Any]]) -> None:
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for n, row in enumerate(cells):
        print("  ".join(cell.rjust(widths[i]) if i else cell.ljust(widths[i]) for i, cell in enumerate(row)))
        if n == 0:
            print("  ".join("-" * w for w in widths))


def write_results(name: str, data: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    payload = {
        "benchmark": name,
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "django_debug": _django_debug(),
        **data,
    }
    path.write_text(json.dumps(payload, indent=2))
    print(f"\nresults written to {path.relative_to(ROOT)}")
    return path


#: The CPU's vector extensions a result file records: the embedder's kernels and pgvector's distances
#: pick their code by them, so two machines with the same cores can differ in the ratio of the two.
VECTOR_FLAGS = ("avx", "avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile")


def machine() -> dict[str, Any]:
    """What a result file says of the machine: cores, CPU model and vector extensions (from
    /proc/cpuinfo where there is one), Python and the platform."""
    model, flags = "", set()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and not model:
                model = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
                break
    return {"cpus": os.cpu_count(), "cpu_model": model or platform.processor(),
            "vector_extensions": [flag for flag in VECTOR_FLAGS if flag in flags],
            "python": platform.python_version(), "platform": platform.platform()}


def _django_debug() -> bool | None:
    """Django's DEBUG in this run (None: Django not set up)."""
    from django.conf import settings

    return bool(settings.DEBUG) if settings.configured else None


def module_at(ref: str, path: str, name: str, package: str) -> ModuleType:
    """The module at ``path`` (in the repository) as it was at git ``ref``, loaded as ``name``
    beside today's, its relative imports resolved in ``package`` (a paired run's baseline)."""
    source = subprocess.run(["git", "show", f"{ref}:{path}"], cwd=ROOT, check=True, capture_output=True,
                            text=True).stdout
    spec = importlib.util.spec_from_loader(name, loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__package__ = package
    sys.modules[name] = module
    exec(compile(source, f"{ref}:{path}", "exec"), module.__dict__)  # noqa: S102  (our own history)
    return module


def exists_at(ref: str, path: str) -> bool:
    """Whether ``path`` (in the repository) existed at git ``ref``."""
    return subprocess.run(["git", "cat-file", "-e", f"{ref}:{path}"], cwd=ROOT, capture_output=True).returncode == 0


class _PackageAt(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports ``name`` and its submodules from the package at ``path`` as it was at git ``ref``."""

    def __init__(self, ref: str, path: str, name: str) -> None:
        self.ref, self.path, self.name = ref, path, name

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self.name and not fullname.startswith(self.name + "."):
            return None
        return importlib.util.spec_from_loader(fullname, self, is_package=fullname == self.name)

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        inner = module.__name__[len(self.name):].lstrip(".")
        path = f"{self.path}/{inner.replace('.', '/')}.py" if inner else f"{self.path}/__init__.py"
        source = subprocess.run(["git", "show", f"{self.ref}:{path}"], cwd=ROOT, check=True, capture_output=True,
                                text=True).stdout
        exec(compile(source, f"{self.ref}:{path}", "exec"), module.__dict__)  # noqa: S102  (our own history)


def package_at(ref: str, path: str, name: str) -> list[ModuleType]:
    """The package at ``path`` (in the repository) as it was at git ``ref``, loaded as ``name``
    beside today's: its relative imports among its own modules reach ``ref``'s, the others (``..``,
    absolute) today's. Returns the package, then every submodule it imported."""
    sys.meta_path.insert(0, _PackageAt(ref, path, name))
    package = importlib.import_module(name)
    return [package, *(module for key, module in list(sys.modules.items()) if key.startswith(name + "."))]


def timing_provider_path() -> str:
    """Dotted path of an onnx provider that records how long each embed call took."""
    return "_setup.TimingOnnxProvider"


EMBED_SECONDS: list[float] = []


def _timing_class() -> Any:
    from memory_engine.providers.embeddings.onnx import OnnxEmbeddingProvider

    class TimingOnnxProvider(OnnxEmbeddingProvider):
        def embed_documents(self, texts):  # type: ignore[no-untyped-def]
            import time

            started = time.perf_counter()
            try:
                return super().embed_documents(texts)
            finally:
                EMBED_SECONDS.append(time.perf_counter() - started)

    return TimingOnnxProvider


def __getattr__(name: str) -> Any:
    if name == "TimingOnnxProvider":
        return _timing_class()
    raise AttributeError(name)
