"""The entity graph: who and what memories and document chunks are about (docs/entities.md).

An :class:`Entity` is a named thing of one project (a person, an organisation, a place, a
product, a date, another named thing), known by its key and its aliases. An
:class:`EntityEdge` ties an entity to a memory or a chunk that mentions it, to the memory that
states something about it (``about``, with the attribute and the value stated), or to another
entity; it is valid from ``valid_at`` until ``invalid_at`` (a superseded or forgotten memory's
edges are retired, not deleted: the entity keeps its history).

Both are tenant rows (``project_id``); neither carries grant tags of its own: a principal sees
an entity through the memories and chunks it reaches that mention it (memory_engine.policy).
"""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.utils import timezone

from memory_engine.ids import PublicIdField
from memory_engine.mentions import ENTITY_KINDS, MAX_NAME_CHARS

from .documents import Chunk
from .memories import Memory
from .tenancy import Project, ProjectRow


class EntityKind(models.TextChoices):
    """What an entity is (memory_engine.mentions.ENTITY_KINDS)."""

    PERSON = "person"
    ORGANIZATION = "organization"
    PLACE = "place"
    PRODUCT = "product"
    DATE = "date"
    OTHER = "other"


assert tuple(EntityKind.values) == ENTITY_KINDS


class Relation(models.TextChoices):
    """What an edge says. The engine writes ``mentions`` (an entity named in a memory or chunk),
    ``about`` (the memory's subject, with the attribute and value it states), ``authored_by``
    (the speaker of a ``Name: text`` memory) and ``involves`` (two entities of one statement);
    the others are for extractors and callers that know more (a model, the host)."""

    MENTIONS = "mentions"
    ABOUT = "about"
    AUTHORED_BY = "authored_by"
    INVOLVES = "involves"
    PART_OF = "part_of"
    DERIVED_FROM = "derived_from"
    SUPPORTS = "supports"
    CONTRADICTS = "contradicts"
    SUPERSEDES = "supersedes"


class Entity(ProjectRow, models.Model):
    """A named thing of one project. ``key`` (memory_engine.mentions.entity_key of its name) is
    unique in the project; ``aliases`` are the keys of its other names (merged entities' names,
    names resolved to it by similarity). ``name_vector`` is its name's embedding, for resolving
    a new name by similarity (``name_vector_model`` made it; another model's vector is ignored)."""

    id = PublicIdField(prefix="ent")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="entities")
    name = models.CharField(max_length=MAX_NAME_CHARS)
    kind = models.CharField(max_length=20, choices=EntityKind.choices)
    key = models.CharField(max_length=MAX_NAME_CHARS)
    aliases = ArrayField(models.CharField(max_length=MAX_NAME_CHARS), default=list, blank=True)
    name_vector = ArrayField(models.FloatField(), null=True, blank=True, editable=False)
    name_vector_model = models.CharField(max_length=200, blank=True, default="", editable=False)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name", "id"]
        verbose_name_plural = "entities"
        constraints = [models.UniqueConstraint(fields=["project", "key"], name="me_entity_key_unique_per_project")]
        indexes = [
            GinIndex(fields=["aliases"], name="me_entity_aliases"),
            models.Index(fields=["project", "kind", "name"], name="me_entity_kind_name"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"


class EntityEdge(ProjectRow, models.Model):
    """``entity`` -[relation]-> a memory, a chunk or another entity (``other``; with the memory
    that says so when there is one). Valid from ``valid_at`` to ``invalid_at`` (null: valid)."""

    id = PublicIdField(prefix="edg")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    entity = models.ForeignKey(Entity, on_delete=models.CASCADE, related_name="edges", db_constraint=False)
    relation = models.CharField(max_length=20, choices=Relation.choices)
    memory = models.ForeignKey(
        Memory, null=True, blank=True, on_delete=models.CASCADE, related_name="entity_edges", db_constraint=False,
    )
    chunk = models.ForeignKey(
        Chunk, null=True, blank=True, on_delete=models.CASCADE, related_name="entity_edges", db_constraint=False,
    )
    other = models.ForeignKey(
        Entity, null=True, blank=True, on_delete=models.CASCADE, related_name="edges_in", db_constraint=False,
    )
    #: ``about``: what of the entity the memory states, and the value it states
    attribute = models.CharField(max_length=200, blank=True, default="")
    value = models.CharField(max_length=500, blank=True, default="")
    #: who made it: rules, llm, about (the writer's about key), api
    extractor = models.CharField(max_length=40, blank=True, default="")
    valid_at = models.DateTimeField(default=timezone.now)
    invalid_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["valid_at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=(models.Q(memory__isnull=True) | models.Q(chunk__isnull=True))
                & (models.Q(memory__isnull=False) | models.Q(chunk__isnull=False) | models.Q(other__isnull=False)),
                name="me_edge_one_end"),
            models.UniqueConstraint(fields=["entity", "relation", "memory", "chunk", "other", "project"],
                                    nulls_distinct=False,
                                    name="me_edge_unique"),
        ]
        indexes = [
            models.Index(fields=["memory"], name="me_edge_memory", condition=models.Q(memory__isnull=False)),
            models.Index(fields=["chunk"], name="me_edge_chunk", condition=models.Q(chunk__isnull=False)),
            models.Index(fields=["other"], name="me_edge_other", condition=models.Q(other__isnull=False)),
        ]

    def __str__(self) -> str:
        end = self.memory_id or self.chunk_id or self.other_id
        return f"{self.entity_id} {self.relation} {end}"
