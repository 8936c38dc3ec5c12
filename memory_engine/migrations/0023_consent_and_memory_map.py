"""Consent categories and the memory map: each memory's consent category (existing ones
``memory:context``; manage.py memory_engine_classify_consent raises them), a store's expiry per
category, and the memory map's cache (one row per store, a tenant table with ``project_id``)."""

import django.db.models.deletion
from django.db import migrations, models

import memory_engine.models.tenancy

FILL_PROJECT = """
CREATE FUNCTION memory_engine_memorymap_fill_project() RETURNS trigger AS $$
BEGIN
    SELECT p.project_id INTO NEW.project_id FROM memory_engine_memorystore p WHERE p.id = NEW.store_id;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER memory_engine_memorymap_fill_project BEFORE INSERT ON memory_engine_memorymap
    FOR EACH ROW WHEN (NEW.project_id IS NULL) EXECUTE FUNCTION memory_engine_memorymap_fill_project();"""
UNFILL_PROJECT = ("DROP TRIGGER IF EXISTS memory_engine_memorymap_fill_project ON memory_engine_memorymap; "
                  "DROP FUNCTION IF EXISTS memory_engine_memorymap_fill_project();")


class Migration(migrations.Migration):

    dependencies = [
        ('memory_engine', '0022_import_mechanism'),
    ]

    operations = [
        migrations.AddField(
            model_name='memory',
            name='consent_category',
            field=models.CharField(choices=[('memory:context', 'context: the task, the work, the situation at hand'), ('memory:preferences', 'preferences: likes, dislikes, ways of working'), ('memory:history', 'history: what happened before, past events and interactions'), ('memory:location', 'location: addresses, coordinates, whereabouts'), ('memory:identity', 'identity: identity numbers, bank accounts, dates of birth'), ('memory:health', 'health: diagnoses, medications, symptoms, treatment')], db_default='memory:context', default='memory:context', max_length=32),
        ),
        migrations.AddField(
            model_name='memorystore',
            name='consent_expiry_days',
            field=models.JSONField(blank=True, default=dict, help_text='Days a memory of a consent category may live here, e.g. {"memory:health": 30}; overrides CONSENT_EXPIRY_DAYS for the store\'s tier (docs/memory.md, *Consent categories*).'),
        ),
        migrations.CreateModel(
            name='MemoryMap',
            fields=[
                ('store', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='memory_map', serialize=False, to='memory_engine.memorystore')),
                ('status', models.CharField(choices=[('pending', 'Pending'), ('ready', 'Ready'), ('failed', 'Failed')], default='pending', max_length=10)),
                ('points', models.JSONField(blank=True, default=list)),
                ('clusters', models.JSONField(blank=True, default=list)),
                ('method', models.JSONField(blank=True, default=dict)),
                ('live_memories', models.PositiveIntegerField(default=0)),
                ('requested_at', models.DateTimeField(blank=True, help_text='When a computation was last enqueued.', null=True)),
                ('computed_at', models.DateTimeField(blank=True, null=True)),
                ('error', models.TextField(blank=True, default='')),
                ('project', memory_engine.models.tenancy.TenantProjectField(on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='memory_engine.project')),
            ],
        ),
        # As for the tenant tables of migration 0021: a raw INSERT that names no project gets its store's.
        migrations.RunSQL(FILL_PROJECT, UNFILL_PROJECT),
    ]
