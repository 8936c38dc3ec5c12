"""manage.py memory_engine_import FILE --store ms_… [--format jsonl|csv] [--batch-size N] [--dry-run]

Bring memories from another system (a CRM's history, another memory product's export) into a
store through the write funnel, in batches (POST /api/v1/memories/batch's service): each record
is deduplicated, superseded or created exactly as a one-by-one write in file order would be, one
ledger row each (mechanism ``import``). Records are JSON Lines (one object per line) or CSV with a
header; each has ``content`` and optionally the other fields of a memory write (``tags``,
``metadata``, ``about``, ``kind``, ``title``, ``summary``, ``confidence``, ``facet``,
``expires_at``, ``conversation_id``, ``retention_class``, ``provenance``, ``lineage``; in CSV,
``tags``, ``metadata`` and ``about`` hold JSON). ``lineage`` defaults to ``imported``. A record
that is refused (its line is named with the reason) loses nothing else. Shows progress, and a
summary at the end; exits with status 1 when a record was refused.
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory_engine.api.memories import MemoryBatchItemSerializer
from memory_engine.conf import engine_settings
from memory_engine.management.progress import ProgressBar
from memory_engine.models import Lineage, MemoryStore
from memory_engine.models.memories import Mechanism
from memory_engine.services.memories import memory_write_batch

#: CSV columns that hold JSON.
JSON_COLUMNS = ("tags", "metadata", "about")
PRINCIPAL = "command:memory_engine_import"


def jsonl_records(path: Path) -> Iterator[tuple[int, Any]]:
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                try:
                    yield number, json.loads(line)
                except ValueError as exc:
                    yield number, ValueError(f"not JSON: {exc}")


def csv_records(path: Path) -> Iterator[tuple[int, Any]]:
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        for row in reader:
            record: dict[str, Any] = {k: v for k, v in row.items() if k and v not in (None, "")}
            try:
                for column in JSON_COLUMNS:
                    if column in record:
                        record[column] = json.loads(record[column])
            except ValueError as exc:
                yield reader.line_num, ValueError(f"column {column!r} is not JSON: {exc}")
                continue
            yield reader.line_num, record


class Command(BaseCommand):
    help = "Import memories from a JSON Lines or CSV file into a store, through the write funnel, in batches."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--store", required=True, help="The memory store id (ms_…).")
        parser.add_argument("--format", choices=["jsonl", "csv"], help="Default: from the file's extension.")
        parser.add_argument("--batch-size", type=int, default=500,
                            help="Records per batch (at most MAX_BATCH_MEMORIES; default 500).")
        parser.add_argument("--dry-run", action="store_true", help="Check every record and write nothing.")

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["file"]
        if not path.is_file():
            raise CommandError(f"No such file: {path}")
        store = MemoryStore.objects.select_related("project").filter(pk=options["store"]).first()
        if store is None:
            raise CommandError(f"No memory store {options['store']!r}.")
        size = options["batch_size"]
        if not 1 <= size <= engine_settings.MAX_BATCH_MEMORIES:
            raise CommandError(f"--batch-size must be between 1 and MAX_BATCH_MEMORIES "
                               f"({engine_settings.MAX_BATCH_MEMORIES}).")
        kind = options["format"] or ("csv" if path.suffix.lower() == ".csv" else "jsonl")
        records = list((csv_records if kind == "csv" else jsonl_records)(path))
        counts: Counter[str] = Counter()
        refused: list[tuple[int, str]] = []
        bar = ProgressBar.for_command(self, len(records), label=f"import into {store.name}")
        for start in range(0, len(records), size):
            chunk = records[start:start + size]
            items, lines = [], []
            for line, record in chunk:
                checked = self._check(record)
                if isinstance(checked, str):
                    refused.append((line, checked))
                    counts["failed"] += 1
                else:
                    items.append(checked)
                    lines.append(line)
            if items and not options["dry_run"]:
                for line, outcome in zip(lines, memory_write_batch(store=store, items=items, principal=PRINCIPAL,
                                                                   mechanism=Mechanism.IMPORT), strict=True):
                    if outcome.error is not None:
                        refused.append((line, f"{outcome.error.code}: {outcome.error.message}"))
                        counts["failed"] += 1
                    else:
                        counts[outcome.result.action] += 1  # type: ignore[union-attr]
            elif items:
                counts["checked"] += len(items)
            bar.advance(len(chunk))
        bar.close()
        self._summary(path, counts, refused, dry_run=options["dry_run"])
        if refused:
            raise SystemExit(1)

    @staticmethod
    def _check(record: Any) -> dict[str, Any] | str:
        """The record as memory_write_batch takes it, or why it cannot be (the API's checks)."""
        if isinstance(record, Exception):
            return str(record)
        if not isinstance(record, dict):
            return "a record must be an object"
        record.setdefault("lineage", Lineage.IMPORTED)
        serializer = MemoryBatchItemSerializer(data=record)
        try:
            serializer.is_valid(raise_exception=True)
        except Exception as exc:  # UNKNOWN_FIELD (a MemoryEngineError) or DRF's ValidationError
            return f"{getattr(exc, 'code', 'VALIDATION_ERROR')}: {getattr(exc, 'message', None) or exc}"
        return MemoryBatchItemSerializer.item_kwargs(serializer.validated_data)

    def _summary(self, path: Path, counts: Counter[str], refused: list[tuple[int, str]], *, dry_run: bool) -> None:
        done = ", ".join(f"{key} {counts[key]}" for key in ("created", "superseded", "skipped", "checked", "failed")
                         if counts[key])
        self.stdout.write(f"{path}: {done or 'nothing to import'}{' (dry run: nothing written)' if dry_run else ''}")
        for line, reason in refused[:50]:
            self.stdout.write(f"  line {line}: {reason}")
        if len(refused) > 50:
            self.stdout.write(f"  … and {len(refused) - 50} more")
