"""The dedup shortlist keeps a linear plan when the table's statistics have not seen the store
yet: a new store in an analyzed table, the planner estimating it at one row. With memories and
content rows both filtered by store, the planner joined them on the store alone and compared
every memory with every content row of the store, quadratic in its size (a store of 1,600
memories in an installation of 80,000: writes at 98 ms p50 instead of 10)."""

from __future__ import annotations

import json

import pytest

from memory_engine.services.memories import memory_write
from tests.factories import MemoryStoreFactory
from tests.plans import (
    analyze_memory_tables,
    explain_analyze,
    fill,
    rows_removed_by_filters,
    rows_removed_by_join_filters,
    scans_by_store,
    statements_with,
)

#: ANALYZE after writing: the bm25 tables are held against VACUUM first (tests/conftest.py)
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("bm25_tables_held")]


@pytest.fixture
def fresh(project):
    """A store of 200 memories that the statistics have not seen, beside an analyzed one of 3,000."""
    big = MemoryStoreFactory(project=project)
    fill(big, 3000, "big", vectors=False)
    analyze_memory_tables()
    store = MemoryStoreFactory(project=project)
    fill(store, 200, "new")
    return store


@pytest.mark.parametrize("scan", ["exact", "hnsw"])
def test_a_new_store_in_an_analyzed_table_is_read_by_key(fresh, settings, scan):
    if scan == "hnsw":  # a store past the exact scan: the shortlist filters content rows by store
        settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "DEDUP_EXACT_SCAN_MAX": 50}
    with statements_with("'near'") as captured:
        result = memory_write(store=fresh, content="Our main database is hosted in Frankfurt", principal="test")
    assert result.action == "created"
    sql, params = captured[0]
    plan = explain_analyze(sql, params)
    # One table filtered by store, the other read by key. A join on the store alone throws away
    # 200 x 199 / 2 = 19,900 rows; a linear plan at most a few per row.
    assert rows_removed_by_join_filters(plan) < 1000, json.dumps(plan, indent=1)[:4000]
    # No branch reads the store's memories one by one: the same-text match reads them by content
    # row, the shortlist by its content rows (or, past the exact scan, by key from HNSW).
    assert not scans_by_store(plan, "memory_engine_memory"), json.dumps(plan, indent=1)[:4000]
    assert len(result.potential_duplicates) <= 5


@pytest.mark.parametrize("scan", ["exact", "hnsw"])
def test_the_prepared_statement_s_generic_plan_reads_a_new_store_by_key(fresh, settings, scan):
    """The funnel's candidates statement is prepared (memory_engine.db.prepared): after five
    custom plans PostgreSQL runs one generic plan, made once with the store as a literal. It is
    as linear as the custom one."""
    from django.db import connection

    if scan == "hnsw":
        settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "DEDUP_EXACT_SCAN_MAX": 50}
    for n in range(6):
        memory_write(store=fresh, content=f"Invoice {n} is paid by the finance team in week {n + 10}", principal="t")
    with statements_with("'near'") as captured:
        memory_write(store=fresh, content="Our main database is hosted in Frankfurt", principal="test")
    sql, params = captured[0]
    assert sql.startswith("EXECUTE me_")
    plan = explain_analyze(sql, params)
    with connection.cursor() as cursor:
        cursor.execute("SELECT generic_plans FROM pg_prepared_statements WHERE name = %s",
                       [sql.split()[1].split("(")[0]])
        assert cursor.fetchone()[0] >= 2
    assert rows_removed_by_join_filters(plan) < 1000, json.dumps(plan, indent=1)[:4000]
    assert not scans_by_store(plan, "memory_engine_memory"), json.dumps(plan, indent=1)[:4000]


def test_a_text_of_a_new_store_is_looked_up_by_store_and_hash(fresh):
    """Before embedding, the funnel asks whether the store already holds the text's vector. With
    an index on the store alone beside the unique (store, hash) one, the planner took the first for
    a store it estimated at one row, and read all the store's content rows (1.8 ms per write at
    5,000)."""
    with statements_with("SELECT embedding::text, guard FROM memory_engine_memorycontent") as captured:
        memory_write(store=fresh, content="Our main database is hosted in Frankfurt", principal="test")
    [lookup] = captured
    plan = explain_analyze(*lookup)
    assert rows_removed_by_filters(plan, "memory_engine_memorycontent") == 0, json.dumps(plan, indent=1)[:3000]
