"""Retention: retention_class on memories and document versions, deprecated and forgotten
documents, erasure receipts, and the ledger guard that lets erasure redact text (only that)."""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models

import memory_engine.ids

# The ledger stays append-only. Under the erasure switch (SET LOCAL memory_engine.ledger_erasure
# = 'on', memory_engine.db.allow_ledger_erasure) DELETE was already allowed (store and project
# erasure); this adds the one UPDATE erasure needs: redacting a row's asserted text. The UPDATE
# passes only when every column but `content` and `details` is unchanged and those two become
# the redaction markers (memory_engine.services.retention.REDACTED_*).
LEDGER_GUARD_REDACTION = """
CREATE OR REPLACE FUNCTION memory_engine_ledger_guard() RETURNS trigger AS $$
BEGIN
    IF current_setting('memory_engine.ledger_erasure', true) = 'on' THEN
        IF TG_OP = 'DELETE' THEN
            RETURN OLD;
        END IF;
        IF TG_OP = 'UPDATE'
           AND NEW.content = '[erased]'
           AND NEW.details = '{"erased": true}'::jsonb
           AND (to_jsonb(NEW) - 'content' - 'details') = (to_jsonb(OLD) - 'content' - 'details') THEN
            RETURN NEW;
        END IF;
    END IF;
    RAISE EXCEPTION 'memory_engine_memoryassertion is append-only (% refused)', TG_OP
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$ LANGUAGE plpgsql;
"""
LEDGER_GUARD_DELETE_ONLY = """
CREATE OR REPLACE FUNCTION memory_engine_ledger_guard() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('memory_engine.ledger_erasure', true) = 'on' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'memory_engine_memoryassertion is append-only (% refused)', TG_OP
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$ LANGUAGE plpgsql;
"""


class Migration(migrations.Migration):

    dependencies = [
        ('memory_engine', '0008_transform_configs'),
    ]

    operations = [
        migrations.AddField(
            model_name='document',
            name='deprecated_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='document',
            name='forget_reason',
            field=models.CharField(blank=True, default='', max_length=500),
        ),
        migrations.AddField(
            model_name='document',
            name='forgotten_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='documentversion',
            name='retention_class',
            field=models.CharField(choices=[('durable', 'Durable'), ('ephemeral', 'Ephemeral'), ('legal_hold', 'Legal Hold')], default='durable', max_length=20),
        ),
        migrations.AddField(
            model_name='documentversion',
            name='tombstoned_at',
            field=models.DateTimeField(blank=True, help_text='Forgotten: its text, chunks and raw bytes are gone.', null=True),
        ),
        migrations.AddField(
            model_name='memory',
            name='retention_class',
            field=models.CharField(choices=[('durable', 'Durable'), ('ephemeral', 'Ephemeral'), ('legal_hold', 'Legal Hold')], default='durable', max_length=20),
        ),
        migrations.CreateModel(
            name='ErasureReceipt',
            fields=[
                ('id', memory_engine.ids.PublicIdField(prefix='erc', serialize=False)),
                ('selector_kind', models.CharField(help_text='subject_external_id, tags or both (+).', max_length=50)),
                ('selector_sha256', models.CharField(help_text="sha256 of the selector's canonical JSON.", max_length=64)),
                ('counts', models.JSONField(default=dict, help_text='Rows removed (or redacted) per table.')),
                ('ids', models.JSONField(default=dict, help_text="The removed rows' ids per table.")),
                ('sha256', models.CharField(help_text='sha256 over the removed rows (table, id, content).', max_length=64)),
                ('principal', models.CharField(max_length=200)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='erasure_receipts', to='memory_engine.project')),
            ],
            options={
                'ordering': ['-created_at', '-id'],
            },
        ),
        migrations.RunSQL(LEDGER_GUARD_REDACTION, LEDGER_GUARD_DELETE_ONLY),
    ]
