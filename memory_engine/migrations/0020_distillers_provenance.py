"""Memories carry provenance and lineage (docs/memory.md); derived memories link to the document
versions they were read out of; resident distillers, their runs and the versions they have read."""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models

import memory_engine.ids


class Migration(migrations.Migration):

    dependencies = [
        ('memory_engine', '0019_access_policy'),
    ]

    operations = [
        migrations.AddField(
            model_name='memory',
            name='lineage',
            field=models.CharField(choices=[('native', 'Native'), ('imported', 'Imported'), ('derived', 'Derived')], db_default='native', default='native', max_length=10),
        ),
        migrations.AddField(
            model_name='memory',
            name='provenance',
            field=models.CharField(choices=[('stated', 'Stated'), ('inferred', 'Inferred'), ('unknown', 'Unknown')], db_default='unknown', default='unknown', max_length=10),
        ),
        migrations.AlterField(
            model_name='memory',
            name='source_type',
            field=models.CharField(choices=[('manual', 'Manual'), ('conversation', 'Conversation'), ('declared', 'Declared'), ('document', 'Document')], default='manual', max_length=20),
        ),
        migrations.AlterField(
            model_name='memoryassertion',
            name='mechanism',
            field=models.CharField(choices=[('api', 'Api'), ('tool', 'Tool'), ('rule', 'Rule'), ('formation', 'Formation'), ('distiller', 'Distiller'), ('system', 'System')], max_length=20),
        ),
        migrations.CreateModel(
            name='Distiller',
            fields=[
                ('id', memory_engine.ids.PublicIdField(prefix='dst', serialize=False)),
                ('document_paths', models.JSONField(blank=True, default=list, help_text='Path prefixes; empty: every document.')),
                ('tags', models.JSONField(blank=True, default=dict, help_text='Only documents whose tags contain these.')),
                ('prompt', models.TextField(blank=True, default='', help_text='Empty: the built-in prompt.')),
                ('enabled', models.BooleanField(default=True)),
                ('cursor', models.CharField(blank=True, default='', max_length=100)),
                ('acting_as', models.CharField(blank=True, default='', max_length=200)),
                ('leased_until', models.DateTimeField(blank=True, null=True)),
                ('created_by', models.CharField(blank=True, default='', max_length=200)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='distillers', to='memory_engine.project')),
                ('store', models.ForeignKey(help_text='Where its claims are written.', on_delete=django.db.models.deletion.CASCADE, related_name='distillers', to='memory_engine.memorystore')),
            ],
            options={
                'ordering': ['created_at', 'id'],
            },
        ),
        migrations.CreateModel(
            name='DistillerRun',
            fields=[
                ('id', memory_engine.ids.PublicIdField(prefix='dsr', serialize=False)),
                ('started_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('counts', models.JSONField(blank=True, default=dict)),
                ('errors', models.JSONField(blank=True, default=list, help_text='[{version_id, code, message}]')),
                ('distiller', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='runs', to='memory_engine.distiller')),
                ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='memory_engine.project')),
            ],
            options={
                'ordering': ['-started_at', '-id'],
            },
        ),
        migrations.CreateModel(
            name='DistillerVersion',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('status', models.CharField(choices=[('done', 'Done'), ('failed', 'Failed')], max_length=10)),
                ('counts', models.JSONField(blank=True, default=dict)),
                ('error', models.JSONField(blank=True, null=True)),
                ('attempts', models.PositiveIntegerField(default=1)),
                ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('distiller', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='versions', to='memory_engine.distiller')),
                ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='memory_engine.project')),
                ('version', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='memory_engine.documentversion')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('distiller', 'version'), name='me_distiller_version_unique')],
            },
        ),
        migrations.CreateModel(
            name='MemoryDerivation',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('distiller', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='memory_engine.distiller')),
                ('memory', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='derivations', to='memory_engine.memory')),
                ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='memory_engine.project')),
                ('version', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='derived_memories', to='memory_engine.documentversion')),
            ],
            options={
                'indexes': [models.Index(fields=['version'], name='me_derivation_version')],
                'constraints': [models.UniqueConstraint(fields=('memory', 'version'), name='me_derivation_unique')],
            },
        ),
    ]
