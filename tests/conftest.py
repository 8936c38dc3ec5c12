"""Shared fixtures. Every test runs against the real PostgreSQL + pgvector (pgserver
unless DATABASE_URL is set), and the real default embedder unless a test swaps it.

Tests marked ``corpus`` need the external real-world data set (see tests/corpus.py):
without ``MEMORY_ENGINE_TEST_CORPUS`` they are skipped from one place, so pytest's
short summary folds them into one line that says how to run them. Every skip belongs to a
group of tests/skips.py, which says why; a skip that belongs to none fails, and the run's
summary counts each group's skips."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from memory_engine.conf import engine_settings
from memory_engine.models import Project

from .corpus import CORPUS, CORPUS_ENV, SKIP_REASON
from .factories import MemoryStoreFactory, ProjectFactory, make_key
from .pdfs import SAMPLES, sample_pdf
from .skips import SKIP_GROUPS, skip_group

ROOT = Path(__file__).resolve().parents[1]
TEST_PROVIDERS = "tests.providers"

#: The suite's stand-in providers, handlers and converters listen on 127.0.0.1: the outbound
#: guard lets them through, as an operator's MEMORY_ENGINE_OUTBOUND_ALLOW would (the guard's own
#: tests set their own list). The environment variable reaches the worker and server subprocesses.
TEST_OUTBOUND_ALLOW = ["127.0.0.1", "localhost"]
os.environ.setdefault("MEMORY_ENGINE_OUTBOUND_ALLOW", ",".join(TEST_OUTBOUND_ALLOW))


@pytest.fixture(autouse=True)
def _outbound_allow(settings: Any) -> None:
    settings.MEMORY_ENGINE = {**(getattr(settings, "MEMORY_ENGINE", {}) or {}), "OUTBOUND_ALLOW": TEST_OUTBOUND_ALLOW}


def pytest_configure(config: pytest.Config) -> None:
    # A shell without job control starts a background command (`make test &`, `nohup …&`) with
    # SIGINT and SIGQUIT ignored, and every process it starts inherits that: a test's runserver or
    # `make run` would then never see the Ctrl-C the test sends. A handler, unlike "ignored", is
    # reset to the default in every child.
    for signum, handler in ((signal.SIGINT, signal.default_int_handler), (signal.SIGQUIT, signal.SIG_DFL)):
        if signal.getsignal(signum) is signal.SIG_IGN:
            signal.signal(signum, handler)
    if CORPUS is not None and not (CORPUS / "pdfs").is_dir():
        raise pytest.UsageError(f"{CORPUS_ENV}={CORPUS} has no pdfs/ directory; "
                                "point it at the shared data directory or unset it")


def pytest_report_header(config: pytest.Config) -> str:
    return f"corpus: {CORPUS}" if CORPUS else f"corpus: none ({CORPUS_ENV} is not set)"


def pytest_runtest_setup(item: pytest.Item) -> None:
    # Raised here rather than as a skip mark: every report then points at this line,
    # and `-ra` prints them all as one "SKIPPED [n] ... corpus tests skipped" line.
    if CORPUS is None and item.get_closest_marker("corpus"):
        pytest.skip(SKIP_REASON)


def _skip_reason(report: pytest.TestReport) -> str | None:
    """The reason of a skipped report (None for any other outcome, an expected failure included)."""
    if not report.skipped or hasattr(report, "wasxfail") or not isinstance(report.longrepr, tuple):
        return None
    return str(report.longrepr[2]).removeprefix("Skipped: ")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A skip whose reason belongs to no group of tests/skips.py fails: a skip may only say the
    environment cannot run a test, and each such reason is declared with why."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    reason = _skip_reason(report)
    if reason is not None and CORPUS is None and item.get_closest_marker("corpus"):
        # a corpus test skipped before our setup hook ran (a parameter list read from the
        # corpus is empty without it): counted, and summed up, with the corpus group
        path, line, _ = report.longrepr
        report.longrepr = (path, line, f"Skipped: {SKIP_REASON}")
        reason = SKIP_REASON
    if reason is not None and skip_group(reason) is None:
        report.outcome = "failed"
        report.longrepr = (f"an undeclared skip: {reason!r}. A skip may only say that this environment cannot "
                           "run the test, in a group of tests/skips.py that says why; a skip that hides a bug "
                           "is a failure.")


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """How many tests each skip group skipped, and why (tests/skips.py)."""
    counts: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        reason = _skip_reason(report)
        group = skip_group(reason) if reason is not None else None
        if group is not None:
            counts[group.name] = counts.get(group.name, 0) + 1
    if not counts:
        return
    terminalreporter.section("skipped groups (tests/skips.py)")
    for group in SKIP_GROUPS:
        if group.name in counts:
            terminalreporter.line(f"{counts[group.name]:5d}  {group.name}: {group.why}")


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> None:
    """The suite's own process keeps plain connections, not the pool the example project gives
    each process by default: every test runs inside one transaction on its connection, and tests
    change that connection's settings (``server_side_binding``, W005). The servers and workers
    the suite starts keep the pool (``DB_POOL_MAX_SIZE`` in their environment, or the default)."""
    from django.db import connections

    for alias in connections:
        entry = connections[alias].settings_dict
        if entry.get("OPTIONS", {}).pop("pool", None):
            entry["CONN_MAX_AGE"] = int(os.environ.get("CONN_MAX_AGE", "60"))  # as without DB_POOL_MAX_SIZE


@pytest.fixture(scope="session")
def sample_pdf_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every generated sample PDF (tests/pdfs.py) written to a directory, for tests that need files."""
    root = tmp_path_factory.mktemp("pdfs")
    for name in SAMPLES:
        (root / name).write_bytes(sample_pdf(name))
    return root


