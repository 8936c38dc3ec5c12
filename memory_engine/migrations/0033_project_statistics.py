"""The planner learns that a store (or a document) fixes its project (issue 73).

The statements of one request filter every table they read by ``project_id`` as well as by the
store or document, so that a distributed PostgreSQL routes them to the one node holding the
project (docs/scaling.md). On their own, PostgreSQL takes two filters as independent and
multiplies their selectivities: a store that holds a tenth of a project that holds a tenth of the
table would be estimated at a hundredth of its rows, and a plan chosen on that. A functional
dependency statistic on ``(store_id, project_id)`` (``(document_id, project_id)``) tells it the
second filter adds nothing once the first holds. ``ANALYZE`` builds them now rather than at the
next autovacuum.
"""

from django.db import migrations

#: (statistics name, table, the column that fixes the project)
STATISTICS = (
    ("me_memory_store_project", "memory_engine_memory", "store_id"),
    ("me_content_store_project", "memory_engine_memorycontent", "store_id"),
    ("me_chunk_document_project", "memory_engine_chunk", "document_id"),
    ("me_version_document_project", "memory_engine_documentversion", "document_id"),
)

CREATE = "".join(f"CREATE STATISTICS IF NOT EXISTS {name} (dependencies) ON {column}, project_id FROM {table};\n"
                 for name, table, column in STATISTICS)
ANALYZE = "".join(f"ANALYZE {table};\n" for _name, table, _column in STATISTICS)
DROP = "".join(f"DROP STATISTICS IF EXISTS {name};\n" for name, _table, _column in STATISTICS)


class Migration(migrations.Migration):

    dependencies = [
        ('memory_engine', '0032_lexical_statistics_by_key'),
    ]

    operations = [
        migrations.RunSQL(CREATE + ANALYZE, DROP),
    ]
