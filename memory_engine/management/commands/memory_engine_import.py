"""manage.py memory_engine_import FILE --store ms_… [--format jsonl|csv] [--batch-size N] [--dry-run]
[--progress-every N]

Bring memories from another system (a CRM's history, another memory product's export) into a
store through the write funnel, in batches (POST /api/v1/memories/batch's service): each record
is deduplicated, superseded or created exactly as a one-by-one write in file order would be, one
ledger row each (mechanism ``import``). Records are JSON Lines (one object per line) or CSV with a
header; each has ``content`` and optionally the other fields of a memory write (``tags``,
``metadata``, ``about``, ``kind``, ``title``, ``summary``, ``confidence``, ``facet``,
``expires_at``, ``conversation_id``, ``retention_class``, ``provenance``, ``lineage``; in CSV,
``tags``, ``metadata`` and ``about`` hold JSON). ``lineage`` defaults to ``imported``. A record
that is refused (its line is named with the reason) loses nothing else. Shows progress every N
records, and a summary at the end: records per action and per decision reason, the refused lines,
and a warning naming a few when more than a tenth of the written records retired a memory (an
import of new facts should mostly create); exits with status 1 when a record was refused.

``--dry-run`` writes through the funnel as the real run would, every batch in one transaction
that is rolled back at the end: the same decisions, summary, warning and refusals (quota,
instruction guard, ...), and nothing left behind (no memory, content row, assertion or feed row;
the funnel enqueues nothing, and ``on_commit`` hooks of a rolled-back transaction never run). The
store's other writers wait for the dry run's end, as they wait for a batch.
"""

from __future__ import annotations

import csv
import json
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from rest_framework.exceptions import ValidationError

from memory_engine.api.memories import MemoryBatchItemSerializer
from memory_engine.conf import engine_settings
from memory_engine.exceptions import MemoryEngineError
from memory_engine.management.progress import ProgressBar
from memory_engine.models import Lineage, MemoryStore
from memory_engine.models.memories import Mechanism
from memory_engine.services.memories import memory_write_batch
from memory_engine.services.memories.batch import ACTIONS, BatchOutcome, BatchSummary

#: CSV columns that hold JSON.
JSON_COLUMNS = ("tags", "metadata", "about")
#: The format each file extension is read as when --format is not given; another extension is refused.
FORMATS_BY_SUFFIX = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv"}
PRINCIPAL = "command:memory_engine_import"
#: Above this share of the written records retiring a memory, the import warns: records that are
#: new to the store should mostly be created, and many supersedes often mean distinct facts read
#: as updates of one another (the same subject, no ``about`` key).
SUPERSEDE_WARNING_SHARE = 0.1
#: Superseding records the warning names.
SUPERSEDE_WARNING_EXAMPLES = 5
#: Refused lines the summary names.
REFUSED_SHOWN = 50
SUPERSEDE_ADVICE = (
    "If these records are new facts rather than updates of the memories they retired, give each "
    'record an `about` key ({"kind": ..., "key": ...}) naming what it is about (a memory with '
    "another `about` is never retired by it), or check their subjects: facts about different people "
    'or things written with one subject ("The customer ...", "The office ...") read as updates of '
    "one another, so name whom or what each is about (\"Acme's contract ...\"). If they are updates, "
    "nothing is wrong. How each record is decided: docs/write-funnel.md.")


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


def plain_errors(detail: Any, path: str = "") -> str:
    """DRF's error detail (dicts and lists of ErrorDetail) as the API's messages read:
    ``"content: This field may not be blank.; about.kind: This field is required."``."""
    if isinstance(detail, dict):
        return "; ".join(plain_errors(value, f"{path}.{key}" if path else str(key)) for key, value in detail.items())
    if isinstance(detail, list):
        return "; ".join(plain_errors(item, path) for item in detail)
    return f"{path}: {detail}" if path else str(detail)


@dataclass
class Retirement:
    """A record that superseded a memory, as the warning names it."""

    line: int
    memory_id: str
    text: str
    reason: str
    similarity: float | None
    #: the line of this file whose record wrote the retired memory (None: it was in the store before)
    written_by: int | None


@dataclass
class ImportReport:
    """What an import did: the summary, the refused lines, and the first records that retired a memory."""

    summary: BatchSummary = field(default_factory=BatchSummary)
    refused: list[tuple[int, str]] = field(default_factory=list)
    retirements: list[Retirement] = field(default_factory=list)
    #: the line whose record wrote each memory of the import (to name a retired one by it)
    written_by: dict[str, int] = field(default_factory=dict)

    def refuse(self, line: int, why: str) -> None:
        self.summary.refused += 1
        self.refused.append((line, why))

    def add(self, line: int, outcome: BatchOutcome) -> None:
        """One written or refused record; read while its transaction is open (a dry run's retired
        memory may be one the dry run wrote)."""
        result = outcome.result
        if result is None:
            assert outcome.error is not None
            self.refuse(line, f"{outcome.error.code}: {outcome.error.message}")
            return
        self.summary.add(outcome)
        if result.replaced is not None and len(self.retirements) < SUPERSEDE_WARNING_EXAMPLES:
            self.retirements.append(Retirement(
                line=line, memory_id=result.replaced.pk, text=result.replaced.content.text,
                reason=result.decision_reason, similarity=result.similarity,
                written_by=self.written_by.get(result.replaced.pk)))
        if result.action != "skipped":  # a skip keeps a memory: not this record's
            self.written_by[result.memory.pk] = line