@pytest.fixture(autouse=True)
def _sync_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    """django-q2 runs tasks inline in unit tests; tests with a real worker turn this off."""
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", True)


@pytest.fixture
def bm25_tables_held(db: Any) -> None:
    """Hold the bm25-indexed tables against VACUUM (``SHARE UPDATE EXCLUSIVE``, until the test's
    rollback) before the test writes: for tests that ANALYZE them or change their indexes after
    writing to them.

    A test runs in one transaction, and the embedded server's pg_textsearch 1.0.0 holds an index
    lock from a bm25 write until the transaction ends, a lock that no cancel, timeout or
    deadlock check reaches (docs/operations.md, "A backend that ignores cancel and terminate").
    An autovacuum that started on the table after the write waits for that lock while holding
    the table, and the test's ANALYZE or DDL would wait for the autovacuum: neither would ever
    end, nor any later test that writes to the table. Held first, the table is skipped by
    autovacuum for the length of the test. (Turning autovacuum off on these tables for the whole
    run is no better: pg_textsearch 1.0 then meets the text of rolled-back rows that page pruning
    removed from the TOAST table, "missing chunk number 0 for toast value".)
    """
    from memory_engine.lexical import BM25_PARTS

    tables = ", ".join(sorted({table for table, _predicate in BM25_PARTS.values()}))
    with connection.cursor() as cursor:
        cursor.execute(f"LOCK TABLE {tables} IN SHARE UPDATE EXCLUSIVE MODE")


@pytest.fixture(autouse=True)
def _clear_cache() -> Iterator[None]:
    """Throttle counters live in the cache: no test inherits another's failures or rates."""
    from django.core.cache import cache

    cache.clear()
    yield


def api_client(raw_key: str | None = None) -> APIClient:
    client = APIClient()
    if raw_key:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
    return client


@pytest.fixture
def server_side_binding() -> Iterator[None]:
    """The test's connection opened again with psycopg's server-side binding, as a host's
    ``OPTIONS["server_side_binding"]`` gives it (parameters bound on the server: one statement
    per query, planned with its parameters' values but not their SQL text)."""
    options = connection.settings_dict.setdefault("OPTIONS", {})
    connection.close()
    options["server_side_binding"] = True
    try:
        yield
    finally:
        connection.close()
        del options["server_side_binding"]


@pytest.fixture
def project(db: Any) -> Project:
    return ProjectFactory()


@pytest.fixture
def other_project(db: Any) -> Project:
    return ProjectFactory()


