"""manage.py memory_engine_apply FILE --project NAME — declarative stores and memories.

FILE is YAML or JSON:

    stores:
      - name: support-facts
        description: What every support agent must know
        memories:
          - Refunds are processed within 5 business days.
          - content: The support line is open 9am to 5pm CET.
            tags: {topic: hours}
    memory_schema:            # optional: replaces the project's memory schema
      kinds:
        - {name: fact, display_name: Fact}
        - {name: preference, display_name: Preference, description: What the user likes}
      relation_types: []

Idempotent: re-applying keeps what exists, creates what is new and retires declared
memories that are no longer in the file. An unknown ``--project`` is refused unless
``--create-project`` is given. New texts are embedded EMBEDDING_BATCH_SIZE per embedder call,
with a progress bar per store on stderr.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory_engine.exceptions import MemoryEngineError
from memory_engine.management.progress import ProgressBar
from memory_engine.management.projects import add_project_arguments, project_for_command
from memory_engine.services.formation import apply_declaration


class Command(BaseCommand):
    help = "Apply a YAML/JSON declaration of memory stores, their memories and the memory schema."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="Path to a .yaml, .yml or .json declaration.")
        add_project_arguments(parser)

    def handle(self, *args: Any, file: str, project: str, create_project: bool, **options: Any) -> None:
        path = Path(file)
        if not path.is_file():
            raise CommandError(f"{file}: no such file.")
        try:
            text = path.read_text(encoding="utf-8")
            data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        except (ValueError, yaml.YAMLError) as exc:
            raise CommandError(f"{file}: cannot parse: {exc}") from exc
        found, _ = project_for_command(project, create=create_project)
        bars: dict[str, ProgressBar] = {}

        def on_start(store: str, total: int) -> None:
            if total:
                bars[store] = ProgressBar.for_command(self, total, label=f"embedding [{store}]")

        def on_progress(store: str, count: int) -> None:
            bars[store].advance(count)
            if bars[store].done >= bars[store].total:
                bars.pop(store).close()

        try:
            report = apply_declaration(project=found, data=data, on_start=on_start, on_progress=on_progress)
        except MemoryEngineError as exc:
            raise CommandError(f"{exc.code}: {exc.message}") from exc
        if report.memory_schema is not None:
            kinds, relation_types = report.memory_schema
            self.stdout.write(f"memory schema: {kinds} kinds, {relation_types} relation types")
        for name in report.stores_created:
            self.stdout.write(f"store created: {name}")
        for label, rows in (("created", report.created), ("kept", report.kept), ("retired", report.retired)):
            for store, text in rows:
                self.stdout.write(f"{label:<8} [{store}] {text[:100]}")
        self.stdout.write(self.style.SUCCESS(
            f"{len(report.created)} created, {len(report.kept)} kept, {len(report.retired)} retired."
        ))
