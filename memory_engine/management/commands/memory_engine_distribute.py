"""manage.py memory_engine_distribute [--dry-run]

Places the engine's migrated tables on the Citus cluster whose coordinator is the default
database (docs/scaling.md, "A distributed PostgreSQL"): the API keys, the shared tables and what a
project's rows reference as reference tables, every other table of the engine distributed by
``project_id`` and co-located with the stores, and the database settings the engine needs on
every node. Run it after ``migrate``, once the workers are added; a second run does only what is
left (nothing, once done). Everything runs in one transaction: it places all or nothing.

--dry-run prints the SQL, each statement with why it is there, and changes nothing.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError, connection

from memory_engine.distribution import DistributionError, Plan, Statement, apply, plan


class Command(BaseCommand):
    help = "Distribute the engine's tables on a Citus cluster by project (reference tables first)."
    # Runs before the cluster satisfies memory_engine.E030: it is the fix.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="Print the SQL and change nothing.")

    def handle(self, *args: Any, dry_run: bool, **options: Any) -> None:
        try:
            with connection.cursor() as cursor:
                found = plan(cursor)
        except DistributionError as exc:
            raise CommandError(str(exc)) from None
        except DatabaseError as exc:
            raise CommandError(f"Could not read the schema of the default database: {exc}") from exc
        self.stdout.write(self.summary(found))
        if found.empty:
            return
        if dry_run:
            self.stdout.write("BEGIN;")
            for statement in found.statements:
                self.stdout.write(f"-- {statement.why}\n{statement.sql};")
            self.stdout.write("COMMIT;")
            for statement in found.afterwards:
                self.stdout.write(f"-- {statement.why}\n{statement.sql};")
            return
        total = len(found.statements) + len(found.afterwards)

        def progress(index: int, statement: Statement, seconds: float) -> None:
            self.stdout.write(f"[{index}/{total}] {statement.sql} ({seconds:.1f} s)")

        try:
            apply(found, progress)
        except DatabaseError as exc:
            raise CommandError(f"Nothing was changed; the cluster refused a statement: {exc}") from exc
        self.stdout.write(f"done: {len(found.reference)} reference and {len(found.distributed)} distributed tables "
                          f"placed, {len(found.settings)} database settings set in {found.database}")

    @staticmethod
    def summary(found: Plan) -> str:
        lines = [f"database {found.database}: {len(found.placed)} of the tables already placed, "
                 f"{len(found.reference)} to make reference tables, {len(found.distributed)} to distribute "
                 f"by project_id, {len(found.settings)} database settings to set"]
        if found.empty:
            lines.append("nothing to do: the engine's tables and settings are in place")
        return "\n".join(lines)
