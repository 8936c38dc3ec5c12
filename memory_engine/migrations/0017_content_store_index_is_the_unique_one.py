"""Content rows are found by store through the unique (store, content_hash) index alone.

The store's foreign-key index (and its ``varchar_pattern_ops`` twin) and ``me_content_store_hash``
(a second copy of the unique index) are dropped. When the planner's statistics had not seen a store
yet (a new store in an analyzed table, estimated at one row), it looked a text up by (store, hash)
through the index on the store alone and read every content row of the store; the same lookup
through the unique index reads one (docs/write-funnel.md).
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("memory_engine", "0016_memory_tables_analyze_threshold"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="memorycontent",
            name="me_content_store_hash",
        ),
        migrations.AlterField(
            model_name="memorycontent",
            name="store",
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                    related_name="contents", to="memory_engine.memorystore"),
        ),
    ]
