"""manage.py memory_engine_replay CONFIG [--since T] [--until T] [--source S] [--project ID]

Re-derive the newest raw capture of each matching document into a staged generation under a
transform config (its id, or its name, optionally ``name:version``; the newest version by
default). Live search does not see it until ``--promote`` here, the API or the admin.
``--promote RUN`` / ``--demote RUN`` switch a generation instead of replaying.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from memory_engine.exceptions import MemoryEngineError
from memory_engine.management.progress import ProgressBar
from memory_engine.models import ReplayRun, TransformConfig
from memory_engine.services.documents.replay import (
    generation_demote,
    generation_promote,
    newest_raw_captures,
    replay_execute,
    replay_start,
)


def _moment(value: str | None, option: str) -> datetime | None:
    if not value:
        return None
    moment = parse_datetime(value)
    if moment is None and (day := parse_date(value)) is not None:
        moment = datetime(day.year, day.month, day.day)
    if moment is None:
        raise CommandError(f"{option}: not a date or an ISO 8601 date-time: {value!r}")
    return moment if timezone.is_aware(moment) else timezone.make_aware(moment)


class Command(BaseCommand):
    help = "Replay raw captures into a staged generation (or promote/demote one)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("config", nargs="?", help="Transform config id, or NAME[:VERSION].")
        parser.add_argument("--since", help="Only raw captures made at or after this date/time.")
        parser.add_argument("--until", help="Only raw captures made before this date/time.")
        parser.add_argument("--source", help="Only documents of this source (upload, http, crm, ...).")
        parser.add_argument("--project", help="The project id (to pick a config by name).")
        parser.add_argument("--by", default="system:manage.py", help="Recorded as who started or switched it.")
        parser.add_argument("--promote", metavar="RUN", help="Promote this completed generation and stop.")
        parser.add_argument("--demote", metavar="RUN", help="Demote this promoted generation and stop.")

    def handle(self, *args: Any, **options: Any) -> None:
        for flag, switch in (("promote", generation_promote), ("demote", generation_demote)):
            if options[flag]:
                run = ReplayRun.objects.filter(pk=options[flag]).first()
                if run is None:
                    raise CommandError(f"No such generation: {options[flag]}")
                try:
                    run = switch(run=run, by=options["by"])
                except MemoryEngineError as exc:
                    raise CommandError(f"{exc.code}: {exc.message}") from exc
                self.stdout.write(self.style.SUCCESS(f"{run.pk} {run.status}."))
                return
        if not options["config"]:
            raise CommandError("Name a transform config (or use --promote / --demote).")
        config = self._config(options["config"], options["project"])
        run = replay_start(config=config, since=_moment(options["since"], "--since"),
                           until=_moment(options["until"], "--until"), source=options["source"] or "",
                           started_by=options["by"])
        bar = ProgressBar.for_command(self, len(newest_raw_captures(run)), label="replay")
        run = replay_execute(run=run, on_progress=lambda done, total: bar.advance())
        bar.close()
        summary = (f"{run.pk} {run.status}: {run.documents_done}/{run.documents_total} document(s), "
                   f"{run.chunks_total} chunk(s) staged under {config}.")
        if run.status == ReplayRun.Status.FAILED:
            error = run.error or {}
            raise CommandError(f"{summary} {error.get('code')}: {error.get('message')}")
        self.stdout.write(self.style.SUCCESS(summary))
        self.stdout.write(f"Search it with generation={run.pk}; make it live with --promote {run.pk}.")

    def _config(self, value: str, project: str | None) -> TransformConfig:
        configs = TransformConfig.objects.all()
        if project:
            configs = configs.filter(project_id=project)
        found = configs.filter(pk=value).first()
        if found is None:
            name, _, version = value.partition(":")
            named = configs.filter(name=name)
            if version:
                named = named.filter(version=int(version)) if version.isdigit() else named.none()
            if named.values("project_id").distinct().count() > 1:
                raise CommandError(f"Config {name!r} exists in several projects: pass --project.")
            found = named.order_by("-version").first()
        if found is None:
            raise CommandError(f"No such transform config: {value}")
        return found
