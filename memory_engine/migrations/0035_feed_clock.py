"""A project's feed positions survive a move to another server (issue 73).

A feed entry's position was its transaction's id, and a transaction id belongs to one server.
When a project's rows move (a Citus shard move, a dump restored into a new server), entries
written after the move could take positions below those already read, and a reader resuming
from its cursor would skip them. The feed triggers now take each entry's position from
``memory_engine_feed_position(project)``: the transaction id above the project's era (bits 48
and up, memory_engine.models.feed.ERA_SHIFT), and the era moves on, once, when the first entry
written after a move finds the project's clock naming another server.
"""

from importlib import import_module

import django.db.models.deletion
from django.db import migrations, models

import memory_engine.models.tenancy

BY_TRANSACTION = import_module("memory_engine.migrations.0031_feed_by_project").FEED_FUNCTIONS
TRANSACTION_ID = "pg_current_xact_id()::text::bigint"

POSITION_FUNCTION = """
CREATE OR REPLACE FUNCTION memory_engine_feed_position(project text) RETURNS bigint AS $$
DECLARE
    known text := current_setting('memory_engine.feed_' || project, true);
    here bigint;
    clock record;
    position bigint;
BEGIN
    -- one position per transaction and project: the first entry's lookup, kept for the others
    -- (a transaction-local setting, undone with a rolled-back savepoint)
    IF known IS NOT NULL AND known <> '' THEN
        RETURN known::bigint;
    END IF;
    here := (pg_control_system()).system_identifier;
    SELECT c.era, c.node INTO clock FROM memory_engine_feedclock c WHERE c.project_id = project;
    IF NOT FOUND THEN
        INSERT INTO memory_engine_feedclock (project_id, era, node) VALUES (project, 0, here)
        ON CONFLICT (project_id) DO NOTHING;
        SELECT c.era, c.node INTO clock FROM memory_engine_feedclock c WHERE c.project_id = project;
        IF NOT FOUND THEN  -- written by a transaction this snapshot does not see: the same server's
            SELECT 0 AS era, here AS node INTO clock;
        END IF;
    END IF;
    IF clock.node <> here THEN
        -- the first entry written on this server: the next era, once (a concurrent first writer
        -- waits for this row, then finds it moved on)
        UPDATE memory_engine_feedclock c SET era = c.era + 1, node = here
        WHERE c.project_id = project AND c.node <> here;
        SELECT c.era, c.node INTO clock FROM memory_engine_feedclock c WHERE c.project_id = project;
    END IF;
    position := (clock.era::bigint << 48) + pg_current_xact_id()::text::bigint;
    PERFORM set_config('memory_engine.feed_' || project, position::text, true);
    RETURN position;
END;
$$ LANGUAGE plpgsql;
"""

FEED_FUNCTIONS = POSITION_FUNCTION + BY_TRANSACTION.replace(TRANSACTION_ID, "memory_engine_feed_position(NEW.project_id)")


class Migration(migrations.Migration):

    dependencies = [
        ('memory_engine', '0034_ordering_without_joins'),
    ]

    operations = [
        migrations.CreateModel(
            name='FeedClock',
            fields=[
                ('project', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='+', serialize=False, to='memory_engine.project')),
                ('era', models.IntegerField(default=0)),
                ('node', models.BigIntegerField(help_text="The system_identifier of the server whose transaction ids the era's positions hold.")),
            ],
            bases=(memory_engine.models.tenancy.ProjectRow, models.Model),
        ),
        migrations.RunSQL(FEED_FUNCTIONS, BY_TRANSACTION + "DROP FUNCTION memory_engine_feed_position(text);"),
    ]
