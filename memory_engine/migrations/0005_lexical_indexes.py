"""The lexical channel moves from a generated ``search_vector`` column (config ``simple``) to
an index on ``text`` built with KNOWLEDGE_TEXT_SEARCH_CONFIG (``english`` by default):

- a pg_textsearch ``bm25`` index when the server offers the extension (PostgreSQL 17/18
  with ``shared_preload_libraries = 'pg_textsearch'``, e.g. the embedded server);
- otherwise (a managed PostgreSQL without it) a GIN index on ``to_tsvector(config, text)``.

Either way the migration succeeds; the system checks say which backend is in use and why.
``manage.py memory_engine_rebuild_lexical`` builds them again (other config, new extension).
"""

from django.db import migrations


def build(apps, schema_editor):
    from memory_engine.lexical import build_lexical_indexes

    build_lexical_indexes(using=schema_editor.connection.alias)


def unbuild(apps, schema_editor):
    from memory_engine.lexical import drop_lexical_indexes

    drop_lexical_indexes(using=schema_editor.connection.alias)


class Migration(migrations.Migration):

    dependencies = [
        ("memory_engine", "0004_chunking_recursive"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="chunk", name="me_chunk_search_gin"),
        migrations.RemoveIndex(model_name="memorycontent", name="me_content_search_gin"),
        migrations.RemoveField(model_name="chunk", name="search_vector"),
        migrations.RemoveField(model_name="memorycontent", name="search_vector"),
        migrations.RunPython(build, unbuild),
    ]
