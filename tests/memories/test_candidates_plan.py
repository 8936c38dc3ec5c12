"""The dedup shortlist of a small store (an exact scan) keeps a linear plan when the table's
statistics have not seen the store yet: a new store in an analyzed table, the planner
estimating it at one row. A join of memories and contents on the store alone then compared
every memory with every content row of the store, quadratic in its size (a store of 1,600
memories in an installation of 80,000: writes at 98 ms p50 instead of 10)."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from memory_engine.services.memory_write import memory_write
from tests.factories import MemoryStoreFactory

pytestmark = pytest.mark.django_db

DIMS = 384


def fill(store, count: int, prefix: str) -> None:
    """``count`` memories with random vectors, written in SQL (fast, no embedder)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""INSERT INTO memory_engine_memorycontent
                    (id, store_id, content_hash, text, embedding, embedding_model, created_at)
                SELECT 'mc_{prefix}' || i, %s, md5('{prefix}' || i), 'Synthetic fact ' || i,
                       (SELECT array_agg(random() - 0.5)::vector FROM generate_series(1, {DIMS}) WHERE i > 0),
                       'all-MiniLM-L6-v2', now()
                FROM generate_series(1, %s) i""",
            [store.pk, count],
        )
        cursor.execute(
            f"""INSERT INTO memory_engine_memory (id, store_id, content_id, tags, metadata, source_type,
                    created_at, kind, title, summary, confidence, evidence_count, retention_class)
                SELECT 'mem_{prefix}' || substr(id, {len(prefix) + 4}), store_id, id, '{{}}', '{{}}', 'manual',
                       now(), 'fact', '', '', 0.7, 1, 'durable'
                FROM memory_engine_memorycontent WHERE store_id = %s""",
            [store.pk],
        )


def rows_removed_by_join_filters(plan: dict) -> int:
    own = plan.get("Rows Removed by Join Filter", 0)
    return own + sum(rows_removed_by_join_filters(child) for child in plan.get("Plans", []))


def test_a_new_store_in_an_analyzed_table_is_scanned_by_content_key(project):
    big = MemoryStoreFactory(project=project)
    fill(big, 3000, "big")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memory_engine_memorycontent; ANALYZE memory_engine_memory")
    fresh = MemoryStoreFactory(project=project)
    fill(fresh, 200, "new")

    captured: list[tuple[str, dict]] = []

    def capture(execute, sql, params, many, context):
        if "'near'" in sql:
            captured.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        result = memory_write(store=fresh, content="Our main database is hosted in Frankfurt", principal="test")
    assert result.action == "created"
    sql, params = captured[0]
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
        plan = cursor.fetchone()[0]
    plan = json.loads(plan) if isinstance(plan, str) else plan
    # the content rows are read by key, one per memory: nothing is compared and thrown away
    assert rows_removed_by_join_filters(plan[0]["Plan"]) < 200, json.dumps(plan, indent=1)[:4000]
    assert len(result.potential_duplicates) <= 5
