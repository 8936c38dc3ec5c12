"""Every table of tenant rows carries ``project_id`` (docs/scaling.md, *Citus*): added where its
parent (store, document, memory, rule, subscription) named the project, backfilled from the
parent, then required. A ``BEFORE INSERT`` trigger fills it from the parent when a writer leaves
it empty (the writers set it; the trigger keeps a raw ``INSERT`` or an older writer correct).
A rule's source agents get their own model over the same table, so their rows carry it too."""

import django.db.models.deletion
from django.db import migrations, models

import memory_engine.models.tenancy

#: table -> (its parent's column, the parent's table)
PARENTS = {
    "memory_engine_memorycontent": ("store_id", "memory_engine_memorystore"),
    "memory_engine_memory": ("store_id", "memory_engine_memorystore"),
    "memory_engine_memoryassertion": ("store_id", "memory_engine_memorystore"),
    "memory_engine_memoryrevision": ("memory_id", "memory_engine_memory"),
    "memory_engine_memoryrule": ("store_id", "memory_engine_memorystore"),
    "memory_engine_memoryrule_source_agents": ("memoryrule_id", "memory_engine_memoryrule"),
    "memory_engine_documentversion": ("document_id", "memory_engine_document"),
    "memory_engine_chunk": ("document_id", "memory_engine_document"),
    "memory_engine_webhookdelivery": ("subscription_id", "memory_engine_webhooksubscription"),
}
#: model name -> table (the models whose rows get the column)
MODELS = {
    "memorycontent": "memory_engine_memorycontent",
    "memory": "memory_engine_memory",
    "memoryassertion": "memory_engine_memoryassertion",
    "memoryrevision": "memory_engine_memoryrevision",
    "memoryrule": "memory_engine_memoryrule",
    "memoryruleagent": "memory_engine_memoryrule_source_agents",
    "documentversion": "memory_engine_documentversion",
    "chunk": "memory_engine_chunk",
    "webhookdelivery": "memory_engine_webhookdelivery",
}
# Parents first: a revision's memory, a source agent's rule are backfilled before them.
BACKFILL_ORDER = ["memory_engine_memory", "memory_engine_memoryrule", *(t for t in PARENTS if t not in (
    "memory_engine_memory", "memory_engine_memoryrule"))]


def _function(table: str) -> str:
    return f"{table}_fill_project"


def fill_sql() -> str:
    parts = []
    for table in BACKFILL_ORDER:
        column, parent = PARENTS[table]
        parts.append(f"UPDATE {table} t SET project_id = p.project_id FROM {parent} p "
                     f"WHERE t.{column} = p.id AND t.project_id IS NULL;")
        parts.append(f"""
CREATE FUNCTION {_function(table)}() RETURNS trigger AS $$
BEGIN
    SELECT p.project_id INTO NEW.project_id FROM {parent} p WHERE p.id = NEW.{column};
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER {_function(table)} BEFORE INSERT ON {table}
    FOR EACH ROW WHEN (NEW.project_id IS NULL) EXECUTE FUNCTION {_function(table)}();""")
    return "\n".join(parts)


def unfill_sql() -> str:
    return "\n".join(f"DROP TRIGGER IF EXISTS {_function(t)} ON {t}; DROP FUNCTION IF EXISTS {_function(t)}();"
                     for t in PARENTS)


def project_field(null: bool) -> memory_engine.models.tenancy.TenantProjectField:
    return memory_engine.models.tenancy.TenantProjectField(null=null, on_delete=django.db.models.deletion.DO_NOTHING,
                                                           related_name="+", to="memory_engine.project")


class Migration(migrations.Migration):

    dependencies = [
        ("memory_engine", "0020_distillers_provenance"),
    ]

    operations = [
        # The implicit many-to-many table becomes MemoryRuleAgent's, unchanged.
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.CreateModel(
                name="MemoryRuleAgent",
                fields=[
                    ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                    ("memoryrule", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE,
                                                     to="memory_engine.memoryrule")),
                    ("agent", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE,
                                                to="memory_engine.agent")),
                ],
                options={"db_table": "memory_engine_memoryrule_source_agents",
                         "unique_together": {("memoryrule", "agent")}},
            ),
            migrations.AlterField(
                model_name="memoryrule",
                name="source_agents",
                field=models.ManyToManyField(blank=True, help_text="Empty means every agent of the project.",
                                             related_name="memory_rules", through="memory_engine.MemoryRuleAgent",
                                             to="memory_engine.agent"),
            ),
        ]),
        *(migrations.AddField(model_name=name, name="project", field=project_field(null=True)) for name in MODELS),
        migrations.RunSQL(fill_sql(), unfill_sql()),
        *(migrations.AlterField(model_name=name, name="project", field=project_field(null=False)) for name in MODELS),
    ]
