"""manage.py memory_engine_reingest [--document ID ...] [--path-prefix P] [--status failed]
[--project ID] [--strategy page|whole|size|recursive --chunk-size N --chunk-overlap N] [--background]

Re-ingest documents after changing chunking or fixing a converter. Runs the pipeline in this
process with a progress bar and prints a summary table; ``--background`` only queues the
work for the django-q2 workers. New chunk settings are stored on each document and used by
later re-ingests too.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory_engine.exceptions import MemoryEngineError
from memory_engine.management.progress import ProgressBar
from memory_engine.models import Document
from memory_engine.models.documents import ChunkStrategy, DocumentStatus
from memory_engine.services.documents import document_ingest_many, document_reingest

#: Documents re-ingested per shared pipeline run (its embedder calls are shared across them).
INGEST_GROUP = 64


class Command(BaseCommand):
    help = "Re-ingest documents (after changing chunk settings or fixing a converter)."

    def _ingest(self, documents: list[Document], bar: ProgressBar) -> list[tuple[str, str, str, str]]:
        if not documents:
            return []
        ingested = document_ingest_many(document_ids=[document.pk for document in documents])
        bar.advance(len(documents))
        return [self._row(after or before, background=False) for before, after in zip(documents, ingested, strict=True)]

    @staticmethod
    def _row(document: Document, *, background: bool) -> tuple[str, str, str, str]:
        error = (document.error or {}).get("code", "")
        chunks = f"{document.total_chunks}" + (
            f" ({document.unembedded_chunks} unembedded)" if document.unembedded_chunks else "")
        return (document.path, document.status, chunks if not background else "", error)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--document", action="append", dest="documents", metavar="ID",
                            help="A document id (repeatable).")
        parser.add_argument("--path-prefix", help="Only documents whose path starts with this.")
        parser.add_argument("--status", choices=DocumentStatus.values, help="Only documents in this status.")
        parser.add_argument("--project", help="Only documents of this project id.")
        parser.add_argument("--strategy", choices=ChunkStrategy.values, help="New chunk strategy.")
        parser.add_argument("--chunk-size", type=int, help="New chunk size (tokens for recursive and "
                            "page, characters for size).")
        parser.add_argument("--chunk-overlap", type=int, help="New chunk overlap (same unit as --chunk-size).")
        parser.add_argument("--background", action="store_true",
                            help="Queue the re-ingests for the workers instead of running them here.")
        parser.add_argument("--dry-run", action="store_true", help="List the documents and stop.")

    def _selected(self, options: dict[str, Any]) -> list[Document]:
        """The documents the options name (CommandError for a --document id that does not exist)."""
        documents = Document.objects.select_related("project").order_by("project__name", "path")
        if options["documents"]:
            documents = documents.filter(pk__in=options["documents"])
        if options["path_prefix"]:
            documents = documents.filter(path__startswith=options["path_prefix"])
        if options["status"]:
            documents = documents.filter(status=options["status"])
        if options["project"]:
            documents = documents.filter(project_id=options["project"])
        selected = list(documents)
        if options["documents"]:
            missing = set(options["documents"]) - {document.pk for document in selected}
            if missing:
                raise CommandError(f"No such document: {', '.join(sorted(missing))}")
        return selected

    def handle(self, *args: Any, **options: Any) -> None:
        selected = self._selected(options)
        if not selected:
            self.stdout.write("No documents match.")
            return
        if options["dry_run"]:
            for document in selected:
                self.stdout.write(f"{document.pk}  {document.project.name}  {document.path}  {document.status}")
            self.stdout.write(f"{len(selected)} document(s) would be re-ingested.")
            return

        settings = {"chunk_strategy": options["strategy"], "chunk_size": options["chunk_size"],
                    "chunk_overlap": options["chunk_overlap"]}
        background = options["background"]
        bar = ProgressBar.for_command(self, len(selected), label="re-ingest")
        rows: list[tuple[str, str, str, str]] = []
        waiting: list[Document] = []  # re-ingested, for one shared pipeline run (embedder batches across them)
        for document in selected:
            try:
                document = document_reingest(document=document, enqueue=background, **settings)
            except MemoryEngineError as exc:
                if not rows and not waiting:  # invalid settings fail every document alike: stop early
                    raise CommandError(f"{exc.code}: {exc.message}") from exc
                rows.append((document.path, "error", "", exc.code))
                bar.advance()
                continue
            if background:
                rows.append(self._row(document, background=True))
                bar.advance()
                continue
            waiting.append(document)
            if len(waiting) == INGEST_GROUP:
                rows.extend(self._ingest(waiting, bar))
                waiting = []
        rows.extend(self._ingest(waiting, bar))
        bar.close()
        self._table(rows)
        counts = Counter(status for _, status, _, _ in rows)
        summary = ", ".join(f"{count} {status}" for status, count in sorted(counts.items()))
        style = self.style.WARNING if counts.get("failed") or counts.get("error") else self.style.SUCCESS
        self.stdout.write(style(f"{len(rows)} document(s): {summary}."))

    def _table(self, rows: list[tuple[str, str, str, str]]) -> None:
        header = ("path", "status", "chunks", "error")
        widths = [max(len(header[i]), *(len(row[i]) for row in rows)) for i in range(4)]
        widths[0] = min(widths[0], 60)
        line = "  ".join(f"{{:<{width}}}" for width in widths)
        self.stdout.write(line.format(*header))
        self.stdout.write(line.format(*("-" * width for width in widths)))
        for row in rows:
            path = row[0] if len(row[0]) <= 60 else "…" + row[0][-59:]
            self.stdout.write(line.format(path, *row[1:]))
