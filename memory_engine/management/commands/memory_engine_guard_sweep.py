"""manage.py memory_engine_guard_sweep [--store ID ...] [--status]

Judge the stored texts (memory contents, memories' titles, tags and metadata, document chunks)
that hold no finding of the instruction guard's current version: after an upgrade that changed
the guard, or to judge rows written before findings were stored (docs/security.md, *Instruction
guard*). Reads stay safe meanwhile (they judge such a row themselves), only slower. The scheduled
sweep does the same a bounded number of rows at a time.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from memory_engine.instruction_guard import version
from memory_engine.services.guard_sweep import guard_counts, guard_sweep


class Command(BaseCommand):
    help = "Judge stored texts that hold no finding of the instruction guard's current version."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--store", action="append", dest="stores", metavar="ID",
                            help="Only this memory store's memories (repeat for more).")
        parser.add_argument("--status", action="store_true", help="Only say how many rows are judged.")

    def handle(self, *args: Any, **options: Any) -> None:
        stores = options["stores"]
        if not options["status"]:
            totals: dict[str, int] = {}

            def start(table: str, count: int) -> None:
                totals[table] = count
                self.stdout.write(f"{table}: {count} to judge")

            def progress(table: str, count: int) -> None:
                totals[f"{table}:done"] = totals.get(f"{table}:done", 0) + count
                self.stdout.write(f"  {table}: {totals[f'{table}:done']}/{totals[table]}")

            guard_sweep(store_ids=stores, on_start=start, on_progress=progress)
        for table, count in guard_counts(store_ids=stores).items():
            self.stdout.write(f"{table}: {count['current']} of {count['rows']} judged by guard {version()}")
        self.stdout.write(self.style.SUCCESS("Done."))
