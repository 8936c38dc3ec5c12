"""What memory contents and document chunks share: a text and its vector.

Their lexical indexes (a pg_textsearch ``bm25`` index on ``text``, or a tsvector GIN
fallback) are not declared here: their text search config is a setting fixed at
migration time, so memory_engine.lexical creates them (migration 0004,
``manage.py memory_engine_rebuild_lexical``).
"""

from __future__ import annotations

from django.db import models
from pgvector.django import HnswIndex, VectorField

from memory_engine.conf import embedding_dimensions


class EmbeddedText(models.Model):
    """A searchable text: a pgvector embedding (HNSW, cosine) and a lexical index on ``text``.

    The vector's dimension comes from MEMORY_ENGINE['EMBEDDING']['DIMENSIONS'];
    ``embedding_model`` names the model that made it (empty when there is none yet).
    """

    text = models.TextField()
    embedding = VectorField(dimensions=embedding_dimensions(), null=True, blank=True)
    embedding_model = models.CharField(max_length=200, blank=True, default="")
    #: What the instruction guard found in ``text`` (memory_engine.instruction_guard.Finding), stored
    #: when the text is written so that reads apply their bar without judging it again; NULL or
    #: of an older guard version until judged (a read judges it then; services.guard_sweep).
    guard = models.JSONField(null=True, blank=True, editable=False)

    class Meta:
        abstract = True


def search_indexes(prefix: str) -> list[models.Index]:
    """The HNSW (cosine) index of an EmbeddedText table, named ``me_<prefix>_…``."""
    return [
        HnswIndex(
            name=f"me_{prefix}_embedding_hnsw",
            fields=["embedding"],
            m=16,
            ef_construction=64,
            opclasses=["vector_cosine_ops"],
        ),
    ]
