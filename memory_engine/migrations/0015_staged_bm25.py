"""A staged generation's chunks get a bm25 index of their own, and the live chunks' bm25 index
leaves them out (``WHERE generation_id IS NULL``): pg_textsearch keeps its statistics per index,
so a replay being staged no longer moves the BM25 scores of live search (docs/documents.md).

Only a database on the bm25 backend changes; the tsvector fallback scores each row alone.
"""

from django.db import migrations


def split(apps, schema_editor):
    from memory_engine.lexical import BM25, build_lexical_indexes

    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT substring(o FROM '^text_config=(.*)$') FROM pg_class c, unnest(c.reloptions) o "
            "WHERE c.relname = 'me_content_text_bm25' AND c.relnamespace = current_schema()::regnamespace "
            "AND o LIKE 'text_config=%%'")
        row = cursor.fetchone()
    # The memory contents' index tells the backend and its config: the chunks' may be gone (going
    # back past 0008 drops generation_id and, with it, the partial indexes on chunks).
    if row is not None:  # the bm25 backend: rebuild with the same text search config
        build_lexical_indexes(config=row[0], backend=BM25, using=schema_editor.connection.alias)


class Migration(migrations.Migration):

    dependencies = [
        ("memory_engine", "0014_evidence_links"),
    ]

    operations = [
        migrations.RunPython(split, migrations.RunPython.noop),
    ]
