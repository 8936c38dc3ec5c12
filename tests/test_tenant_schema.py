"""Every table of tenant rows carries ``project_id`` (the distribution column of docs/scaling.md,
*A distributed PostgreSQL (Citus)*), and every table without it is named there with why: read
from the live schema, so a new model cannot slip past. The column is filled from the parent when
a writer leaves it empty."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.db import IntegrityError, connection, transaction

from memory_engine.models import Memory, MemoryRule
from memory_engine.services.memories import memory_write
from tests.factories import AgentFactory, MemoryStoreFactory, ProjectFactory

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


#: Tenant tables whose keys need not carry project_id: the API keys are a reference table on Citus
#: (a key is looked up by its prefix before its project is known).
REFERENCE_TENANT_TABLES = {"memory_engine_apikey"}


def tenant_tables() -> set[str]:
    return {t for t, nullable in engine_tables().items() if nullable is not None} - REFERENCE_TENANT_TABLES


def keys_and_foreign_keys() -> list[tuple[str, str, str, list[str], str | None, list[str]]]:
    """(table, constraint, kind p/u/f/unique index, columns, referenced table, referenced columns) of every
    memory_engine table's primary keys, unique constraints and indexes, and foreign keys."""
    with connection.cursor() as cursor:
        cursor.execute("""
            SELECT c.conrelid::regclass::text, c.conname, c.contype::text,
                   array(SELECT attname FROM pg_attribute WHERE attrelid = c.conrelid AND attnum = ANY(c.conkey)),
                   nullif(c.confrelid, 0)::regclass::text,
                   array(SELECT attname FROM pg_attribute WHERE attrelid = c.confrelid AND attnum = ANY(c.confkey))
            FROM pg_constraint c
            WHERE c.contype IN ('p', 'u', 'f') AND c.conrelid::regclass::text LIKE 'memory\\_engine\\_%'
            UNION ALL
            SELECT i.indrelid::regclass::text, i.indexrelid::regclass::text, 'unique index',
                   array(SELECT attname FROM pg_attribute WHERE attrelid = i.indrelid AND attnum = ANY(i.indkey)),
                   NULL, '{}'
            FROM pg_index i WHERE i.indisunique AND i.indrelid::regclass::text LIKE 'memory\\_engine\\_%'
              AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)""")
        return cursor.fetchall()


def test_every_key_of_a_tenant_table_carries_project_id() -> None:
    """Citus requires the distribution column in every primary key and unique constraint of a
    distributed table (migration 0030); one PostgreSQL holds the same keys."""
    tenants = tenant_tables()
    assert len(tenants) == 34
    keys = [row for row in keys_and_foreign_keys() if row[2] != "f" and row[0] in tenants]
    assert {table for table, _name, kind, *_ in keys if kind == "p"} == tenants
    without = sorted(f"{table}: {name} {columns}" for table, name, _kind, columns, *_ in keys
                     if "project_id" not in columns)
    assert without == [], "keys of tenant tables without project_id"


def test_every_foreign_key_between_tenant_tables_is_composite() -> None:
    """``(store_id, project_id)`` references ``memorystore (id, project_id)``, and so on: 44 of them."""
    tenants = tenant_tables()
    between = [row for row in keys_and_foreign_keys() if row[2] == "f" and row[0] in tenants and row[4] in tenants]
    assert len(between) == 44
    single = sorted(f"{table}.{columns} -> {target}{target_columns}"
                    for table, _name, _kind, columns, target, target_columns in between
                    if "project_id" not in columns or "project_id" not in target_columns)
    assert single == []


def test_a_row_whose_parent_is_another_projects_is_refused(project) -> None:
    """The composite foreign keys make the database itself keep a project's rows together."""
    other = ProjectFactory()
    store = MemoryStoreFactory(project=project)
    with pytest.raises(IntegrityError, match="memory_engine_memoryrule_store_id_fk"), transaction.atomic():
        MemoryRule.objects.create(store=store, project=other, handler_type="builtin")
        connection.check_constraints()  # the keys are checked at commit (deferred): check them now
    MemoryRule.objects.create(store=store, handler_type="builtin")
    connection.check_constraints()


def test_a_row_is_still_found_by_its_id_through_the_primary_key(project) -> None:
    """The key is ``(id, project_id)``: a lookup by id alone, as Django makes, reads an index that
    starts with ``id`` (the key's, or the ``id`` pattern index Django adds to a varchar key; the
    planner takes either at the same cost)."""
    memory = memory_write(store=MemoryStoreFactory(project=project), content="The depot opens at six.",
                          principal="test").memory
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # a tiny table: ask which index serves the lookup
        cursor.execute("EXPLAIN SELECT * FROM memory_engine_memory WHERE id = %s", [memory.pk])
        plan = "\n".join(line for (line,) in cursor.fetchall())
    assert re.search(r"Index (Only )?Scan using memory_engine_memory_(pkey|id_\w+_like) ", plan), plan
    assert "Index Cond: ((id)::text = " in plan, plan


def test_every_foreign_key_between_tenant_rows_names_the_project_in_a_join_and_a_parent_read(project) -> None:
    """memory_engine.models.tenancy.join_tenant_rows_by_project: a join through a foreign key
    between two tenant tables (either direction) joins on ``project_id`` too, and ``row.parent``
    reads the parent by its id and the row's project: what a distributed PostgreSQL needs to run
    them on one node (docs/scaling.md)."""
    from django.apps import apps
    from django.db.models import ForeignKey
    from django.test.utils import CaptureQueriesContext

    from memory_engine.models import MemoryStore
    from memory_engine.models.tenancy import ProjectRow, TenantProjectField, _ReadByProject

    between = [(model, field) for model in apps.get_app_config("memory_engine").get_models()
               if issubclass(model, ProjectRow) for field in model._meta.local_fields
               if isinstance(field, ForeignKey) and not isinstance(field, TenantProjectField)
               and isinstance(field.related_model, type)
               and issubclass(field.related_model, ProjectRow)]
    assert len(between) > 40
    assert [f"{model.__name__}.{field.name}" for model, field in between
            if not isinstance(model.__dict__[field.name], _ReadByProject)] == []

    store = MemoryStoreFactory(project=project)
    written = memory_write(store=store, content="The canteen opens at eight.", principal="test").memory
    joined = "AND (\"memory_engine_memory\".\"project_id\" = (\"memory_engine_memorystore\".\"project_id\"))"
    assert joined in str(Memory.objects.select_related("store").filter(pk=written.pk).query)
    assert joined in str(MemoryStore.objects.filter(memories__kind="fact").query)
    memory = Memory.objects.get(project_id=project.pk, pk=written.pk)
    with CaptureQueriesContext(connection) as seen:
        assert memory.store == store
    assert len(seen) == 1 and '"memory_engine_memorystore"."project_id" = ' in seen[0]["sql"], seen.captured_queries