class Command(BaseCommand):
    help = "Import memories from a JSON Lines or CSV file into a store, through the write funnel, in batches."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--store", required=True, help="The memory store id (ms_…).")
        parser.add_argument("--format", choices=["jsonl", "csv"],
                            help="Default: from the file's extension (.jsonl, .ndjson: jsonl; .csv: csv); another "
                                 "extension needs it.")
        parser.add_argument("--batch-size", type=int, default=500,
                            help="Records per batch (at most MAX_BATCH_MEMORIES; default 500).")
        parser.add_argument("--dry-run", action="store_true",
                            help="Decide every record as the real run would, in a transaction rolled back at the "
                                 "end: the same summary, warnings and refusals, nothing written.")
        parser.add_argument("--progress-every", type=int, default=100, metavar="N",
                            help="Show progress each time N more records are done (default 100).")

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
        if options["progress_every"] < 1:
            raise CommandError("--progress-every must be at least 1.")
        kind = options["format"] or FORMATS_BY_SUFFIX.get(path.suffix.lower())
        if kind is None:
            raise CommandError(f"Cannot tell the format of {path.name} from its extension "
                               f"({path.suffix or 'none'}); name it with --format jsonl or --format csv "
                               f"(the extensions read without it: {', '.join(FORMATS_BY_SUFFIX)}).")
        records = list((csv_records if kind == "csv" else jsonl_records)(path))
        bar = ProgressBar.for_command(self, len(records), label=f"import into {store.name}",
                                      every=options["progress_every"])
        if options["dry_run"]:
            # Every batch in one transaction, so each sees the ones before it as in the real run,
            # then rolled back: nothing written, and no on_commit hook runs.
            with transaction.atomic():
                report = self._import(store, records, size, bar)
                transaction.set_rollback(True)
        else:
            report = self._import(store, records, size, bar)
        bar.close()
        self._summary(path, len(records), report, dry_run=options["dry_run"])
        if report.refused:
            raise SystemExit(1)

    def _import(self, store: MemoryStore, records: list[tuple[int, Any]], size: int, bar: ProgressBar) -> ImportReport:
        """Check and write the records batch by batch; each batch is a transaction of its own
        (inside a dry run's, a savepoint)."""
        report = ImportReport()
        for start in range(0, len(records), size):
            items, lines = [], []
            for line, record in records[start:start + size]:
                checked = self._check(record)
                if isinstance(checked, str):
                    report.refuse(line, checked)
                    bar.advance()
                else:
                    items.append(checked)
                    lines.append(line)
            if not items:
                continue
            outcomes = memory_write_batch(store=store, items=items, principal=PRINCIPAL, mechanism=Mechanism.IMPORT,
                                          progress=bar.advance)
            for line, outcome in zip(lines, outcomes, strict=True):
                report.add(line, outcome)
        return report

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
        except MemoryEngineError as exc:  # UNKNOWN_FIELD
            return f"{exc.code}: {exc.message}"
        except ValidationError as exc:
            return f"VALIDATION_ERROR: {plain_errors(exc.detail)}"
        return MemoryBatchItemSerializer.item_kwargs(serializer.validated_data)

    def _summary(self, path: Path, total: int, report: ImportReport, *, dry_run: bool) -> None:
        """Records per action with their decision reasons, the refused lines, and the warning."""
        summary, actions = report.summary, report.summary.actions
        done = [f"{action} {actions[action]}" for action in ACTIONS if actions[action]]
        done += [f"refused {summary.refused}"] if summary.refused else []
        self.stdout.write(f"{path}: {total} record{'' if total == 1 else 's'}"
                          f"{': ' + ', '.join(done) if done else ', nothing to import'}"
                          f"{' (dry run: rolled back, nothing written)' if dry_run else ''}")
        for action in ACTIONS:
            if actions[action]:
                reasons = ", ".join(f"{reason} {count}" for reason, count in summary.reasons(action).items())
                self.stdout.write(f"  {action}: {reasons}")
        for line, why in sorted(report.refused)[:REFUSED_SHOWN]:  # a batch's write refusals came after its checks
            self.stdout.write(f"  line {line}: {why}")
        if len(report.refused) > REFUSED_SHOWN:
            self.stdout.write(f"  … and {len(report.refused) - REFUSED_SHOWN} more")
        superseded, written = actions["superseded"], summary.written
        if written and superseded > SUPERSEDE_WARNING_SHARE * written:
            self._supersede_warning(report, superseded, written, dry_run=dry_run)

    def _supersede_warning(self, report: ImportReport, superseded: int, written: int, *, dry_run: bool) -> None:
        shown = len(report.retirements)
        self.stdout.write(self.style.WARNING(
            f"Warning: {superseded} of {written} records written ({superseded / written:.0%}) retired a memory "
            f"(superseded), more than a tenth{f'; the first {shown}' if shown < superseded else ''}:"))
        for retired in report.retirements:
            if retired.written_by is None:
                who = retired.memory_id
            else:  # a memory of this import: a dry run's is gone with its transaction
                who = f"line {retired.written_by}'s memory" + ("" if dry_run else f" {retired.memory_id}")
            cosine = "-" if retired.similarity is None else f"{retired.similarity:.3f}"
            self.stdout.write(f"  line {retired.line} retired {who} "
                              f"\"{textwrap.shorten(retired.text, 60, placeholder='…')}\" "
                              f"({retired.reason}, cosine {cosine})")
        for advice in textwrap.wrap(SUPERSEDE_ADVICE, 100, break_on_hyphens=False):
            self.stdout.write(f"  {advice}")
