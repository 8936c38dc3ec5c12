"""A live app (gunicorn + optional qcluster) and a mixed load generator, shared by
``tests/hardening/test_load.py`` (short run), ``tests/hardening/test_faults.py`` (the
PostgreSQL restart) and ``bench/load.py`` (the full run).

Nothing here imports Django: the app runs in subprocesses, the clients speak HTTP on
127.0.0.1, and the ledger checks read the database with plain SQL (psycopg), so the same
code serves the test database, the bench database and a throwaway PostgreSQL.
"""

from __future__ import annotations

import itertools
import os
import random
import socket
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from example_project.secret_key import checkout_secret_key

ROOT = Path(__file__).resolve().parents[1]

#: Facts written again and again by every client: the funnel must skip the restatements.
REPEATED_FACTS = [
    "The office closes at 6 pm on Fridays.",
    "Deployments are frozen during the last week of December.",
    "The on-call rotation changes every Monday at 9 am.",
    "The staging database runs PostgreSQL 16 on db-stage-2.",
    "Invoices are sent on the first business day of each month.",
    "The customer portal supports single sign-on through Okta.",
]
SUBJECTS = ["invoice", "sensor", "ticket", "release", "customer", "warehouse", "contract", "server"]
QUERIES = ["when does the office close", "deployment freeze", "on-call rotation", "staging database version",
           "invoice schedule", "single sign-on", "warehouse capacity", "release notes for the sensor"]

#: Operation mix (weights) of one client.
MIX = {"write_new": 35, "write_repeat": 25, "search": 30, "upload_document": 10}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def manage(env: dict[str, str], *args: str, timeout: float = 120) -> str:
    """Run ``manage.py <args>`` with ``env`` added to the environment; its stdout."""
    done = subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], cwd=ROOT, env={**os.environ, **env},
                          capture_output=True, text=True, timeout=timeout)
    if done.returncode:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return done.stdout


class LiveApp:
    """gunicorn (gthread workers) on 127.0.0.1 and, optionally, a qcluster worker.

    ``env`` selects the database (``MEMORY_ENGINE_DB_NAME`` or ``DATABASE_URL``) and the
    embedder; the per-project throttle is lifted (a load test measures the app, not the limit).
    """

    def __init__(self, env: dict[str, str], *, web_workers: int = 2, threads: int = 8, qcluster: bool = False,
                 q_workers: int = 2, log: Path | None = None, wsgi: str = "example_project.wsgi:application",
                 preload: bool = False) -> None:
        self.env = {**os.environ, "MEMORY_ENGINE_RATE": "1000000/min", "DJANGO_DEBUG": "0",
                    "PYTHONUNBUFFERED": "1", "Q_WORKERS": str(q_workers), **env}
        # DEBUG off needs a real key (memory_engine.E006); web and worker share this one.
        self.env.setdefault("DJANGO_SECRET_KEY", checkout_secret_key(ROOT / ".secret_key"))
        self.web_workers, self.threads, self.with_qcluster = web_workers, threads, qcluster
        self.wsgi, self.preload = wsgi, preload  # preload: gunicorn loads the app once, then forks
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log
        self.procs: list[subprocess.Popen] = []

    def _spawn(self, args: list[str]) -> subprocess.Popen:
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        proc = subprocess.Popen(args, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        self.procs.append(proc)
        return proc

    def __enter__(self) -> LiveApp:
        self.web = self._spawn([
            sys.executable, "-m", "gunicorn", self.wsgi, "--bind",
            f"127.0.0.1:{self.port}", "--workers", str(self.web_workers), "--worker-class", "gthread",
            "--threads", str(self.threads), "--timeout", "120", "--graceful-timeout", "5",
            *(["--preload"] if self.preload else []),
        ])
        if self.with_qcluster:
            self._spawn([sys.executable, str(ROOT / "manage.py"), "qcluster"])
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.web.poll() is not None:
                raise RuntimeError(f"gunicorn exited with {self.web.returncode}")
            try:
                httpx.get(f"{self.url}/api/v1/memories", timeout=2)  # 401: the app answers
                return self
            except httpx.HTTPError:
                time.sleep(0.3)
        self.__exit__()
        raise RuntimeError("gunicorn did not answer within 90 s")

    def web_pids(self) -> set[int]:
        """The gunicorn master and its workers (to show the app was not restarted)."""
        out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(self.web.pid)], capture_output=True, text=True)
        return {self.web.pid, *(int(p) for p in out.stdout.split())}

    def __exit__(self, *exc: Any) -> None:
        from example_project.run import stop_children  # imports no Django

        stop_children(list(reversed(self.procs)))


