"""Keep embedding vectors inline in their rows (STORAGE MAIN instead of pgvector's EXTERNAL).

A 384-dimension vector is 1.5 kB; with the text and its tsvector a row passes the 2 kB
TOAST threshold, and EXTERNAL storage then moves the vector out of line, so every exact
cosine scan (search scopes up to SEARCH_EXACT_SCAN_MAX, small-store dedup) fetched each
vector from the TOAST table: ~15 us a row instead of ~1 us. MAIN lets PostgreSQL compress
or move the text and tsvector first. Only rows written afterwards change; older rows can
be rewritten with `UPDATE <table> SET embedding = embedding::text::vector` (a fresh value).
See docs/retrieval.md.
"""

from django.db import migrations

TABLES = ("memory_engine_memorycontent", "memory_engine_chunk")


class Migration(migrations.Migration):

    dependencies = [
        ("memory_engine", "0002_search_gin_indexes"),
    ]

    operations = [
        migrations.RunSQL(
            sql=[f"ALTER TABLE {table} ALTER COLUMN embedding SET STORAGE MAIN" for table in TABLES],
            reverse_sql=[f"ALTER TABLE {table} ALTER COLUMN embedding SET STORAGE EXTERNAL" for table in TABLES],
        ),
    ]
