"""``--project`` for management commands: an unknown project is a typo unless the
operator asks for a new one with ``--create-project`` (a project is a tenant)."""

from __future__ import annotations

from argparse import ArgumentParser

from django.core.management.base import CommandError

from memory_engine.models import Project


def add_project_arguments(parser: ArgumentParser) -> None:
    """``--project NAME_OR_ID`` (required) and ``--create-project``."""
    parser.add_argument("--project", required=True, help="Project name or id.")
    parser.add_argument("--create-project", action="store_true",
                        help="Create the project (named --project) when no project has that name or id.")


def project_for_command(value: str, *, create: bool) -> tuple[Project, bool]:
    """The project with this id or name, and whether it was just created.

    Raises CommandError for an unknown project unless ``create`` is set.
    """
    found = Project.objects.filter(pk=value).first() or Project.objects.filter(name=value).first()
    if found is not None:
        return found, False
    if not create:
        raise CommandError(f"No project with the name or id {value!r}. Check the spelling, or pass "
                           "--create-project to create a new project with that name.")
    return Project.objects.create(name=value), True
