"""Store and project lifecycle services (erasure is the one way ledger rows may go)."""

from __future__ import annotations

from django.db import connection, transaction

from memory_engine.models import MemoryStore, Project

from .documents import stored_files_delete_on_commit


def allow_ledger_erasure() -> None:
    """Lift the ledger trigger for the current transaction only (explicit erasure)."""
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL memory_engine.ledger_erasure = 'on'")


@transaction.atomic
def memory_store_delete(*, store: MemoryStore) -> None:
    """Erase a store with its memories and their ledger rows."""
    allow_ledger_erasure()
    store.delete()


@transaction.atomic
def project_delete(*, project: Project) -> None:
    """Erase a project and everything in it, keys and stored document files included."""
    allow_ledger_erasure()
    stored_files_delete_on_commit(names=list(project.documents.values_list("file", flat=True)))
    project.delete()
