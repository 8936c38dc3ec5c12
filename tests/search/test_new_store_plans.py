"""Searching a store the table statistics have not seen yet: a new store in an analyzed
installation, which the planner estimates at one row until the next ANALYZE.

The scope's stores filter one of the two tables only, and the other is read by key, so the
plan stays linear in the store's size. Filtering both the memories and their content rows by
store let the planner join the two on the store alone: every memory compared with every
content row, and with bm25 every one of them scored (a new store of 1,600 memories among
80,000: a hybrid search took 11 s)."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory_engine.selectors.search import SearchRequest, knowledge_search
from tests.factories import MemoryStoreFactory
from tests.plans import analyze_memory_tables, explain_analyze, fill, rows_removed_by_join_filters

#: ANALYZE after writing: the bm25 tables are held against VACUUM first (tests/conftest.py)
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("bm25_tables_held")]


@pytest.mark.usefixtures("lexical_backend", "hashing_embedder")
@pytest.mark.parametrize("scope", ["small", "large"])
@pytest.mark.parametrize("channels", [("vector",), ("lexical",), ("vector", "lexical")])
def test_a_new_store_is_searched_in_linear_time(project, settings, channels, scope):
    if scope == "large":  # past the exact scan: HNSW and bm25 scans of the content rows
        settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "SEARCH_EXACT_SCAN_MAX": 50}
    fill(MemoryStoreFactory(project=project), 300, "old", "Synthetic fact about gravel deliveries", vectors=False)
    analyze_memory_tables()
    fresh = MemoryStoreFactory(project=project)
    fill(fresh, 150, "new", "Quarry invoices are signed by the site manager, memo")

    with CaptureQueriesContext(connection) as ctx:
        hits = knowledge_search(SearchRequest(project=project, query="who signs the quarry invoices?",
                                              memory_store_ids=[fresh.pk], channels=channels, limit=10))
    assert len(hits.results) == 10
    assert {h.memory_store_id for h in hits.results} == {fresh.pk}
    if "lexical" in channels:  # every row matches: the lexical list alone fills the limit
        assert len([h for h in hits.results if h.ranks["lexical"] is not None]) >= 10 // len(channels)
    main = next(q["sql"] for q in reversed(ctx.captured_queries) if q["sql"].lstrip().startswith("WITH"))
    plan = explain_analyze(main)
    # One table filtered by store, the other read by key. A join on the store alone throws away
    # 150 x 149 / 2 = 11,175 rows; a linear plan at most a few per row (say, the rows of the small
    # store table, when it is scanned instead of looked up).
    assert rows_removed_by_join_filters(plan) < 1000, json.dumps(plan, indent=1)[:4000]


def test_autovacuum_analyzes_the_memory_tables_every_500_changes():
    """What keeps a larger new store's statistics current (migration 0016): PostgreSQL's default
    waits for 10 % of the table to change, the whole import of a new store in a large one."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT relname, reloptions FROM pg_class WHERE relname = ANY(%s) "
                       "AND relnamespace = current_schema()::regnamespace",
                       [["memory_engine_memory", "memory_engine_memorycontent"]])
        options = dict(cursor.fetchall())
    for table in ("memory_engine_memory", "memory_engine_memorycontent"):
        assert {"autovacuum_analyze_scale_factor=0", "autovacuum_analyze_threshold=500"} <= set(options[table])
