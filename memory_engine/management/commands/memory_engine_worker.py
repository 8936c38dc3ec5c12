"""manage.py memory_engine_worker [--grace SECONDS]

The engine's worker: django-q2's cluster (what ``qcluster`` runs, same ``Q_CLUSTER`` settings)
that stops within a bounded time on SIGTERM or Ctrl-C and requeues the tasks it did not run to
the end (memory_engine.management.worker).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory_engine.management.worker import DEFAULT_GRACE, STOP_MARGIN, EngineCluster


class Command(BaseCommand):
    help = ("Run the django-q2 worker cluster; on SIGTERM or Ctrl-C it stops within --grace seconds "
            "(plus about 15) and requeues the tasks it did not finish.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--grace", type=float, default=DEFAULT_GRACE,
                            help=f"seconds a running task gets to finish once stopping (default {DEFAULT_GRACE:.0f}; "
                                 f"the worker then exits within about {STOP_MARGIN:.0f} more)")

    def handle(self, *args: Any, grace: float, **options: Any) -> None:
        if grace < 0:
            raise CommandError("--grace must be 0 or more seconds")
        if EngineCluster(grace=grace).run():
            raise CommandError("the worker cluster's sentinel exited on its own; see the log above")
