"""New installations store their vectors in half precision (``halfvec``, DEFAULT_STORAGE).

While both vector tables are empty, the ``embedding`` columns take the configured storage
(``MEMORY_ENGINE["EMBEDDING"]["STORAGE"]``, by default ``halfvec``) with their HNSW indexes
(``halfvec_cosine_ops``) and the registry's active row. A database that already holds rows keeps
its columns: the embedding-model registry moves them without downtime when an operator asks
(docs/embeddings.md, "Moving the vectors of the same model to the other storage"). The model fields stay
``VectorField``: the engine reads and writes whichever type the columns hold.
"""

from django.db import migrations, models


def store_as_configured(apps, schema_editor):
    from memory_engine.services.embedding_models import store_new_vectors_as_configured

    store_new_vectors_as_configured(schema_editor.connection)


class Migration(migrations.Migration):

    dependencies = [
        ("memory_engine", "0017_content_store_index_is_the_unique_one"),
    ]

    # Reversing keeps the columns as they are: the earlier schema reads and writes either type.
    operations = [
        migrations.AlterField(
            model_name="embeddingmodel",
            name="storage",
            field=models.CharField(choices=[("vector", "vector"), ("halfvec", "halfvec")], default="halfvec",
                                   max_length=10),
        ),
        migrations.RunPython(store_as_configured, migrations.RunPython.noop),
    ]
