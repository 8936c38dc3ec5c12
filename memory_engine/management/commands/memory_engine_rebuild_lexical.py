"""manage.py memory_engine_rebuild_lexical [--stale] [--backend auto|bm25|tsvector]

Default: build the lexical indexes of memory contents and chunks again with the current
KNOWLEDGE_TEXT_SEARCH_CONFIG (the fix for system check memory_engine.E010), as pg_textsearch
``bm25`` indexes when the server offers the extension, else tsvector GIN indexes (the fix
for W010 once pg_textsearch is installed and preloaded). The per-project statistics the
channel scores with (memory_engine.lexical_statistics) are counted again with the same config.

--stale: only rebuild bm25 indexes that pg_textsearch < 1.3 lost at the last server
restart; the search function does the same before its first search.
"""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError, transaction

from memory_engine.lexical import BM25, TSVECTOR, build_lexical_indexes, ensure_lexical_fresh, lexical_status
from memory_engine.lexical_statistics import install_lexical_statistics


class Command(BaseCommand):
    help = "Rebuild the lexical (BM25 / tsvector) indexes with the configured text search config."
    # Must run while the system checks report a config mismatch: it is the fix.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--stale", action="store_true",
                            help="Only the bm25 indexes not rebuilt since the server started.")
        parser.add_argument("--backend", choices=["auto", BM25, TSVECTOR], default="auto")

    def handle(self, *args: Any, **options: Any) -> None:
        began = time.perf_counter()
        try:
            if options["stale"]:
                stale = lexical_status().stale
                status = ensure_lexical_fresh()
                done = f"rebuilt {', '.join(stale)}" if stale else "nothing was stale"
                self.stdout.write(f"{done}; backend {status.backend} ({status.reason})")
                return
            backend = None if options["backend"] == "auto" else options["backend"]
            with transaction.atomic():
                built = build_lexical_indexes(backend=backend)
                install_lexical_statistics()
        except (DatabaseError, ValueError) as exc:
            raise CommandError(f"Could not rebuild the lexical indexes: {exc}") from exc
        status = lexical_status()
        configs = ", ".join(sorted(set(status.index_configs.values())))
        self.stdout.write(f"built {built} indexes (text search config {configs}) in "
                          f"{time.perf_counter() - began:.1f} s; backend {status.backend} ({status.reason})")
