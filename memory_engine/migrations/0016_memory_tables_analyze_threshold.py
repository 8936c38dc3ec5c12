"""Autovacuum analyzes the memory tables after every 500 changed rows, whatever their size.

PostgreSQL's default waits for 10 % of a table to change. In a large installation that can
outlast a new store's whole import, and until then the planner has never seen the store: it
estimates it at one row, and a search of the store that has outgrown the exact scan
(``SEARCH_EXACT_SCAN_MAX``) can be planned as a join of every memory with every content row
(docs/operations.md). An ANALYZE samples at most 30,000 rows, so it costs the same on a table of
any size; autovacuum runs it at most once per ``autovacuum_naptime`` (1 minute by default).
"""

from django.db import migrations

TABLES = ("memory_engine_memory", "memory_engine_memorycontent")
SETTINGS = "autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 500"


class Migration(migrations.Migration):

    dependencies = [
        ("memory_engine", "0015_staged_bm25"),
    ]

    operations = [
        migrations.RunSQL(
            [f"ALTER TABLE {table} SET ({SETTINGS})" for table in TABLES],
            [f"ALTER TABLE {table} RESET (autovacuum_analyze_scale_factor, autovacuum_analyze_threshold)"
             for table in TABLES],
        ),
    ]
