"""The engine's worker: django-q2's cluster, stopped within a bounded time (``manage.py memory_engine_worker``).

django-q2's ``qcluster`` stops on SIGTERM only once its workers have run every task already
taken from the queue (up to ``workers²`` of them, then the running ones, each up to
``Q_CLUSTER["timeout"]``): 40 s and more after SIGTERM with a few tasks waiting. Its signal
handler also stops the cluster from inside the handler, which can interrupt the main process
while it holds the lock the sentinel needs to report that it started.

Here the main process's handler only records the signal; the main loop then asks the sentinel
to stop and waits for it, at most the grace period and a margin. The sentinel
(:class:`EngineSentinel`) stops the pusher, takes back the tasks waiting in its queue, lets the
running tasks finish until the grace period ends, then kills the workers still running one,
lets the monitor save the results it has, and requeues every task taken back or cut short (with
the ORM broker: the task's row becomes available again at once; other brokers re-deliver
unacknowledged tasks after ``Q_CLUSTER["retry"]``). The engine's tasks may run twice (the sweeps
re-run lost ones anyway; a rule firing skips the facts it already wrote).

The main process exits when the sentinel is gone, whatever ended it, and takes any process of
the cluster left behind with it (it is their subreaper on Linux); the sentinel stops the cluster
when the main process is gone.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import threading
import time
import uuid
from multiprocessing import Event, Value
from queue import Empty
from typing import Any

from django import db
from django.utils import timezone
from django_q.brokers.orm import ORM
from django_q.cluster import Cluster, Sentinel, get_mp_context, setproctitle
from django_q.conf import Conf
from django_q.models import OrmQ
from django_q.status import Stat
from django_q.worker import worker

logger = logging.getLogger(__name__)

#: Seconds a running task gets to finish after SIGTERM before its worker is killed (and the task
#: requeued), unless ``--grace`` says otherwise.
DEFAULT_GRACE = 10.0
#: Seconds the main process waits beyond the grace period for the sentinel before killing the cluster.
STOP_MARGIN = 15.0
#: Seconds the monitor gets to save the results already reported once the workers are gone.
MONITOR_TIMEOUT = 5.0
_PR_SET_CHILD_SUBREAPER = 36


class TrackedTaskQueue:
    """A worker's view of the task queue that records the broker id (``ack_id``) of the task the
    worker took last in ``current`` (0: none), so that a worker killed mid-task names its task."""

    def __init__(self, queue: Any, current: Any) -> None:
        self.queue = queue
        self.current = current

    def get(self, *args: Any, **kwargs: Any) -> Any:
        task = self.queue.get(*args, **kwargs)
        ack_id = task.get("ack_id") if isinstance(task, dict) else None
        self.current.value = ack_id if isinstance(ack_id, int) else 0
        return task


def tracked_worker(task_queue: Any, result_queue: Any, timer: Any, timeout: Any, current: Any) -> None:
    worker(TrackedTaskQueue(task_queue, current), result_queue, timer, timeout)


def run_sentinel(stop_event: Any, start_event: Any, cluster_id: uuid.UUID, grace: float, parent_pid: int) -> None:
    """The sentinel process's target."""
    EngineSentinel(stop_event, start_event, cluster_id, grace=grace, parent_pid=parent_pid)


