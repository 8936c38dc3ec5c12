"""Every tenant table's keys carry ``project_id`` (issue 73; docs/scaling.md, *A distributed PostgreSQL*).

- Primary keys ``(id)`` become ``(id, project_id)``: Django keeps addressing a row by its id, which
  stays unique (a public id or a sequence), and a lookup by id still reads the key's index.
- The unique constraints scoped by a parent that belongs to one project get ``project_id`` after
  their columns (same meaning: the parent fixes the project).
- The foreign keys between tenant tables become composite, ``(store_id, project_id)`` referencing
  ``memorystore (id, project_id)`` and so on: the database refuses a row whose parent belongs to
  another project. Django declares them ``db_constraint=False`` and this migration holds them.

On one PostgreSQL this is the same schema a Citus cluster distributes by ``project_id``
(``manage.py memory_engine_distribute``): there is no second schema.
"""

import django.db.models.deletion
from django.db import migrations, models

#: Every tenant table but the API keys (a reference table on Citus) and the lexical statistics (whose keys
#: already start with the project): its key column, which becomes the primary key with ``project_id``.
PRIMARY_KEYS = [
    ('memory_engine_agent', 'id'),
    ('memory_engine_chunk', 'id'),
    ('memory_engine_distiller', 'id'),
    ('memory_engine_distillerrun', 'id'),
    ('memory_engine_distillerversion', 'id'),
    ('memory_engine_document', 'id'),
    ('memory_engine_documentversion', 'id'),
    ('memory_engine_entity', 'id'),
    ('memory_engine_entityedge', 'id'),
    ('memory_engine_erasurereceipt', 'id'),
    ('memory_engine_evidencelink', 'id'),
    ('memory_engine_feedentry', 'seq'),
    ('memory_engine_generation', 'id'),
    ('memory_engine_ingestionrule', 'id'),
    ('memory_engine_memory', 'id'),
    ('memory_engine_memoryassertion', 'id'),
    ('memory_engine_memorycontent', 'id'),
    ('memory_engine_memoryderivation', 'id'),
    ('memory_engine_memorymap', 'store_id'),
    ('memory_engine_memoryrevision', 'id'),
    ('memory_engine_memoryrule', 'id'),
    ('memory_engine_memoryrule_source_agents', 'id'),
    ('memory_engine_memoryschema', 'id'),
    ('memory_engine_memorystore', 'id'),
    ('memory_engine_project_members', 'id'),
    ('memory_engine_rawcapture', 'id'),
    ('memory_engine_replayrun', 'id'),
    ('memory_engine_retentionchange', 'id'),
    ('memory_engine_transformconfig', 'id'),
    ('memory_engine_webhookdelivery', 'id'),
    ('memory_engine_webhooksubscription', 'id'),
]
#: Every foreign key between two tenant tables that the database holds (the ledger's own references are
#: left unchecked, as they were): (table, column, the table it references, that table's key column).
FOREIGN_KEYS = [
    ('memory_engine_agent', 'write_memory_store_id', 'memory_engine_memorystore', 'id'),
    ('memory_engine_chunk', 'document_id', 'memory_engine_document', 'id'),
    ('memory_engine_chunk', 'version_id', 'memory_engine_documentversion', 'id'),
    ('memory_engine_chunk', 'generation_id', 'memory_engine_replayrun', 'id'),
    ('memory_engine_distiller', 'store_id', 'memory_engine_memorystore', 'id'),
    ('memory_engine_distillerrun', 'distiller_id', 'memory_engine_distiller', 'id'),
    ('memory_engine_distillerversion', 'distiller_id', 'memory_engine_distiller', 'id'),
    ('memory_engine_distillerversion', 'version_id', 'memory_engine_documentversion', 'id'),
    ('memory_engine_document', 'ingestion_rule_id', 'memory_engine_ingestionrule', 'id'),
    ('memory_engine_document', 'active_version_id', 'memory_engine_documentversion', 'id'),
    ('memory_engine_documentversion', 'document_id', 'memory_engine_document', 'id'),
    ('memory_engine_documentversion', 'derived_from_id', 'memory_engine_documentversion', 'id'),
    ('memory_engine_documentversion', 'raw_capture_id', 'memory_engine_rawcapture', 'id'),
    ('memory_engine_documentversion', 'generation_id', 'memory_engine_replayrun', 'id'),
    ('memory_engine_entityedge', 'entity_id', 'memory_engine_entity', 'id'),
    ('memory_engine_entityedge', 'memory_id', 'memory_engine_memory', 'id'),
    ('memory_engine_entityedge', 'chunk_id', 'memory_engine_chunk', 'id'),
    ('memory_engine_entityedge', 'other_id', 'memory_engine_entity', 'id'),
    ('memory_engine_evidencelink', 'source_memory_id', 'memory_engine_memory', 'id'),
    ('memory_engine_evidencelink', 'source_version_id', 'memory_engine_documentversion', 'id'),
    ('memory_engine_evidencelink', 'target_memory_id', 'memory_engine_memory', 'id'),
    ('memory_engine_evidencelink', 'target_version_id', 'memory_engine_documentversion', 'id'),
    ('memory_engine_generation', 'agent_id', 'memory_engine_agent', 'id'),
    ('memory_engine_generation', 'initiator_id', 'memory_engine_generation', 'id'),
    ('memory_engine_generation', 'started_by_rule_id', 'memory_engine_memoryrule', 'id'),
    ('memory_engine_memory', 'store_id', 'memory_engine_memorystore', 'id'),
    ('memory_engine_memory', 'content_id', 'memory_engine_memorycontent', 'id'),
    ('memory_engine_memory', 'agent_id', 'memory_engine_agent', 'id'),
    ('memory_engine_memory', 'superseded_by_id', 'memory_engine_memory', 'id'),
    ('memory_engine_memoryassertion', 'store_id', 'memory_engine_memorystore', 'id'),
    ('memory_engine_memorycontent', 'store_id', 'memory_engine_memorystore', 'id'),
    ('memory_engine_memoryderivation', 'memory_id', 'memory_engine_memory', 'id'),
    ('memory_engine_memoryderivation', 'version_id', 'memory_engine_documentversion', 'id'),
    ('memory_engine_memoryderivation', 'distiller_id', 'memory_engine_distiller', 'id'),
    ('memory_engine_memorymap', 'store_id', 'memory_engine_memorystore', 'id'),
    ('memory_engine_memoryrevision', 'memory_id', 'memory_engine_memory', 'id'),
    ('memory_engine_memoryrevision', 'content_id', 'memory_engine_memorycontent', 'id'),
    ('memory_engine_memoryrule', 'store_id', 'memory_engine_memorystore', 'id'),
    ('memory_engine_memoryrule_source_agents', 'memoryrule_id', 'memory_engine_memoryrule', 'id'),
    ('memory_engine_memoryrule_source_agents', 'agent_id', 'memory_engine_agent', 'id'),
    ('memory_engine_memorystore', 'agent_id', 'memory_engine_agent', 'id'),
    ('memory_engine_rawcapture', 'document_id', 'memory_engine_document', 'id'),
    ('memory_engine_replayrun', 'config_id', 'memory_engine_transformconfig', 'id'),
    ('memory_engine_webhookdelivery', 'subscription_id', 'memory_engine_webhooksubscription', 'id'),
]


