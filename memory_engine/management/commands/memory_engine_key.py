"""manage.py memory_engine_key create|list|revoke — API keys from the command line.

`create` prints the new key alone on stdout, so scripts can capture it:
    KEY=$(python manage.py memory_engine_key create --project demo)

An unknown ``--project`` is refused (a typo would otherwise create a new tenant); add
``--create-project`` to create it.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory_engine.exceptions import ValidationFailed
from memory_engine.grants import validate_grants
from memory_engine.management.projects import add_project_arguments, project_for_command
from memory_engine.models import ApiKey
from memory_engine.services.keys import api_key_create, api_key_revoke


def grants_text(grants: list[dict[str, Any]] | None) -> str:
    """A key's grants as ``create --grant`` takes them (``PATTERN=ACTION,ACTION``, ``; `` between
    grants); a key without grants reaches its whole project."""
    if not grants:
        return "whole project"
    return "; ".join(f"{grant['pattern']}={','.join(grant['actions'])}" for grant in grants)


class Command(BaseCommand):
    help = "Create, list or revoke API keys."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="Create a key; prints the secret once.")
        add_project_arguments(create)
        create.add_argument("--name", default="", help="A label for the key.")
        create.add_argument("--read-only", action="store_true", help="The key may only read.")
        create.add_argument("--grant", action="append", default=[], metavar="PATTERN=ACTION[,ACTION]",
                            help="Restrict the key to objects whose access tags match PATTERN "
                                 "(repeatable; actions: search, add, forget, purge). None: the whole project.")
        listing = sub.add_parser("list", help="List keys (prefix, project, scope, state, grants).")
        listing.add_argument("--project", help="Only this project's keys.")
        revoke = sub.add_parser("revoke", help="Revoke a key by id or prefix.")
        revoke.add_argument("key", help="Key id (key_…) or prefix.")

    def handle(self, *args: Any, action: str, **options: Any) -> None:
        getattr(self, f"handle_{action.replace('-', '_')}")(**options)

    def handle_create(self, *, project: str, create_project: bool, name: str, read_only: bool,
                      grant: list[str], **options: Any) -> None:
        grants = []
        for text in grant:
            pattern, _, actions = text.rpartition("=")
            grants.append({"pattern": pattern, "actions": [a.strip() for a in actions.split(",") if a.strip()]})
        try:
            grants = validate_grants(grants)
        except ValidationFailed as error:
            raise CommandError(f"--grant: {error.message}") from None
        found, created = project_for_command(project, create=create_project)
        if created:
            self.stderr.write(f"Created project {found.name} ({found.pk}).")
        key, raw = api_key_create(project=found, name=name, read_only=read_only, grants=grants)
        self.stderr.write(f"Key {key.pk} ({'read-only' if read_only else 'read-write'}) for {found.name}; "
                          "the secret below is shown once:")
        self.stdout.write(raw)

    def handle_list(self, *, project: str | None = None, **options: Any) -> None:
        keys = ApiKey.objects.select_related("project").order_by("project__name", "-created_at")
        if project:
            keys = keys.filter(project__name=project) | keys.filter(project_id=project)
        self.stdout.write(f"{'id':<32} {'prefix':<10} {'project':<24} {'scope':<10} {'state':<8} grants")
        for key in keys:
            state = "revoked" if key.revoked_at else ("expired" if not key.is_active else "active")
            scope = "read-only" if key.read_only else "read-write"
            self.stdout.write(f"{key.pk:<32} {key.prefix:<10} {key.project.name[:24]:<24} {scope:<10} {state:<8} "
                              f"{grants_text(key.grants)}")

    def handle_revoke(self, *, key: str, **options: Any) -> None:
        found = ApiKey.objects.filter(pk=key).first() or ApiKey.objects.filter(prefix=key).first()
        if found is None:
            raise CommandError(f"No API key with id or prefix {key!r}.")
        api_key_revoke(key=found)
        self.stdout.write(f"Revoked {found.pk} ({found.prefix}).")