# --- the load -----------------------------------------------------------------------------------


@dataclass
class Call:
    op: str
    status: int  # 0: no HTTP answer (connection error, client timeout)
    seconds: float
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    store_id: str = ""
    started_at: float = 0.0  # time.monotonic() when the request was sent


@dataclass
class LoadResult:
    calls: list[Call]
    seconds: float
    clients: int

    def by_op(self) -> dict[str, list[Call]]:
        grouped: dict[str, list[Call]] = defaultdict(list)
        for call in self.calls:
            grouped[call.op].append(call)
        return dict(grouped)

    def statuses(self) -> Counter:
        return Counter(call.status for call in self.calls)

    def server_errors(self) -> list[Call]:
        return [call for call in self.calls if call.status >= 500 or call.status == 0]

    def writes(self) -> list[Call]:
        return [c for c in self.calls if c.op.startswith("write") and 200 <= c.status < 300]

    def actions_by_store(self) -> dict[str, Counter]:
        """The funnel's decisions the clients were told, per store."""
        actions: dict[str, Counter] = defaultdict(Counter)
        for call in self.writes():
            actions[call.store_id][call.body["action"]] += 1
        return dict(actions)

    def document_ids(self) -> list[str]:
        return [c.body["id"] for c in self.calls if c.op == "upload_document" and 200 <= c.status < 300]


def _fact(rng: random.Random, client: int, n: int) -> str:
    subject = rng.choice(SUBJECTS)
    return (f"The {subject} {client}-{n} record says code {rng.randrange(10**6):06d} belongs to "
            f"site {rng.choice('ABCDEFGH')}{rng.randrange(100)} since week {rng.randrange(1, 53)}.")


def _document(rng: random.Random, client: int, n: int) -> str:
    lines = [f"# Load note {client}-{n}", ""]
    for _ in range(rng.randrange(3, 8)):
        lines.append(_fact(rng, client, n) + " " + rng.choice(REPEATED_FACTS))
    return "\n\n".join(lines)


def _client_loop(base_url: str, key: str, store_ids: list[str], client: int, stop_at: float, seed: int,
                 calls: list[Call], lock: threading.Lock, timeout: float, mix: dict[str, int]) -> None:
    rng = random.Random(seed * 1000 + client)
    ops, weights = zip(*mix.items(), strict=True)
    local: list[Call] = []
    with httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {key}"}, timeout=timeout) as http:
        for n in itertools.count():
            if time.monotonic() >= stop_at:
                break
            op = rng.choices(ops, weights)[0]
            store_id = rng.choice(store_ids)
            if op == "write_new":
                method, path, body = "POST", "/api/v1/memories", {"memory_store_id": store_id,
                                                                  "content": _fact(rng, client, n)}
            elif op == "write_repeat":
                method, path, body = "POST", "/api/v1/memories", {"memory_store_id": store_id,
                                                                  "content": rng.choice(REPEATED_FACTS)}
            elif op == "search":
                method, path, body = "POST", "/api/v1/knowledge/search", {"query": rng.choice(QUERIES), "limit": 5}
            else:
                method, path, body = "POST", "/api/v1/documents", {
                    "path": f"/load/{seed}/{client}-{n}.md", "content": _document(rng, client, n),
                    "content_type": "text/markdown"}
            sent_at, started = time.monotonic(), time.perf_counter()
            try:
                response = http.request(method, path, json=body)
                status, headers = response.status_code, dict(response.headers)
                try:
                    payload = response.json()
                except ValueError:
                    payload = response.text[:500]
            except httpx.HTTPError as exc:
                status, headers, payload = 0, {}, f"{type(exc).__name__}: {exc}"
            local.append(Call(op, status, time.perf_counter() - started, payload, headers,
                              store_id if op.startswith("write") else "", sent_at))
    with lock:
        calls.extend(local)


def run_load(base_url: str, key: str, store_ids: list[str], *, clients: int, seconds: float, seed: int = 1,
             timeout: float = 60.0, mix: dict[str, int] | None = None) -> LoadResult:
    """``clients`` threads, each looping over the operation ``mix`` (default MIX) for ``seconds``."""
    calls: list[Call] = []
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds
    started = time.perf_counter()
    threads = [threading.Thread(target=_client_loop, daemon=True,
                                args=(base_url, key, store_ids, i, stop_at, seed, calls, lock, timeout, mix or MIX))
               for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + timeout + 30)
    return LoadResult(calls=calls, seconds=time.perf_counter() - started, clients=clients)


