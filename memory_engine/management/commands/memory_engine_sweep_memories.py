"""manage.py memory_engine_sweep_memories

Run the memory sweep now (it also runs every MEMORY_SWEEP_MINUTES as a django-q2 Schedule):
delete expired memories and purge the trash past each store's trash_days, one ledger row
(``expired`` / ``purged``) per memory. Safe to run while the scheduled sweep runs.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from memory_engine.services.memory_lifecycle import memory_sweep


class Command(BaseCommand):
    help = "Delete expired memories and purge the trash past its window now."

    def handle(self, *args: Any, **options: Any) -> None:
        counts = memory_sweep()
        self.stdout.write(f"expired: {counts.expired}  purged: {counts.purged}")
        self.stdout.write(self.style.SUCCESS("Done."))
