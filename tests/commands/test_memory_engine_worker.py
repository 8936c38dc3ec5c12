"""manage.py memory_engine_worker: a real cluster on the test database stops within a bounded
time on SIGTERM, at any moment, and loses no task (what it took and did not finish is requeued).

django-q2's own ``qcluster`` waited for every task it had already taken (40 s and more with a
few queued), and did not always stop on a SIGTERM in its first seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from django.db import connection
from django.utils import timezone

from ..conftest import ROOT, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

GRACE = 2
#: The bound a stop is held to: the grace period, the worker's margin (15 s), and room for a
#: loaded 2-core machine.
STOP_BOUND = GRACE + 15 + 10


def sleep_once(marker: str, seconds: float) -> str:
    """A task that runs ``seconds`` the first time (it leaves ``marker``), and at once when run again."""
    if os.path.exists(marker):
        return "again"
    Path(marker).touch()
    time.sleep(seconds)
    return "first"


class Worker:
    def __init__(self, log: Path) -> None:
        env = dict(os.environ, MEMORY_ENGINE_DB_NAME=connection.settings_dict["NAME"], Q_WORKERS="1",
                   PYTHONUNBUFFERED="1")
        self.log = log
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, str(ROOT / "manage.py"), "memory_engine_worker", "--grace", str(GRACE)],
                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.started = time.monotonic()

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for_output(self, text: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.output():
            assert self.proc.poll() is None, f"the worker exited ({self.proc.returncode}):\n{self.output()[-3000:]}"
            assert time.monotonic() < deadline, f"no {text!r} in the worker's log:\n{self.output()[-3000:]}"
            time.sleep(0.05)

    def terminate(self) -> float:
        """SIGTERM to the main process (as make run, systemd's KillMode=mixed or a test would send it);
        the seconds it took to exit, all its processes with it."""
        descendants = psutil.Process(self.proc.pid).children(recursive=True)
        sent = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=STOP_BOUND)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the worker still ran {STOP_BOUND} s after SIGTERM:\n{self.output()[-3000:]}")
        took = time.monotonic() - sent
        _, alive = psutil.wait_procs(descendants, timeout=5)
        assert [p.pid for p in alive if p.status() != psutil.STATUS_ZOMBIE] == [], "a cluster process outlived it"
        return took

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@pytest.fixture
def workers(transactional_db: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Any]:
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", False)
    started: list[Worker] = []

    def start() -> Worker:
        worker = Worker(tmp_path / "worker.log")
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.kill()


@pytest.mark.parametrize("moment", ["starting", "running."])
def test_sigterm_in_the_first_seconds_stops_the_worker(workers: Any, moment: str) -> None:
    """While the sentinel is being started (its signal handler installed, the cluster not up yet),
    and the moment the cluster reports it runs."""
    worker = workers()
    worker.wait_for_output(moment)
    worker.terminate()
    assert worker.proc.returncode == 0
    assert "has stopped" in worker.output()


def test_sigterm_while_a_task_runs_stops_in_bounded_time_and_loses_no_task(workers: Any, tmp_path: Path) -> None:
    """One task runs (2 minutes the first time), two more wait (taken by the cluster or still in
    the queue): SIGTERM stops the worker within the grace period and the margin, the three tasks
    are available again at once, and the next worker runs them all, the cut one again."""
    from django_q.models import OrmQ
    from django_q.tasks import async_task, fetch

    markers = [tmp_path / f"task-{n}" for n in range(3)]
    ids = [async_task(f"{__name__}.sleep_once", str(marker), 120 if n == 0 else 0)
           for n, marker in enumerate(markers)]
    worker = workers()
    wait_for(lambda: markers[0].exists(), timeout=120)  # the long task runs
    took = worker.terminate()
    assert took < GRACE + 15, worker.output()[-3000:]
    assert "requeued" in worker.output()
    assert fetch(ids[0]) is None  # cut short, not recorded as done
    waiting = list(OrmQ.objects.all())
    assert len(waiting) == 3 - sum(fetch(task_id) is not None for task_id in ids)
    assert all(row.lock <= timezone.now() for row in waiting)  # available now, not after Q_CLUSTER["retry"]

    workers()
    wait_for(lambda: all(fetch(task_id) is not None for task_id in ids), timeout=120)
    results = [fetch(task_id) for task_id in ids]
    assert all(result.success for result in results), [result.result for result in results]
    assert results[0].result == "again"  # the cut task ran a second time
    assert not OrmQ.objects.exists()
