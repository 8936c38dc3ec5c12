"""Per-project statistics of the lexical channel (memory_engine.lexical_statistics): two tables,
the triggers that keep them, and a first count of every existing row (one pass of
``to_tsvector`` over the memory contents and chunks)."""

import django.db.models.deletion
from django.db import migrations, models


def install(apps, schema_editor):
    from memory_engine.lexical_statistics import install_lexical_statistics

    install_lexical_statistics(using=schema_editor.connection.alias)


def uninstall(apps, schema_editor):
    from memory_engine.lexical_statistics import uninstall_lexical_statistics

    uninstall_lexical_statistics(using=schema_editor.connection.alias)


class Migration(migrations.Migration):

    dependencies = [
        ('memory_engine', '0027_ingestion_rule_guard_policy'),
    ]

    operations = [
        migrations.CreateModel(
            name='LexicalStatistics',
            fields=[
                ('pk', models.CompositePrimaryKey('project', 'part', blank=True, editable=False, primary_key=True, serialize=False)),
                ('part', models.CharField(choices=[('content', 'Content'), ('chunk', 'Chunk'), ('staged', 'Staged')], max_length=8)),
                ('documents', models.BigIntegerField(default=0)),
                ('tokens', models.BigIntegerField(default=0)),
                ('project', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='memory_engine.project')),
            ],
            options={
                'verbose_name_plural': 'lexical statistics',
            },
        ),
        migrations.CreateModel(
            name='LexicalTerm',
            fields=[
                ('pk', models.CompositePrimaryKey('project', 'part', 'term', blank=True, editable=False, primary_key=True, serialize=False)),
                ('part', models.CharField(choices=[('content', 'Content'), ('chunk', 'Chunk'), ('staged', 'Staged')], max_length=8)),
                ('term', models.TextField()),
                ('documents', models.BigIntegerField(default=0)),
                ('project', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='memory_engine.project')),
            ],
        ),
        migrations.RunPython(install, uninstall),
    ]
