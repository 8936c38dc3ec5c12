"""manage.py memory_engine_demo — a demo project, API key, superuser and sample data.

Used by `make run`. Re-running reuses what exists: the credentials are kept in a
git-ignored JSON file (default .demo-credentials.json) and printed again.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from memory_engine.files import write_atomically
from memory_engine.models import ApiKey, MemoryStore, Project
from memory_engine.models.tenancy import hash_key
from memory_engine.services.keys import api_key_create
from memory_engine.services.memories import memory_write

SAMPLE_MEMORIES = [
    ("The customer prefers email contact.", {"kind": "preference"}),
    ("The staging database runs PostgreSQL 16 on db-stage-2.", {"kind": "infrastructure"}),
    ("Invoices are sent on the first business day of each month.", {"kind": "billing"}),
    ("The support line is open 9am to 5pm CET, Monday to Friday.", {"kind": "hours"}),
    ("Refunds are processed within 5 business days.", {"kind": "policy"}),
]

SAMPLE_DOCUMENT = """# Onboarding handbook

New engineers get access to the staging cluster on their first day. Production access
needs a second approval from the on-call lead.

## Deployments

Deployments happen on Tuesdays and Thursdays after 2pm. Every deployment needs a green CI
run and a rollback plan in the change ticket.
"""


class Command(BaseCommand):
    help = "Create (or reuse) the demo project, key, superuser and sample data, and print the credentials."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--credentials-file", default=str(Path(settings.BASE_DIR) / ".demo-credentials.json"))
        parser.add_argument("--project", default="demo")
        parser.add_argument("--address", default="127.0.0.1:8000",
                            help="host:port the server listens on (printed in the admin URL)")

    def handle(self, *args: Any, credentials_file: str, project: str, address: str, **options: Any) -> None:
        path = Path(credentials_file)
        saved = self._saved_credentials(path)
        demo, _ = Project.objects.get_or_create(name=project)

        raw_key = saved.get("api_key")
        key_ok = raw_key and ApiKey.objects.filter(project=demo, hashed_key=hash_key(raw_key),
                                                   revoked_at__isnull=True).exists()
        if not key_ok:
            raw_key = api_key_create(project=demo, name="demo")[1]

        User = get_user_model()
        username = saved.get("username", "admin")
        password = saved.get("password") or secrets.token_urlsafe(12)
        user = User.objects.filter(username=username).first()
        if user is None:
            user = User.objects.create_superuser(username=username, email="", password=password)
        elif not user.check_password(password):
            user.set_password(password)
            user.save(update_fields=["password"])
        demo.members.add(user)

        store, created = MemoryStore.objects.get_or_create(
            project=demo, name="demo-facts", defaults={"description": "Sample facts written by the demo."}
        )
        if created:
            for text, tags in SAMPLE_MEMORIES:
                memory_write(store=store, content=text, tags=tags, principal="demo")
        self._sample_document(demo)

        saved = {"project_id": demo.pk, "api_key": raw_key, "username": username, "password": password,
                 "memory_store_id": store.pk}
        write_atomically(path, json.dumps(saved, indent=2), mode=0o600)
        self.stdout.write(self.style.SUCCESS("memory_engine demo is ready."))
        self.stdout.write(f"  project         {demo.name} ({demo.pk})")
        self.stdout.write(f"  API key         {raw_key}")
        self.stdout.write(f"  memory store    {store.name} ({store.pk})")
        self.stdout.write(f"  admin login     {username} / {password}   (http://{address}/admin/)")
        self.stdout.write(f"  saved in        {path}")

    def _saved_credentials(self, path: Path) -> dict[str, Any]:
        """The credentials file of an earlier run; an empty or damaged one is reported and made anew
        (the demo key and the admin password are then replaced)."""
        try:
            saved = json.loads(path.read_text())
        except FileNotFoundError:
            return {}
        except ValueError:  # not JSON, or not text
            saved = None
        if isinstance(saved, dict):
            return saved
        self.stderr.write(f"{path} is empty or damaged: new demo credentials are made and saved there.")
        return {}

    def _sample_document(self, project: Project) -> None:
        """Add a sample handbook once the documents service is installed (best-effort)."""
        try:
            from memory_engine.services.documents import document_create_text
        except ImportError:
            return
        from memory_engine.models import Document

        if not Document.objects.filter(project=project, path="/handbook/onboarding.md").exists():
            document_create_text(project=project, path="/handbook/onboarding.md", title="Onboarding handbook",
                                 content=SAMPLE_DOCUMENT, content_type="text/markdown")