def _primary_keys(columns: str) -> list[str]:
    return [f"ALTER TABLE {table} DROP CONSTRAINT {table}_pkey, "
            f"ADD CONSTRAINT {table}_pkey PRIMARY KEY ({columns.format(key=key)})" for table, key in PRIMARY_KEYS]


COMPOSITE_KEYS = (
    *_primary_keys("{key}, project_id"),
    *(f"ALTER TABLE {table} ADD CONSTRAINT {table}_{column}_fk FOREIGN KEY ({column}, project_id) "
      f"REFERENCES {target} ({key}, project_id) DEFERRABLE INITIALLY DEFERRED"
      for table, column, target, key in FOREIGN_KEYS),
)
SINGLE_KEYS = (
    *(f"ALTER TABLE {table} DROP CONSTRAINT {table}_{column}_fk" for table, column, _target, _key in FOREIGN_KEYS),
    *_primary_keys("{key}"),
)


class Migration(migrations.Migration):

    dependencies = [
        ('memory_engine', '0029_conversation_turns_index'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='chunk',
            name='me_chunk_index_unique',
        ),
        migrations.RemoveConstraint(
            model_name='distillerversion',
            name='me_distiller_version_unique',
        ),
        migrations.RemoveConstraint(
            model_name='documentversion',
            name='me_document_version_number_unique',
        ),
        migrations.RemoveConstraint(
            model_name='documentversion',
            name='me_document_one_active_version',
        ),
        migrations.RemoveConstraint(
            model_name='entityedge',
            name='me_edge_unique',
        ),
        migrations.RemoveConstraint(
            model_name='evidencelink',
            name='me_link_unique',
        ),
        migrations.RemoveConstraint(
            model_name='memorycontent',
            name='me_content_unique_per_store',
        ),
        migrations.RemoveConstraint(
            model_name='memoryderivation',
            name='me_derivation_unique',
        ),
        migrations.RemoveConstraint(
            model_name='memorystore',
            name='me_store_one_per_agent',
        ),
        migrations.RemoveConstraint(
            model_name='rawcapture',
            name='me_raw_capture_payload_unique',
        ),
        migrations.AlterUniqueTogether(
            name='memoryruleagent',
            unique_together=set(),
        ),
        migrations.AlterField(
            model_name='agent',
            name='write_memory_store',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='writing_agents', to='memory_engine.memorystore'),
        ),
        migrations.AlterField(
            model_name='chunk',
            name='document',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='chunks', to='memory_engine.document'),
        ),
        migrations.AlterField(
            model_name='chunk',
            name='generation',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='chunks', to='memory_engine.replayrun'),
        ),
        migrations.AlterField(
            model_name='chunk',
            name='version',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='chunks', to='memory_engine.documentversion'),
        ),
        migrations.AlterField(
            model_name='distiller',
            name='store',
            field=models.ForeignKey(db_constraint=False, help_text='Where its claims are written.', on_delete=django.db.models.deletion.CASCADE, related_name='distillers', to='memory_engine.memorystore'),
        ),
        migrations.AlterField(
            model_name='distillerrun',
            name='distiller',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='runs', to='memory_engine.distiller'),
        ),
        migrations.AlterField(
            model_name='distillerversion',
            name='distiller',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='versions', to='memory_engine.distiller'),
        ),
        migrations.AlterField(
            model_name='distillerversion',
            name='version',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='memory_engine.documentversion'),
        ),
        migrations.AlterField(
            model_name='document',
            name='active_version',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='memory_engine.documentversion'),
        ),
        migrations.AlterField(
            model_name='document',
            name='ingestion_rule',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='documents', to='memory_engine.ingestionrule'),
        ),
        migrations.AlterField(
            model_name='documentversion',
            name='derived_from',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='derivations', to='memory_engine.documentversion'),
        ),
        migrations.AlterField(
            model_name='documentversion',
            name='document',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='versions', to='memory_engine.document'),
        ),
        migrations.AlterField(
            model_name='documentversion',
            name='generation',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='versions', to='memory_engine.replayrun'),
        ),
        migrations.AlterField(
            model_name='documentversion',
            name='raw_capture',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='versions', to='memory_engine.rawcapture'),
        ),
        migrations.AlterField(
            model_name='entityedge',
            name='chunk',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='entity_edges', to='memory_engine.chunk'),
        ),
        migrations.AlterField(
            model_name='entityedge',
            name='entity',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='edges', to='memory_engine.entity'),
        ),
        migrations.AlterField(
            model_name='entityedge',
            name='memory',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='entity_edges', to='memory_engine.memory'),
        ),
        migrations.AlterField(
            model_name='entityedge',
            name='other',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='edges_in', to='memory_engine.entity'),
        ),
        migrations.AlterField(
            model_name='evidencelink',
            name='source_memory',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='links_out', to='memory_engine.memory'),
        ),
        migrations.AlterField(
            model_name='evidencelink',
            name='source_version',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='links_out', to='memory_engine.documentversion'),
        ),
        migrations.AlterField(
            model_name='evidencelink',
            name='target_memory',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='links_in', to='memory_engine.memory'),
        ),
        migrations.AlterField(
            model_name='evidencelink',
            name='target_version',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='links_in', to='memory_engine.documentversion'),
        ),
        migrations.AlterField(
            model_name='generation',
            name='agent',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='generations', to='memory_engine.agent'),
        ),
        migrations.AlterField(
            model_name='generation',
            name='initiator',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='initiated', to='memory_engine.generation'),
        ),
        migrations.AlterField(
            model_name='generation',
            name='started_by_rule',
            field=models.ForeignKey(blank=True, db_constraint=False, help_text='Set when a rule handler made this generation; such generations fire no rules.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='handler_generations', to='memory_engine.memoryrule'),
        ),
        migrations.AlterField(
            model_name='memory',
            name='agent',
            field=models.ForeignKey(blank=True, db_constraint=False, help_text='The agent that wrote it or for which it was written (user_for_agent recall).', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='memories', to='memory_engine.agent'),
        ),
        migrations.AlterField(
            model_name='memory',
            name='content',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.RESTRICT, related_name='memories', to='memory_engine.memorycontent'),
        ),
        migrations.AlterField(
            model_name='memory',
            name='store',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='memories', to='memory_engine.memorystore'),
        ),
        migrations.AlterField(
            model_name='memory',
            name='superseded_by',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='supersedes', to='memory_engine.memory'),
        ),
        migrations.AlterField(
            model_name='memoryassertion',
            name='store',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='assertions', to='memory_engine.memorystore'),
        ),
        migrations.AlterField(
            model_name='memorycontent',
            name='store',
            field=models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='contents', to='memory_engine.memorystore'),
        ),
        migrations.AlterField(
            model_name='memoryderivation',
            name='distiller',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='memory_engine.distiller'),
        ),
        migrations.AlterField(
            model_name='memoryderivation',
            name='memory',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='derivations', to='memory_engine.memory'),
        ),
        migrations.AlterField(
            model_name='memoryderivation',
            name='version',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='derived_memories', to='memory_engine.documentversion'),
        ),
        migrations.AlterField(
            model_name='memorymap',
            name='store',
            field=models.OneToOneField(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='memory_map', serialize=False, to='memory_engine.memorystore'),
        ),
        migrations.AlterField(
            model_name='memoryrevision',
            name='content',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.RESTRICT, related_name='revisions', to='memory_engine.memorycontent'),
        ),
        migrations.AlterField(
            model_name='memoryrevision',
            name='memory',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='revisions', to='memory_engine.memory'),
        ),
        migrations.AlterField(
            model_name='memoryrule',
            name='store',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='rules', to='memory_engine.memorystore'),
        ),
        migrations.AlterField(
            model_name='memoryruleagent',
            name='agent',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, to='memory_engine.agent'),
        ),
        migrations.AlterField(
            model_name='memoryruleagent',
            name='memoryrule',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, to='memory_engine.memoryrule'),
        ),
        migrations.AlterField(
            model_name='memorystore',
            name='agent',
            field=models.ForeignKey(blank=True, db_constraint=False, help_text='agent tier: the agent whose own memory this is.', null=True, on_delete=django.db.models.deletion.CASCADE, related_name='own_stores', to='memory_engine.agent'),
        ),
        migrations.AlterField(
            model_name='rawcapture',
            name='document',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='raw_captures', to='memory_engine.document'),
        ),
        migrations.AlterField(
            model_name='replayrun',
            name='config',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='runs', to='memory_engine.transformconfig'),
        ),
        migrations.AlterField(
            model_name='webhookdelivery',
            name='subscription',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='deliveries', to='memory_engine.webhooksubscription'),
        ),
        migrations.AlterUniqueTogether(
            name='memoryruleagent',
            unique_together={('memoryrule', 'agent', 'project')},
        ),
        migrations.AddConstraint(
            model_name='chunk',
            constraint=models.UniqueConstraint(condition=models.Q(('generation__isnull', True)), fields=('document', 'chunk_index', 'project'), name='me_chunk_index_unique'),
        ),
        migrations.AddConstraint(
            model_name='distillerversion',
            constraint=models.UniqueConstraint(fields=('distiller', 'version', 'project'), name='me_distiller_version_unique'),
        ),
        migrations.AddConstraint(
            model_name='documentversion',
            constraint=models.UniqueConstraint(fields=('document', 'number', 'project'), name='me_document_version_number_unique'),
        ),
        migrations.AddConstraint(
            model_name='documentversion',
            constraint=models.UniqueConstraint(condition=models.Q(('status', 'active')), fields=('document', 'project'), name='me_document_one_active_version'),
        ),
        migrations.AddConstraint(
            model_name='entityedge',
            constraint=models.UniqueConstraint(fields=('entity', 'relation', 'memory', 'chunk', 'other', 'project'), name='me_edge_unique', nulls_distinct=False),
        ),
        migrations.AddConstraint(
            model_name='evidencelink',
            constraint=models.UniqueConstraint(fields=('kind', 'source_memory', 'source_version', 'target_memory', 'target_version', 'project'), name='me_link_unique', nulls_distinct=False),
        ),
        migrations.AddConstraint(
            model_name='memorycontent',
            constraint=models.UniqueConstraint(fields=('store', 'content_hash', 'project'), name='me_content_unique_per_store'),
        ),
        migrations.AddConstraint(
            model_name='memoryderivation',
            constraint=models.UniqueConstraint(fields=('memory', 'version', 'project'), name='me_derivation_unique'),
        ),
        migrations.AddConstraint(
            model_name='memorystore',
            constraint=models.UniqueConstraint(condition=models.Q(('tier', 'agent')), fields=('agent', 'project'), name='me_store_one_per_agent'),
        ),
        migrations.AddConstraint(
            model_name='rawcapture',
            constraint=models.UniqueConstraint(fields=('document', 'payload_sha256', 'project'), name='me_raw_capture_payload_unique'),
        ),
            migrations.RunSQL(COMPOSITE_KEYS, SINGLE_KEYS),
    ]
