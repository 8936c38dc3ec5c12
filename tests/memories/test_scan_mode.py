"""Which dedup shortlist a store gets: the exact scan up to exact_scan_limit content rows, which
is DEDUP_EXACT_SCAN_MAX in a table of 100,000 rows and scales with the square root of the
table's rows (never below 2,000); HNSW above."""

from __future__ import annotations

import pytest
from django.db import connection

from memory_engine.selectors import dedup
from tests.factories import MemoryStoreFactory
from tests.plans import analyze_memory_tables, fill, statements_with

#: ANALYZE after writing: the bm25 tables are held against VACUUM first (tests/conftest.py)
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("bm25_tables_held")]

#: a store just over the size that is always scanned exactly
STORE_ROWS = dedup.EXACT_SCAN_ALWAYS + 100


def shortlist_is_exact(store) -> bool:
    """Whether the funnel's shortlist statement for a content row of ``store`` is the exact one."""
    dedup.forget_scan_modes()
    with connection.cursor() as cursor:
        cursor.execute("SELECT id FROM memory_engine_memorycontent WHERE store_id = %s LIMIT 1", [store.pk])
        content_id = cursor.fetchone()[0]
    with statements_with("'near'") as captured:
        dedup.nearest_live_memories(store, content_id, facet=None)
    return ") + 0" in captured[0][0]


@pytest.fixture
def large_store(project):
    """A store of STORE_ROWS memories (no vectors: the choice reads only counts)."""
    store = MemoryStoreFactory(project=project)
    fill(store, STORE_ROWS, "scan", vectors=False)
    return store


@pytest.mark.parametrize(("table_rows", "limit"), [
    (100_000, 6000),   # the setting, at the reference size
    (400_000, 12000),  # four times the rows: twice the limit
    (1_000_000, 18974),
    (10_000, 2000),    # never below EXACT_SCAN_ALWAYS
    (0, 6000),         # unknown (never analyzed): the setting
    (-1, 6000),
])
def test_the_limit_scales_with_the_square_root_of_the_table(settings, table_rows, limit):
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "DEDUP_EXACT_SCAN_MAX": 6000}
    assert dedup.exact_scan_limit(table_rows) == limit


def test_a_limit_of_zero_is_always_hnsw(settings):
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "DEDUP_EXACT_SCAN_MAX": 0}
    assert dedup.exact_scan_limit(1_000_000) == 0


def test_a_store_that_is_most_of_the_table_takes_hnsw(large_store):
    analyze_memory_tables()
    assert not shortlist_is_exact(large_store)


def test_the_same_store_in_a_larger_table_is_scanned_exactly(project, large_store, settings):
    fill(MemoryStoreFactory(project=project), 12 * STORE_ROWS, "other", vectors=False)
    analyze_memory_tables()  # the table's row estimate, ~27,000 rows: a limit of ~3,100 at 6,000
    assert shortlist_is_exact(large_store)
    # a lower setting puts the same store over the limit
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "DEDUP_EXACT_SCAN_MAX": 3000}
    assert not shortlist_is_exact(large_store)


def test_small_stores_are_scanned_exactly_in_any_table(project):
    store = MemoryStoreFactory(project=project)
    fill(store, 300, "small", vectors=False)
    analyze_memory_tables()
    assert shortlist_is_exact(store)
