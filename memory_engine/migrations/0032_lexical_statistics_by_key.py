"""The lexical statistics' triggers take rows away one key at a time (issue 73).

A deleted or changed row's figures were subtracted by one ``UPDATE`` joined to the rows that
went away. On a Citus cluster the trigger runs on the worker that holds the rows, and that
``UPDATE`` is planned as a distributed statement there, which fails. The function now subtracts
them with one ``UPDATE`` per project and part, then per term, each naming its row's whole key:
the same figures on one PostgreSQL, and on Citus statements on the project's own shard. Adding
(an ``INSERT … ON CONFLICT`` of the rows that arrived) is unchanged.
"""

from django.db import migrations


def replace(apps, schema_editor):
    from memory_engine.lexical_statistics import replace_apply_function

    replace_apply_function(using=schema_editor.connection.alias)


class Migration(migrations.Migration):

    dependencies = [
        ('memory_engine', '0031_feed_by_project'),
    ]

    operations = [
        migrations.RunPython(replace, migrations.RunPython.noop),
    ]