@pytest.fixture
def client(project: Project) -> APIClient:
    """An API client authenticated with a read-write key of ``project``."""
    return api_client(make_key(project))


@pytest.fixture
def other_client(other_project: Project) -> APIClient:
    return api_client(make_key(other_project))


@pytest.fixture
def readonly_client(project: Project) -> APIClient:
    return api_client(make_key(project, read_only=True))


@pytest.fixture
def store(project: Project) -> Any:
    return MemoryStoreFactory(project=project)


def use_embedder(settings: Any, provider: str | None, **extra: Any) -> None:
    """Swap the deployment embedder for a test (settings is pytest-django's fixture)."""
    config = dict(engine_settings.EMBEDDING)
    config.update(PROVIDER=provider, **extra)
    settings.MEMORY_ENGINE = {**(getattr(settings, "MEMORY_ENGINE", {}) or {}), "EMBEDDING": config}


@pytest.fixture
def hashing_embedder(settings: Any) -> None:
    use_embedder(settings, f"{TEST_PROVIDERS}.HashingEmbeddingProvider", MODEL="all-MiniLM-L6-v2")


@pytest.fixture
def failing_embedder(settings: Any) -> None:
    use_embedder(settings, f"{TEST_PROVIDERS}.FailingEmbeddingProvider", MODEL="all-MiniLM-L6-v2")


@pytest.fixture
def no_embedder(settings: Any) -> None:
    use_embedder(settings, None)


@pytest.fixture
def qcluster_env() -> dict[str, str]:
    """Extra environment for the qcluster worker; override this fixture in a test module
    (e.g. MEMORY_ENGINE_EMBEDDING_PROVIDER, MEMORY_ENGINE_LLM_BASE_URL, Q_WORKERS)."""
    return {}


@pytest.fixture
def qcluster_log() -> Path | None:
    """Where the qcluster worker's output goes (appended); None: nowhere. Override it in a test
    module that reads the log."""
    return ROOT / ".pytest_cache" / "qcluster.log" if (ROOT / ".pytest_cache").is_dir() else None


@pytest.fixture
def qcluster(transactional_db: Any, monkeypatch: pytest.MonkeyPatch,
             qcluster_env: dict[str, str], qcluster_log: Path | None) -> Iterator[subprocess.Popen]:
    """A real django-q2 worker (`manage.py qcluster`) on the test database.

    Tests using it must commit their data (they get ``transactional_db``). The worker
    reads example_project/settings.py and the environment, plus ``qcluster_env``.
    """
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", False)
    env = dict(os.environ, MEMORY_ENGINE_DB_NAME=connection.settings_dict["NAME"], Q_WORKERS="1",
               PYTHONUNBUFFERED="1")
    env.update(qcluster_env)
    log = open(qcluster_log, "ab") if qcluster_log is not None else None  # noqa: SIM115 (the worker's lifetime)
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "qcluster"], cwd=ROOT, env=env,
        stdout=log or subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True,
    )
    time.sleep(1.0)
    try:
        yield proc
    finally:
        try:
            # SIGTERM to the cluster's main process only: it stops its sentinel, pusher,
            # workers and monitor in order (~1.5 s). SIGTERM to the whole group makes the
            # children die under the sentinel, which then waits forever.
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError):  # the group is gone (or the test already killed it)
            os.killpg(proc.pid, signal.SIGKILL)  # stragglers, or a cluster that did not stop
        if log:
            log.close()


@contextmanager
def finishes_within(seconds: float) -> Iterator[None]:
    """Fail when the block takes ``seconds`` or more.

    A guard against unbounded work (a quadratic path, a bomb that is parsed instead of refused),
    not a speed target: set it many times above an idle machine's time, so a loaded 2-core
    machine does not trip it. Speed is measured in bench/; a hang is ended by pytest-timeout.
    """
    started = time.monotonic()
    yield
    elapsed = time.monotonic() - started
    assert elapsed < seconds, f"took {elapsed:.1f} s, the bound is {seconds} s"


def wait_for(predicate: Any, *, timeout: float = 60.0, interval: float = 0.2) -> Any:
    """Poll until predicate() is truthy; fail the test with a clear message otherwise."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    pytest.fail(f"condition not met within {timeout}s")
