"""Which dedup shortlist a store gets: exact up to DEDUP_EXACT_SCAN_MAX content rows, unless the
store is over EXACT_SCAN_ALWAYS rows and holds DEDUP_EXACT_SCAN_MAX_SHARE or more of the table,
where an exact scan reads most of the table and the HNSW scan is at its cheapest."""

from __future__ import annotations

import pytest
from django.db import connection

from memory_engine.services import memory_write as funnel
from tests.factories import MemoryStoreFactory
from tests.plans import analyze_memory_tables, fill, statements_with

pytestmark = pytest.mark.django_db

#: a store just over the size that is always scanned exactly
STORE_ROWS = funnel.EXACT_SCAN_ALWAYS + 100


def shortlist_is_exact(store) -> bool:
    """Whether the funnel's shortlist statement for a content row of ``store`` is the exact one."""
    funnel._scan_mode_cache.clear()
    with connection.cursor() as cursor:
        cursor.execute("SELECT id FROM memory_engine_memorycontent WHERE store_id = %s LIMIT 1", [store.pk])
        content_id = cursor.fetchone()[0]
    with statements_with("'near'") as captured:
        funnel.nearest_live_memories(store, content_id, facet=None)
    return ") + 0" in captured[0][0]


@pytest.fixture
def large_store(project):
    """A store of STORE_ROWS memories (no vectors: the choice reads only counts)."""
    store = MemoryStoreFactory(project=project)
    fill(store, STORE_ROWS, "scan", vectors=False)
    return store


def test_a_store_that_is_most_of_the_table_takes_hnsw(large_store):
    analyze_memory_tables()
    assert not shortlist_is_exact(large_store)


def test_the_same_store_beside_larger_ones_is_scanned_exactly(project, large_store, settings):
    fill(MemoryStoreFactory(project=project), 12 * STORE_ROWS, "other", vectors=False)
    analyze_memory_tables()  # the table's row estimate: the store is now under a tenth of it
    assert shortlist_is_exact(large_store)
    # over the cap, HNSW whatever the share
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "DEDUP_EXACT_SCAN_MAX": STORE_ROWS - 1}
    assert not shortlist_is_exact(large_store)
    # a larger share setting keeps a store that is most of the table on the exact scan
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "DEDUP_EXACT_SCAN_MAX": STORE_ROWS,
                              "DEDUP_EXACT_SCAN_MAX_SHARE": 1.0}
    assert shortlist_is_exact(large_store)


def test_small_stores_are_scanned_exactly_at_any_share(project):
    store = MemoryStoreFactory(project=project)
    fill(store, 300, "small", vectors=False)
    analyze_memory_tables()
    assert shortlist_is_exact(store)
