"""The exact dedup shortlist of a small store (up to DEDUP_EXACT_SCAN_MAX content rows): the
store's nearest content rows first, then their live memories of the facet by key, and a scan
of all the store's memories only when those rows hold too few. Each case compares the shortlist
with every live memory of the facet ranked by distance."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from memory_engine.selectors import dedup
from tests.factories import MemoryStoreFactory
from tests.plans import explain_analyze, fill, scans_by_store, statements_with

pytestmark = pytest.mark.django_db

QUERY = "mc_sl1"  # the content row every case looks up from


def ranked(store, facet=None, limit=dedup.NEIGHBOURS) -> list[str]:
    """The ``limit`` live memories of the facet nearest QUERY's vector, by brute force (``+ 0``:
    not through the HNSW index, which earlier tests' rolled-back rows crowd)."""
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT m.id FROM memory_engine_memory m JOIN memory_engine_memorycontent c ON c.id = m.content_id
               WHERE m.store_id = %s AND m.facet IS NOT DISTINCT FROM %s AND m.invalidated_at IS NULL
               ORDER BY (c.embedding <=> (SELECT embedding FROM memory_engine_memorycontent WHERE id = %s)) + 0, m.id
               LIMIT %s""",
            [store.pk, facet, QUERY, limit],
        )
        return [row[0] for row in cursor.fetchall()]


def nearest_content(store, count: int) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT id FROM memory_engine_memorycontent WHERE store_id = %s ORDER BY
               (embedding <=> (SELECT embedding FROM memory_engine_memorycontent WHERE id = %s)) + 0 LIMIT %s""",
            [store.pk, QUERY, count],
        )
        return [row[0] for row in cursor.fetchall()]


def shortlist(store, facet=None) -> tuple[list[str], dict]:
    """nearest_live_memories' ids, and the EXPLAIN ANALYZE of its statement."""
    dedup.forget_scan_modes()
    with statements_with("'near'") as captured:
        found = dedup.nearest_live_memories(store, QUERY, facet=facet)
    assert ") + 0" in captured[0][0]  # the exact path
    return [memory_id for memory_id, _ in found], explain_analyze(*captured[0])


def test_a_store_is_shortlisted_from_its_nearest_content_rows(project):
    store = MemoryStoreFactory(project=project)
    fill(store, 400, "sl")
    ids, plan = shortlist(store)
    assert ids == ranked(store)
    # The memories are read by their content rows, not the store's all (one key read each).
    assert not scans_by_store(plan, "memory_engine_memory"), json.dumps(plan, indent=1)[:4000]


def test_a_rare_facet_falls_back_to_all_the_stores_memories(project):
    store = MemoryStoreFactory(project=project)
    fill(store, 400, "sl")
    farthest = nearest_content(store, 400)[-3:]  # three memories in the facet, far from the text
    with connection.cursor() as cursor:
        cursor.execute("UPDATE memory_engine_memory SET facet = 'garden' WHERE content_id = ANY(%s)", [farthest])
    ids, plan = shortlist(store, facet="garden")
    assert scans_by_store(plan, "memory_engine_memory")  # the scan ran
    assert sorted(ids) == sorted(f"mem_{content_id[3:]}" for content_id in farthest)
    assert ids == ranked(store, facet="garden")
    assert shortlist(store)[0] == ranked(store)  # the memories without a facet, as before


def test_retired_memories_near_the_text_do_not_hide_live_ones(project):
    store = MemoryStoreFactory(project=project)
    fill(store, 400, "sl")
    retired = nearest_content(store, 4 * dedup.NEIGHBOURS - 5)  # 35 of the 40 nearest rows retired
    with connection.cursor() as cursor:
        cursor.execute("UPDATE memory_engine_memory SET invalidated_at = now() WHERE content_id = ANY(%s)", [retired])
    ids, _ = shortlist(store)
    assert len(ids) == dedup.NEIGHBOURS
    assert ids == ranked(store)
    assert not set(ids) & {f"mem_{content_id[3:]}" for content_id in retired}


def test_a_store_smaller_than_the_shortlist_is_read_whole(project):
    store = MemoryStoreFactory(project=project)
    fill(store, 6, "sl")
    ids, plan = shortlist(store)
    assert ids == ranked(store) and len(ids) == 6
    assert not scans_by_store(plan, "memory_engine_memory")  # no scan of the store's memories on top


def test_a_content_row_shared_by_memories_of_two_facets(project):
    store = MemoryStoreFactory(project=project)
    fill(store, 100, "sl")
    with connection.cursor() as cursor:  # the nearest row also holds a memory of another facet
        cursor.execute(
            """INSERT INTO memory_engine_memory (id, store_id, content_id, tags, metadata, source_type, created_at,
                   kind, title, summary, confidence, evidence_count, retention_class, facet)
               SELECT 'mem_slg' || substr(id, 6), store_id, id, '{}', '{}', 'manual', now(), 'fact', '', '', 0.7, 1,
                   'durable', 'garden' FROM memory_engine_memorycontent WHERE id = ANY(%s)""",
            [nearest_content(store, 3)],
        )
    assert shortlist(store)[0] == ranked(store)
    assert shortlist(store, facet="garden")[0] == ranked(store, facet="garden")


def test_the_exact_shortlist_never_takes_the_hnsw_index(project):
    """HNSW could miss rows of a store crowded out by other stores' rows: however cheap the
    planner finds the index (sorting disabled here), the exact shortlist does not use it."""
    store = MemoryStoreFactory(project=project)
    fill(store, 50, "sl")
    dedup.forget_scan_modes()
    with statements_with("'near'") as captured:
        dedup.nearest_live_memories(store, QUERY, facet=None)
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute("EXPLAIN " + captured[0][0], captured[0][1])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "me_content_embedding_hnsw" not in plan, plan
