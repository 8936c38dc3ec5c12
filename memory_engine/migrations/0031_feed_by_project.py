"""The change feed's triggers read only their own project's rows (issue 73).

Each feed trigger (migration 0010) looked up the row's store, memory or document by its id alone.
Every row now carries ``project_id`` (migration 0021) and every key includes it (migration 0030),
so each lookup names the project as well, and the entry is written with ``INSERT … VALUES``
after the lookups. On one PostgreSQL it reads the same rows through the same keys. On a Citus
cluster the trigger runs on the worker that holds the row, and Citus lets it reach only that
project's co-located shards there: a lookup by id alone would query every shard, and an
``INSERT … SELECT`` is planned as a distributed query, both refused inside a trigger on a shard
("cannot execute a distributed query from a query on a shard").
"""

from django.db import migrations

FEED_FUNCTIONS = """
CREATE OR REPLACE FUNCTION memory_engine_feed_assertion() RETURNS trigger AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM memory_engine_memorystore s WHERE s.project_id = NEW.project_id AND s.id = NEW.store_id)
    THEN
        INSERT INTO memory_engine_feedentry
            (txid, project_id, kind, object_id, store_id, document_id, memory_id, state, principal, created_at)
        VALUES (pg_current_xact_id()::text::bigint, NEW.project_id, 'assertion', NEW.id, NEW.store_id, NULL,
                NEW.memory_id, NEW.outcome, NEW.principal, NEW.created_at);
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE OR REPLACE FUNCTION memory_engine_feed_memory() RETURNS trigger AS $$
DECLARE
    found_memory record;
    first_principal text;
BEGIN
    -- still there and live at commit; its principal is the one of the write that created it
    SELECT m.store_id, m.created_at INTO found_memory FROM memory_engine_memory m
    WHERE m.project_id = NEW.project_id AND m.id = NEW.id AND m.invalidated_at IS NULL;
    IF NOT FOUND OR NOT EXISTS (SELECT 1 FROM memory_engine_memorystore s
                                WHERE s.project_id = NEW.project_id AND s.id = found_memory.store_id) THEN
        RETURN NULL;
    END IF;
    SELECT a.principal INTO first_principal FROM memory_engine_memoryassertion a
    WHERE a.project_id = NEW.project_id AND a.memory_id = NEW.id ORDER BY a.created_at, a.id LIMIT 1;
    INSERT INTO memory_engine_feedentry
        (txid, project_id, kind, object_id, store_id, document_id, memory_id, state, principal, created_at)
    VALUES (pg_current_xact_id()::text::bigint, NEW.project_id, 'memory', NEW.id, found_memory.store_id, NULL,
            NEW.id, 'live', COALESCE(first_principal, ''), found_memory.created_at);
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE OR REPLACE FUNCTION memory_engine_feed_document_version() RETURNS trigger AS $$
BEGIN
    IF NEW.status <> 'active' OR (TG_OP = 'UPDATE' AND OLD.status = 'active') THEN
        RETURN NULL;
    END IF;
    IF EXISTS (SELECT 1 FROM memory_engine_document d WHERE d.project_id = NEW.project_id AND d.id = NEW.document_id)
    THEN
        INSERT INTO memory_engine_feedentry
            (txid, project_id, kind, object_id, store_id, document_id, memory_id, state, principal, created_at)
        VALUES (pg_current_xact_id()::text::bigint, NEW.project_id, 'document_version', NEW.id, NULL,
                NEW.document_id, NULL, 'active', NEW.captured_by, COALESCE(NEW.activated_at, NEW.created_at));
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
"""

#: The functions as migration 0010 made them (each lookup by id alone).
FEED_FUNCTIONS_BY_ID = """
CREATE OR REPLACE FUNCTION memory_engine_feed_assertion() RETURNS trigger AS $$
BEGIN
    INSERT INTO memory_engine_feedentry
        (txid, project_id, kind, object_id, store_id, document_id, memory_id, state, principal, created_at)
    SELECT pg_current_xact_id()::text::bigint, s.project_id, 'assertion', NEW.id, NEW.store_id, NULL,
           NEW.memory_id, NEW.outcome, NEW.principal, NEW.created_at
    FROM memory_engine_memorystore s WHERE s.id = NEW.store_id;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE OR REPLACE FUNCTION memory_engine_feed_memory() RETURNS trigger AS $$
BEGIN
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

CREATE OR REPLACE FUNCTION memory_engine_feed_document_version() RETURNS trigger AS $$
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
"""


class Migration(migrations.Migration):

    dependencies = [
        ('memory_engine', '0030_tenant_keys'),
    ]

    operations = [
        migrations.RunSQL(FEED_FUNCTIONS, reverse_sql=FEED_FUNCTIONS_BY_ID),
    ]