def latency_table(result: LoadResult) -> list[dict[str, Any]]:
    """Per operation: count, p50/p95/p99 in ms, throughput (per second)."""
    rows = []
    for op, calls in sorted(result.by_op().items()):
        durations = sorted(c.seconds for c in calls)

        def pct(p: float, durations: list[float] = durations) -> float:
            return round(durations[min(len(durations) - 1, round(p / 100 * (len(durations) - 1)))] * 1000, 1)

        rows.append({"op": op, "n": len(calls), "p50_ms": pct(50), "p95_ms": pct(95), "p99_ms": pct(99),
                     "per_s": round(len(calls) / result.seconds, 1)})
    return rows


# --- the ledger ---------------------------------------------------------------------------------


def ledger_report(conninfo: str | dict[str, Any], *, store_ids: list[str] | None = None) -> dict[str, Any]:
    """Memories against assertions, with plain SQL.

    * ``orphans``: memories without the assertion that created them (created / superseded /
      declared pointing at the memory) — a half-written row;
    * per store: valid memories, and created / superseded / forgotten assertions, so that
      ``valid == created - forgotten`` (a supersede creates one memory and retires one).
    """
    import psycopg

    kwargs = {"conninfo": conninfo} if isinstance(conninfo, str) else {k: v for k, v in conninfo.items() if v}
    where, params = ("WHERE m.store_id = ANY(%s)", [store_ids]) if store_ids else ("", [])
    with psycopg.connect(**kwargs) as conn:
        orphans = conn.execute(f"""
            SELECT m.id FROM memory_engine_memory m {where}
            {"AND" if where else "WHERE"} NOT EXISTS (
                SELECT 1 FROM memory_engine_memoryassertion a
                WHERE a.memory_id = m.id AND a.outcome IN ('created', 'superseded', 'declared'))
        """, params).fetchall()
        stores: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for store_id, valid, total in conn.execute(f"""
            SELECT m.store_id, count(*) FILTER (WHERE m.invalidated_at IS NULL), count(*)
            FROM memory_engine_memory m {where} GROUP BY m.store_id""", params):
            stores[store_id]["valid"], stores[store_id]["memories"] = valid, total
        where_a = "WHERE store_id = ANY(%s)" if store_ids else ""
        for store_id, outcome, n in conn.execute(
                f"SELECT store_id, outcome, count(*) FROM memory_engine_memoryassertion {where_a} "
                "GROUP BY store_id, outcome", params):
            stores[store_id][outcome] = n
    return {"orphans": [row[0] for row in orphans], "stores": {k: dict(v) for k, v in stores.items()}}


def existing_assertions(conninfo: str | dict[str, Any], assertion_ids: list[str]) -> set[str]:
    import psycopg

    kwargs = {"conninfo": conninfo} if isinstance(conninfo, str) else {k: v for k, v in conninfo.items() if v}
    with psycopg.connect(**kwargs) as conn:
        rows = conn.execute("SELECT id FROM memory_engine_memoryassertion WHERE id = ANY(%s)", [assertion_ids])
        return {row[0] for row in rows}


def check_writes(conninfo: str | dict[str, Any], result: LoadResult, store_ids: list[str]) -> list[str]:
    """Problems found (empty when sound): a 2xx write without its assertion, a store whose
    valid memories differ from what the funnel's decisions imply, a half-written memory."""
    problems: list[str] = []
    writes = result.writes()
    wanted = [c.body["assertion_id"] for c in writes]
    missing = set(wanted) - existing_assertions(conninfo, wanted)
    if missing:
        problems.append(f"{len(missing)} acknowledged writes have no assertion: {sorted(missing)[:5]}")
    report = ledger_report(conninfo, store_ids=store_ids)
    if report["orphans"]:
        problems.append(f"memories without their creating assertion: {report['orphans'][:5]}")
    told = result.actions_by_store()
    for store_id in store_ids:
        row = report["stores"].get(store_id, {})
        implied = row.get("created", 0) - row.get("forgotten", 0)
        if row.get("valid", 0) != implied:
            problems.append(f"{store_id}: {row.get('valid', 0)} valid memories, the ledger implies {implied}")
        seen = told.get(store_id, Counter())
        if row.get("memories", 0) != row.get("created", 0) + row.get("superseded", 0):
            problems.append(f"{store_id}: {row.get('memories', 0)} memories for "
                            f"{row.get('created', 0)} created + {row.get('superseded', 0)} superseded")
        if all(c.status and c.status < 500 for c in result.calls):  # nothing ambiguous: exact agreement
            for action in ("created", "superseded", "skipped"):
                if seen.get(action, 0) != row.get(action, 0):
                    problems.append(f"{store_id}: clients were told {seen.get(action, 0)} {action}, "
                                    f"the ledger holds {row.get(action, 0)}")
    return problems
