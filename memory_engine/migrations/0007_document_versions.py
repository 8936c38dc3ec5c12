"""Document identity (source, external_ref), versions and the append-only raw capture."""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models

import memory_engine.ids
from memory_engine.ids import new_id

# Raw captures are append-only like the ledger; erasure lifts the guard for one
# transaction with the same switch (SET LOCAL memory_engine.ledger_erasure = 'on').
RAW_CAPTURE_TRIGGER = '''
CREATE FUNCTION memory_engine_raw_capture_guard() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('memory_engine.ledger_erasure', true) = 'on' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'memory_engine_rawcapture is append-only (% refused)', TG_OP
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER memory_engine_raw_capture_append_only
    BEFORE UPDATE OR DELETE ON memory_engine_rawcapture
    FOR EACH ROW EXECUTE FUNCTION memory_engine_raw_capture_guard();
'''
RAW_CAPTURE_TRIGGER_REVERSE = '''
DROP TRIGGER IF EXISTS memory_engine_raw_capture_append_only ON memory_engine_rawcapture;
DROP FUNCTION IF EXISTS memory_engine_raw_capture_guard();
'''


def version_one(apps, schema_editor):
    """Every existing document gets version 1 holding its chunks: active when it has chunks
    or is ready, failed when it failed with none, pending while its first ingestion runs."""
    Document = apps.get_model("memory_engine", "Document")
    DocumentVersion = apps.get_model("memory_engine", "DocumentVersion")
    batch = []
    documents = Document.objects.values("id", "sha256", "size_bytes", "content_type", "title", "status",
                                        "total_chunks", "ingested_at", "created_at")
    with_chunks = set(apps.get_model("memory_engine", "Chunk").objects.values_list("document_id", flat=True)
                      .distinct())
    for document in documents.iterator(chunk_size=2000):
        if document["id"] in with_chunks or document["status"] == "ready":
            state = "active"
        elif document["status"] == "failed":
            state = "failed"
        else:
            state = "pending"
        batch.append(DocumentVersion(
            id=new_id("dv"), document_id=document["id"], number=1, sha256=document["sha256"],
            size_bytes=document["size_bytes"], content_type=document["content_type"], title=document["title"],
            status=state, created_at=document["created_at"],
            activated_at=(document["ingested_at"] or document["created_at"]) if state == "active" else None,
        ))
        if len(batch) >= 2000:
            DocumentVersion.objects.bulk_create(batch)
            batch = []
    DocumentVersion.objects.bulk_create(batch)
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "UPDATE memory_engine_document d SET active_version_id = v.id FROM memory_engine_documentversion v "
            "WHERE v.document_id = d.id AND v.status = 'active'")
        cursor.execute(
            "UPDATE memory_engine_chunk c SET version_id = v.id FROM memory_engine_documentversion v "
            "WHERE v.document_id = c.document_id AND v.number = 1")


class Migration(migrations.Migration):

    dependencies = [
        ('memory_engine', '0006_memory_lifecycle'),
    ]

    operations = [
        migrations.CreateModel(
            name='RawCapture',
            fields=[
                ('id', memory_engine.ids.PublicIdField(prefix='raw', serialize=False)),
                ('payload_sha256', models.CharField(max_length=64)),
                ('content_sha256', models.CharField(max_length=64)),
                ('data', models.BinaryField()),
                ('content_type', models.CharField(max_length=200)),
                ('parameters', models.JSONField(blank=True, default=dict)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                'ordering': ['created_at'],
            },
        ),
        migrations.AddField(
            model_name='document',
            name='external_ref',
            field=models.CharField(blank=True, max_length=500, null=True),
        ),
        migrations.AddField(
            model_name='document',
            name='last_seen_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='document',
            name='source',
            field=models.CharField(default='upload', max_length=50),
        ),
        migrations.CreateModel(
            name='DocumentVersion',
            fields=[
                ('id', memory_engine.ids.PublicIdField(prefix='dv', serialize=False)),
                ('number', models.PositiveIntegerField()),
                ('sha256', models.CharField(help_text='sha256 of the captured content (file bytes or text).', max_length=64)),
                ('size_bytes', models.PositiveBigIntegerField(default=0)),
                ('content_type', models.CharField(blank=True, default='', max_length=200)),
                ('title', models.CharField(blank=True, default='', max_length=500)),
                ('status', models.CharField(choices=[('pending', 'Pending'), ('active', 'Active'), ('superseded', 'Superseded'), ('failed', 'Failed')], default='pending', max_length=20)),
                ('provenance', models.CharField(choices=[('stated', 'Stated'), ('inferred', 'Inferred'), ('unknown', 'Unknown')], default='unknown', max_length=10)),
                ('source_class', models.CharField(choices=[('native', 'Native'), ('imported', 'Imported'), ('derived', 'Derived')], default='native', max_length=10)),
                ('occurred_at', models.DateTimeField(blank=True, help_text='When the content was true at the source.', null=True)),
                ('valid_from', models.DateTimeField(blank=True, null=True)),
                ('valid_until', models.DateTimeField(blank=True, null=True)),
                ('captured_by', models.CharField(blank=True, default='', max_length=200)),
                ('captured_by_kind', models.CharField(choices=[('human', 'Human'), ('agent', 'Agent'), ('system', 'System'), ('adapter', 'Adapter')], default='system', max_length=10)),
                ('error', models.JSONField(blank=True, null=True)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('activated_at', models.DateTimeField(blank=True, null=True)),
                ('derived_from', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='derivations', to='memory_engine.documentversion')),
                ('document', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='versions', to='memory_engine.document')),
            ],
            options={
                'ordering': ['document', '-number'],
            },
        ),
        migrations.AddField(
            model_name='chunk',
            name='version',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='chunks', to='memory_engine.documentversion'),
        ),
        migrations.AddField(
            model_name='document',
            name='active_version',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='memory_engine.documentversion'),
        ),
        migrations.AddConstraint(
            model_name='document',
            constraint=models.UniqueConstraint(condition=models.Q(('external_ref__isnull', False)), fields=('project', 'source', 'external_ref'), name='me_document_external_ref_unique'),
        ),
        migrations.AddField(
            model_name='rawcapture',
            name='project',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='raw_captures', to='memory_engine.project'),
        ),
        migrations.AddField(
            model_name='documentversion',
            name='raw_capture',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='versions', to='memory_engine.rawcapture'),
        ),
        migrations.AddField(
            model_name='rawcapture',
            name='document',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='raw_captures', to='memory_engine.document'),
        ),
        migrations.AddConstraint(
            model_name='rawcapture',
            constraint=models.UniqueConstraint(fields=('document', 'payload_sha256'), name='me_raw_capture_payload_unique'),
        ),
        migrations.AddConstraint(
            model_name='documentversion',
            constraint=models.UniqueConstraint(fields=('document', 'number'), name='me_document_version_number_unique'),
        ),
        migrations.AddConstraint(
            model_name='documentversion',
            constraint=models.UniqueConstraint(condition=models.Q(('status', 'active')), fields=('document',), name='me_document_one_active_version'),
        ),
        migrations.RunSQL(RAW_CAPTURE_TRIGGER, RAW_CAPTURE_TRIGGER_REVERSE),
        migrations.RunPython(version_one, migrations.RunPython.noop),
    ]
