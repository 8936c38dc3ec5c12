"""Database helpers shared by the services (base layer: imports only Django)."""

from __future__ import annotations

from django.db import connection

__all__ = ["advisory_xact_lock", "allow_ledger_erasure", "lock_project_documents", "vector_literal"]


def vector_literal(vector: list[float]) -> str:
    """A vector as pgvector's text literal (``'[0.1,0.2]'``), for raw SQL parameters; seven
    significant digits, as many as a pgvector float4 keeps."""
    return "[" + ",".join(f"{x:.7g}" for x in vector) + "]"


def advisory_xact_lock(key: str) -> None:
    """Wait for the PostgreSQL advisory lock named ``key`` and hold it until the end of the
    transaction: serializes decisions (quota, path, dedup) that a row lock cannot cover
    because the row does not exist yet. Call it inside ``transaction.atomic``."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [key])


def lock_project_documents(project_id: str) -> None:
    """Serialize one project's document quota and path checks and its ingestion-rule edits
    until the end of the transaction."""
    advisory_xact_lock(f"memory_engine.documents:{project_id}")


def allow_ledger_erasure() -> None:
    """Lift the append-only triggers (the memory ledger, the documents' raw captures) for
    DELETE in the current transaction only: explicit erasure."""
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL memory_engine.ledger_erasure = 'on'")
