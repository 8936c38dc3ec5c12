"""manage.py memory_engine_reembed [--missing | --all] [--store ID ...] [--document ID ...]

--missing (default): fill vectors that failed at write or ingestion time, and rows made
by another model than the active one. --all: re-embed every row with the active model, in
place. Changing the model or its dimension is `memory_engine_embedding_model` (register,
build, switch): search keeps serving meanwhile (docs/embeddings.md).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory_engine.exceptions import MemoryEngineError
from memory_engine.management.progress import ProgressBar
from memory_engine.services.reembed import reembed


class Command(BaseCommand):
    help = "Fill missing vectors, or re-embed every row with the active embedding model."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        mode = parser.add_mutually_exclusive_group()
        mode.add_argument("--missing", action="store_true", help="Only rows without a current vector (default).")
        mode.add_argument("--all", action="store_true", help="Every row, with the active model.")
        parser.add_argument("--store", action="append", dest="stores", help="Limit to a memory store id.")
        parser.add_argument("--document", action="append", dest="documents", help="Limit to a document id.")
        parser.add_argument("--batch-size", type=int, default=None)

    def handle(self, *args: Any, **options: Any) -> None:
        bars: dict[str, ProgressBar] = {}

        def on_start(kind: str, total: int) -> None:
            bars[kind] = ProgressBar.for_command(self, total, label=f"{kind:<16}")

        def on_progress(kind: str, count: int) -> None:
            bars[kind].advance(count)

        scoped = options["stores"] is not None or options["documents"] is not None
        try:
            report = reembed(
                missing_only=not options["all"],
                store_ids=options["stores"] if scoped else None,
                document_ids=options["documents"] if scoped else None,
                batch_size=options["batch_size"],
                on_start=on_start,
                on_progress=on_progress,
            )
        except MemoryEngineError as exc:
            raise CommandError(f"{exc.code}: {exc.message}") from exc
        for bar in bars.values():
            bar.close()
        self.stdout.write(f"{'kind':<16} {'embedded':>9} {'failed':>7}")
        for kind in report.embedded:
            self.stdout.write(f"{kind:<16} {report.embedded[kind]:>9} {report.failed[kind]:>7}")
        if any(report.failed.values()):
            self.stdout.write(self.style.WARNING(
                f"Some rows failed ({report.errors[0] if report.errors else ''}); run the command again."
            ))
        else:
            self.stdout.write(self.style.SUCCESS("Done."))
