"""The change feed (docs/feed.md): memory_engine_feedentry and the triggers that fill it.

Every entry is written by a trigger in the transaction that made the change, so no write path
(the write funnel, forget/restore/sweep, rules, erasure, document activation, raw SQL) can miss
one, and a rolled-back write leaves none. The triggers are DEFERRABLE INITIALLY DEFERRED: they
run at commit, in the order the rows were written, when the memory's first assertion (its
principal) exists and a row deleted later in the same transaction can be left out.

``txid`` is the writing transaction's id (``pg_current_xact_id()``, xid8, which fits a bigint).
The reader (memory_engine.selectors.feed) only returns entries whose transaction is older than
the oldest transaction still running (``pg_snapshot_xmin(pg_current_snapshot())``): all of those
have finished, so nothing can later appear before a position a reader has passed.
"""

import django.db.models.deletion
from django.db import migrations, models

FEED_TRIGGERS = """
CREATE FUNCTION memory_engine_feed_assertion() RETURNS trigger AS $$
BEGIN
    INSERT INTO memory_engine_feedentry
        (txid, project_id, kind, object_id, store_id, document_id, memory_id, state, principal, created_at)
    SELECT pg_current_xact_id()::text::bigint, s.project_id, 'assertion', NEW.id, NEW.store_id, NULL,
           NEW.memory_id, NEW.outcome, NEW.principal, NEW.created_at
    FROM memory_engine_memorystore s WHERE s.id = NEW.store_id;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE FUNCTION memory_engine_feed_memory() RETURNS trigger AS $$
BEGIN
    -- still there and live at commit; its principal is the one of the write that created it
    INSERT INTO memory_engine_feedentry
        (txid, project_id, kind, object_id, store_id, document_id, memory_id, state, principal, created_at)
    SELECT pg_current_xact_id()::text::bigint, s.project_id, 'memory', m.id, m.store_id, NULL, m.id, 'live',
           COALESCE((SELECT a.principal FROM memory_engine_memoryassertion a WHERE a.memory_id = m.id
                     ORDER BY a.created_at, a.id LIMIT 1), ''),
           m.created_at
    FROM memory_engine_memory m JOIN memory_engine_memorystore s ON s.id = m.store_id
    WHERE m.id = NEW.id AND m.invalidated_at IS NULL;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE FUNCTION memory_engine_feed_document_version() RETURNS trigger AS $$
BEGIN
    IF NEW.status <> 'active' OR (TG_OP = 'UPDATE' AND OLD.status = 'active') THEN
        RETURN NULL;
    END IF;
    INSERT INTO memory_engine_feedentry
        (txid, project_id, kind, object_id, store_id, document_id, memory_id, state, principal, created_at)
    SELECT pg_current_xact_id()::text::bigint, d.project_id, 'document_version', NEW.id, NULL, NEW.document_id,
           NULL, 'active', NEW.captured_by, COALESCE(NEW.activated_at, NEW.created_at)
    FROM memory_engine_document d WHERE d.id = NEW.document_id;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE CONSTRAINT TRIGGER memory_engine_feed_assertion AFTER INSERT ON memory_engine_memoryassertion
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION memory_engine_feed_assertion();
CREATE CONSTRAINT TRIGGER memory_engine_feed_memory AFTER INSERT ON memory_engine_memory
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION memory_engine_feed_memory();
CREATE CONSTRAINT TRIGGER memory_engine_feed_document_version
    AFTER INSERT OR UPDATE OF status ON memory_engine_documentversion
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION memory_engine_feed_document_version();
"""
FEED_TRIGGERS_DROP = """
DROP TRIGGER IF EXISTS memory_engine_feed_assertion ON memory_engine_memoryassertion;
DROP TRIGGER IF EXISTS memory_engine_feed_memory ON memory_engine_memory;
DROP TRIGGER IF EXISTS memory_engine_feed_document_version ON memory_engine_documentversion;
DROP FUNCTION IF EXISTS memory_engine_feed_assertion();
DROP FUNCTION IF EXISTS memory_engine_feed_memory();
DROP FUNCTION IF EXISTS memory_engine_feed_document_version();
"""


class Migration(migrations.Migration):

    dependencies = [
        ('memory_engine', '0009_retention'),
    ]

    operations = [
        migrations.CreateModel(
            name='FeedEntry',
            fields=[
                ('seq', models.BigAutoField(primary_key=True, serialize=False)),
                ('txid', models.BigIntegerField()),
                ('kind', models.CharField(choices=[('memory', 'Memory'), ('document_version', 'Document Version'), ('assertion', 'Assertion')], max_length=20)),
                ('object_id', models.CharField(max_length=40)),
                ('store_id', models.CharField(blank=True, max_length=40, null=True)),
                ('document_id', models.CharField(blank=True, max_length=40, null=True)),
                ('memory_id', models.CharField(blank=True, max_length=40, null=True)),
                ('state', models.CharField(max_length=20)),
                ('principal', models.CharField(blank=True, default='', max_length=200)),
                ('created_at', models.DateTimeField()),
                ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='memory_engine.project')),
            ],
            options={
                'verbose_name_plural': 'feed entries',
                'ordering': ['txid', 'seq'],
                'indexes': [models.Index(fields=['project', 'txid', 'seq'], name='me_feed_position')],
            },
        ),
        migrations.RunSQL(FEED_TRIGGERS, reverse_sql=FEED_TRIGGERS_DROP),
    ]