class EngineSentinel(Sentinel):
    """django-q2's sentinel with a bounded stop that requeues what it did not run (module docstring)."""

    pool: list[Any]

    def __init__(self, stop_event: Any, start_event: Any, cluster_id: uuid.UUID, *, grace: float,
                 parent_pid: int) -> None:
        self.grace = grace
        super().__init__(stop_event, start_event, cluster_id, start=False)
        threading.Thread(target=self._stop_when_orphaned, args=(parent_pid,), daemon=True).start()
        self.start()

    def _stop_when_orphaned(self, parent_pid: int) -> None:
        while not self.stop_event.wait(1.0):
            if os.getppid() != parent_pid:
                logger.warning("the worker's main process %s is gone: stopping the cluster", parent_pid)
                self.stop_event.set()

    def spawn_worker(self) -> None:
        timer, current = Value("f", -1), Value("q", 0)
        process = get_mp_context().Process(
            target=tracked_worker, args=(self.task_queue, self.result_queue, timer, self.timeout, current),
            name=f"Process-{uuid.uuid4().hex}",
        )
        process.daemon = Conf.DAEMONIZE_WORKERS
        process.timer = timer  # as django-q2's spawn_process sets it
        process.current = current
        self.pool.append(process)
        process.start()

    def _take_back_queued(self) -> list[int]:
        taken = []
        with contextlib.suppress(Empty, OSError, ValueError):
            while True:
                task = self.task_queue.get_nowait()
                if isinstance(task, dict) and isinstance(task.get("ack_id"), int):
                    taken.append(task["ack_id"])
        return taken

    def stop(self) -> None:
        Stat(self).save()
        deadline = time.monotonic() + self.grace
        logger.info("%s stopping the cluster: running tasks get %.0f s", self.name, self.grace)
        self.event_out.set()
        # The pusher may wait on a full task queue: empty it meanwhile.
        requeue = self._take_back_queued()
        while self.pusher.is_alive() and time.monotonic() < deadline:
            self.pusher.join(0.1)
            requeue += self._take_back_queued()
        if self.pusher.is_alive():
            self.pusher.kill()
            self.pusher.join(5)
        requeue += self._take_back_queued()
        for _ in self.pool:
            self.task_queue.put("STOP")
        while time.monotonic() < deadline and any(p.is_alive() for p in self.pool):
            time.sleep(0.1)
            Stat(self).save()
        for process in self.pool:
            if process.is_alive():
                requeue.append(process.current.value)
                logger.warning("%s killing worker %s, whose task did not finish within %.0f s: it is requeued",
                               self.name, process.pid, self.grace)
                process.kill()
                process.join(5)
        self.pool = []
        self.result_queue.put("STOP")
        self.monitor.join(MONITOR_TIMEOUT)  # it saves (and acknowledges) the results it has
        if self.monitor.is_alive():
            self.monitor.kill()
            self.monitor.join(5)
        self.requeue([ack_id for ack_id in requeue if ack_id])
        Stat(self).save()

    def requeue(self, ack_ids: list[int]) -> None:
        """Make the tasks ``ack_ids`` (taken from the broker, not acknowledged) available again now."""
        if not ack_ids:
            return
        if not isinstance(self.broker, ORM):
            logger.warning("%s: %d task(s) not run; the broker re-delivers them after its retry period",
                           self.name, len(ack_ids))
            return
        try:
            count = OrmQ.objects.using(Conf.ORM).filter(pk__in=ack_ids).update(lock=timezone.now())
        except db.Error:
            logger.exception("%s could not requeue %d task(s): they are re-delivered after Q_CLUSTER['retry'] "
                             "seconds", self.name, len(ack_ids))
            return
        logger.info("%s requeued %d task(s) it had taken and not run to the end", self.name, count)


def _become_subreaper() -> None:
    """Make this process the parent of its descendants orphaned by a dead sentinel (Linux only)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _kill_descendants() -> None:
    import psutil

    children = psutil.Process().children(recursive=True)
    for child in children:
        with contextlib.suppress(psutil.Error):
            child.kill()
    psutil.wait_procs(children, timeout=10)


class EngineCluster(Cluster):
    """django-q2's cluster whose signal handler only records the signal (module docstring)."""

    def __init__(self, *, grace: float = DEFAULT_GRACE) -> None:
        self.grace = grace
        self.signalled: int | None = None
        super().__init__()  # installs sig_handler for SIGTERM and SIGINT

    def sig_handler(self, signum: int, frame: Any) -> None:
        # Nothing that takes a lock: the handler may run while the main process holds one.
        self.signalled = signum

    def run(self) -> int:
        """Start the cluster and return once it has stopped: 0 after SIGTERM or SIGINT, 1 when the
        sentinel ended by itself."""
        _become_subreaper()
        if setproctitle:
            setproctitle.setproctitle(f"qcluster memory_engine_worker {self.name}")
        self.stop_event, self.start_event = Event(), Event()
        self.sentinel = get_mp_context().Process(
            target=run_sentinel, args=(self.stop_event, self.start_event, self.cluster_id, self.grace, os.getpid()),
            name=f"Process-{uuid.uuid4().hex}",
        )
        self.sentinel.start()
        logger.info("Q Cluster %s starting (memory_engine_worker, grace %.0f s).", self.name, self.grace)
        while self.signalled is None and self.sentinel.is_alive():
            self.sentinel.join(0.2)
        if self.signalled is None:
            logger.error("Q Cluster %s: its sentinel exited (code %s); the worker exits too.", self.name,
                         self.sentinel.exitcode)
            _kill_descendants()
            return 1
        logger.info("Q Cluster %s stopping.", self.name)
        # set() takes the event's lock, which a sentinel killed at the wrong moment never gives back.
        threading.Thread(target=self.stop_event.set, daemon=True).start()
        self.sentinel.join(self.grace + STOP_MARGIN)
        if self.sentinel.is_alive():
            logger.error("Q Cluster %s did not stop within %.0f s: killing it.", self.name, self.grace + STOP_MARGIN)
        _kill_descendants()
        logger.info("Q Cluster %s has stopped.", self.name)
        return 0
