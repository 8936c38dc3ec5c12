"""The lexical statistics' triggers take rows away one project at a time (issue 73).

A deleted or changed row's figures were subtracted by one ``UPDATE`` joined to a grouping of
the rows that went away. On a Citus cluster the trigger runs on the worker that holds the rows,
and that ``UPDATE`` is planned as a distributed statement there, which fails. The function now
subtracts them per project and part (one, for a write): its figures by their key, then its
terms' counts as two arrays joined to the term rows, each ``UPDATE`` naming the project, so on
Citus each is a statement on the project's own shard. On one PostgreSQL the figures are the same
and a delete costs about what it did (``bench/lexical_delete.py``). Adding (an
``INSERT … ON CONFLICT`` of the rows that arrived) is unchanged.
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
