"""manage.py memory_engine_classify_consent [--store ID ...] [--project ID]

Run the consent classifier over memories already stored (docs/memory.md, *Consent categories*):
after upgrading to a version with consent categories (every older memory starts as
``memory:context``), or after the patterns or exemplars changed. Each memory keeps its category
as the claim, so a category is only ever raised. Expiries are left as they are.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from memory_engine.services.consent import consent_reclassify


class Command(BaseCommand):
    help = "Raise the consent category of stored memories where the classifier places them higher."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--store", action="append", dest="stores", metavar="ID",
                            help="Only this memory store (repeat for more).")
        parser.add_argument("--project", metavar="ID", help="Only this project's memories.")

    def handle(self, *args: Any, **options: Any) -> None:
        counts = consent_reclassify(store_ids=options["stores"], project_id=options["project"])
        read = counts.pop("read")
        raised = ", ".join(f"{category} {count}" for category, count in sorted(counts.items())) or "none"
        self.stdout.write(f"read: {read}  raised: {raised}")
        self.stdout.write(self.style.SUCCESS("Done."))
