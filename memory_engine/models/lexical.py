"""The lexical channel's corpus statistics, per project (memory_engine.lexical_statistics).

BM25 weighs a query term by how rare it is among the rows searched and a row by its length
against the average. These two tables hold those figures for each project's rows and nothing
else, so one project's writes never move another project's scores. Triggers on the memory
content and chunk tables keep them current in the writing transaction; nothing in Python
writes them.
"""

from __future__ import annotations

from django.db import models

from .tenancy import ProjectRow


class LexicalPart(models.TextChoices):
    """The rows one set of statistics describes (one lexical index each)."""

    CONTENT = "content"  # memory content rows
    CHUNK = "chunk"  # live document chunks
    STAGED = "staged"  # chunks of staged generations (replay)


class LexicalStatistics(ProjectRow, models.Model):
    """Rows of one project and part in the lexical index, and their tokens (lengths summed)."""

    pk = models.CompositePrimaryKey("project", "part")
    project = models.ForeignKey("memory_engine.Project", on_delete=models.CASCADE, related_name="+",
                                db_index=False)
    part = models.CharField(max_length=8, choices=LexicalPart.choices)
    documents = models.BigIntegerField(default=0)
    tokens = models.BigIntegerField(default=0)

    class Meta:
        verbose_name_plural = "lexical statistics"

    def __str__(self) -> str:
        return f"{self.project_id}/{self.part}: {self.documents} rows"


class LexicalTerm(ProjectRow, models.Model):
    """How many rows of one project and part hold a term (a lexeme of the text search config)."""

    pk = models.CompositePrimaryKey("project", "part", "term")
    project = models.ForeignKey("memory_engine.Project", on_delete=models.CASCADE, related_name="+",
                                db_index=False)
    part = models.CharField(max_length=8, choices=LexicalPart.choices)
    term = models.TextField()
    documents = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.project_id}/{self.part}/{self.term}: {self.documents}"
