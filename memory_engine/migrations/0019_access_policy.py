"""The one access policy (docs/security.md): rules and webhook subscriptions remember the principal
they act as; erasure receipts keep an HMAC of their selector, not a reversible sha256 (the old
values are dropped); the retention ledger records every retention-class change, legal holds
included, append-only like the memory ledger."""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models

import memory_engine.ids

# Append-only like the ledger; erasing the project lifts the guard with the same switch
# (SET LOCAL memory_engine.ledger_erasure = 'on', memory_engine.db.allow_ledger_erasure).
RETENTION_LEDGER_TRIGGER = '''
CREATE FUNCTION memory_engine_retention_change_guard() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('memory_engine.ledger_erasure', true) = 'on' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'memory_engine_retentionchange is append-only (% refused)', TG_OP
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER memory_engine_retention_change_append_only
    BEFORE UPDATE OR DELETE ON memory_engine_retentionchange
    FOR EACH ROW EXECUTE FUNCTION memory_engine_retention_change_guard();
'''
RETENTION_LEDGER_TRIGGER_REVERSE = '''
DROP TRIGGER IF EXISTS memory_engine_retention_change_append_only ON memory_engine_retentionchange;
DROP FUNCTION IF EXISTS memory_engine_retention_change_guard();
'''


class Migration(migrations.Migration):

    dependencies = [
        ('memory_engine', '0018_halfvec_storage'),
    ]

    operations = [
        migrations.RemoveField(
            model_name='erasurereceipt',
            name='selector_sha256',
        ),
        migrations.AddField(
            model_name='erasurereceipt',
            name='selector_hmac',
            field=models.CharField(blank=True, default='', help_text="HMAC-SHA256 of the selector's canonical JSON (ERASURE_RECEIPT_KEY).", max_length=64),
        ),
        migrations.AddField(
            model_name='memoryrule',
            name='acting_as',
            field=models.CharField(blank=True, default='', max_length=200),
        ),
        migrations.AddField(
            model_name='webhooksubscription',
            name='acting_as',
            field=models.CharField(blank=True, default='', editable=False, max_length=200),
        ),
        migrations.CreateModel(
            name='RetentionChange',
            fields=[
                ('id', memory_engine.ids.PublicIdField(prefix='rtc', serialize=False)),
                ('kind', models.CharField(choices=[('memory', 'Memory'), ('document_version', 'Document Version')], max_length=20)),
                ('object_id', models.CharField(help_text='The memory or document version.', max_length=40)),
                ('parent_id', models.CharField(help_text='Its memory store or document.', max_length=40)),
                ('previous_class', models.CharField(choices=[('durable', 'Durable'), ('ephemeral', 'Ephemeral'), ('legal_hold', 'Legal Hold')], max_length=20)),
                ('retention_class', models.CharField(choices=[('durable', 'Durable'), ('ephemeral', 'Ephemeral'), ('legal_hold', 'Legal Hold')], max_length=20)),
                ('principal', models.CharField(max_length=200)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='memory_engine.project')),
            ],
            options={
                'ordering': ['-created_at', '-id'],
                'permissions': [('release_legal_hold', 'Can release a legal hold')],
                'indexes': [models.Index(fields=['project', 'object_id'], name='me_retention_change_object')],
            },
        ),
        migrations.RunSQL(RETENTION_LEDGER_TRIGGER, RETENTION_LEDGER_TRIGGER_REVERSE),
    ]
