"""What memory contents and document chunks share: a text, its vector and its tsvector."""

from __future__ import annotations

from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from pgvector.django import HnswIndex, VectorField

from memory_engine.conf import embedding_dimensions


class EmbeddedText(models.Model):
    """A searchable text: a pgvector embedding (HNSW, cosine) and a generated tsvector (GIN).

    The vector's dimension comes from MEMORY_ENGINE['EMBEDDING']['DIMENSIONS'];
    ``embedding_model`` names the model that made it (empty when there is none yet).
    """

    text = models.TextField()
    embedding = VectorField(dimensions=embedding_dimensions(), null=True, blank=True)
    embedding_model = models.CharField(max_length=200, blank=True, default="")
    search_vector = models.GeneratedField(
        expression=SearchVector("text", config="simple"),
        output_field=SearchVectorField(),
        db_persist=True,
    )

    class Meta:
        abstract = True


def search_indexes(prefix: str) -> list[models.Index]:
    """The HNSW (cosine) and GIN indexes of an EmbeddedText table, named ``me_<prefix>_…``."""
    return [
        HnswIndex(
            name=f"me_{prefix}_embedding_hnsw",
            fields=["embedding"],
            m=16,
            ef_construction=64,
            opclasses=["vector_cosine_ops"],
        ),
        GinIndex(fields=["search_vector"], name=f"me_{prefix}_search_gin"),
    ]
