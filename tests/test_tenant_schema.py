"""Every table of tenant rows carries ``project_id`` (the distribution column of docs/scaling.md,
*A distributed PostgreSQL (Citus)*), and every table without it is named there with why: read
from the live schema, so a new model cannot slip past. The column is filled from the parent when
a writer leaves it empty."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.db import connection

from memory_engine.models import Memory, MemoryRule
from memory_engine.services.memories import memory_write
from tests.factories import AgentFactory, MemoryStoreFactory

pytestmark = pytest.mark.django_db
SCALING = Path(__file__).resolve().parents[1] / "docs" / "scaling.md"


def documented_exceptions() -> set[str]:
    section = SCALING.read_text().split("**Tables without `project_id`**", 1)[1].split("\n\n", 2)[1]
    return set(re.findall(r"^\| `(memory_engine_\w+)` \|", section, re.MULTILINE))


def engine_tables() -> dict[str, str | None]:
    """Each memory_engine table of the live schema -> whether its project_id is NOT NULL ("NO") or
    absent (None)."""
    with connection.cursor() as cursor:
        cursor.execute("""
            SELECT t.table_name, c.is_nullable
            FROM information_schema.tables t
            LEFT JOIN information_schema.columns c
              ON c.table_schema = t.table_schema AND c.table_name = t.table_name AND c.column_name = 'project_id'
            WHERE t.table_schema = current_schema() AND t.table_type = 'BASE TABLE'
              AND t.table_name LIKE 'memory\\_engine\\_%'""")
        return dict(cursor.fetchall())


def test_every_tenant_table_carries_project_id_or_is_named_in_the_docs() -> None:
    tables = engine_tables()
    exceptions = documented_exceptions()
    assert exceptions == {"memory_engine_project", "memory_engine_staffgrants", "memory_engine_embeddingmodel",
                          "memory_engine_lexical_index_state"}
    missing = sorted(t for t, nullable in tables.items() if nullable is None and t not in exceptions)
    assert missing == [], f"tables without project_id and not in docs/scaling.md: {missing}"
    nullable = sorted(t for t, n in tables.items() if n == "YES")
    assert nullable == [], f"project_id must be required: {nullable}"
    stale = sorted(t for t in exceptions if t not in tables or tables[t] is not None)
    assert stale == [], f"docs/scaling.md names tables that carry project_id or do not exist: {stale}"


def test_a_row_written_without_its_project_gets_its_parents(project) -> None:
    store = MemoryStoreFactory(project=project)
    memory = memory_write(store=store, content="The depot opens at six.", principal="test").memory
    assert Memory.objects.filter(pk=memory.pk, project_id=project.pk).exists()
    rule = MemoryRule.objects.create(store=store, handler_type="builtin")  # an ORM writer that names no project
    assert rule.project_id == project.pk
    rule.save()  # and saves the row again: it keeps its project
    agent = AgentFactory(project=project)
    with connection.cursor() as cursor:  # raw SQL that names no project: the trigger fills it
        cursor.execute("INSERT INTO memory_engine_memoryrule_source_agents (memoryrule_id, agent_id) VALUES (%s, %s)",
                       [rule.pk, agent.pk])
        cursor.execute("SELECT project_id FROM memory_engine_memoryrule_source_agents WHERE memoryrule_id = %s",
                       [rule.pk])
        assert cursor.fetchall() == [(project.pk,)]
        cursor.execute("SELECT project_id FROM memory_engine_memoryrule WHERE id = %s", [rule.pk])
        assert cursor.fetchone()[0] == project.pk
