"""The entity graph's writes (docs/entities.md): read entities out of memories and document
chunks, resolve them to the project's entities, record the edges; merge entities; retire and
revive a memory's edges with the memory.

Reading is off the request path: a write queues its memories (memory_engine.queue, on commit),
an ingestion its document's new chunks, and a scheduled sweep reads whatever is left
(``entities_at`` is null: queued work lost with a worker, rows written before the graph). The
same functions run inline where a caller wants the graph at once (tests, benchmarks,
``manage.py memory_engine_entities``).

Resolution of a name within its project: its key (memory_engine.mentions.entity_key) equal to
an entity's key, else one of an entity's aliases, else (ENTITY_RESOLUTION_SIMILARITY > 0, an
embedder configured, not a date) the entity of the same kind whose name's embedding is closest,
when at least that close (the name joins it as an alias); else a new entity.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from memory_engine.conf import engine_settings
from memory_engine.db import across_projects, delete_in_project, vector_literal
from memory_engine.exceptions import EntityMergeInvalid
from memory_engine.mentions import DATE, SPEAKER, SUBJECT, Mention, statement
from memory_engine.models import Chunk, Document, Entity, EntityEdge, Memory, Relation
from memory_engine.models.documents import DocumentStatus
from memory_engine.providers.embeddings import EmbeddingError, get_embedding_provider
from memory_engine.providers.entities import EntityExtractor, get_entity_extractor

logger = logging.getLogger("memory_engine.entities")

__all__ = [
    "ExtractionReport",
    "entities_drop_unnamed",
    "entities_extract_documents",
    "entities_extract_memories",
    "entities_named_by",
    "entities_sweep",
    "entity_edges_retire",
    "entity_edges_revive",
    "entity_merge",
]


@dataclass
class ExtractionReport:
    """What one reading did: rows read, entities made, edges recorded."""

    memories: int = 0
    documents: int = 0
    chunks: int = 0
    entities_created: int = 0
    edges: int = 0
    extractor: str = ""

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


# --------------------------------------------------------------------------- resolution


@dataclass
class _Resolver:
    """Names to entity ids within one project, each name looked up once per reading."""

    project_id: str
    report: ExtractionReport
    known: dict[str, str] = field(default_factory=dict)
    #: key -> (its name's vector, the model) for the entities this reading makes
    vectors: dict[str, tuple[list[float], str]] = field(default_factory=dict)

    def resolve(self, mentions: Iterable[Mention]) -> dict[str, str]:
        """key -> entity id for every mention (new entities made as needed)."""
        wanted: dict[str, Mention] = {}
        for mention in mentions:
            key = mention.key
            if key and key not in self.known:
                wanted.setdefault(key, mention)
        if wanted:
            self._lookup(list(wanted))
            missing = {key: m for key, m in wanted.items() if key not in self.known}
            if missing:
                self._by_similarity(missing)
            missing = {key: m for key, m in missing.items() if key not in self.known}
            if missing:
                self._create(missing)
        return self.known

    def _lookup(self, keys: list[str]) -> None:
        rows = Entity.objects.filter(Q(key__in=keys) | Q(aliases__overlap=keys), project_id=self.project_id)
        by_alias: dict[str, str] = {}
        for entity_id, key, aliases in rows.values_list("id", "key", "aliases"):
            self.known[key] = entity_id
            for alias in aliases:
                by_alias.setdefault(alias, entity_id)
        for key in keys:
            if key not in self.known and key in by_alias:
                self.known[key] = by_alias[key]

    def _by_similarity(self, missing: dict[str, Mention]) -> None:
        """Names close to a known entity's name (same kind) join it as an alias."""
        threshold = engine_settings.ENTITY_RESOLUTION_SIMILARITY
        names = {key: m for key, m in missing.items() if m.kind != DATE}
        provider = get_embedding_provider() if threshold > 0 and names else None
        if provider is None:
            return
        vectors = _embed_names([m.name for m in names.values()])
        if vectors is None:
            return
        for (key, mention), vector in zip(names.items(), vectors, strict=True):
            if vector is None:
                continue
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT id, 1 - (name_vector::vector <=> %(v)s::vector) FROM memory_engine_entity "
                    "WHERE project_id = %(project)s AND kind = %(kind)s AND name_vector_model = %(model)s "
                    "AND name_vector IS NOT NULL ORDER BY name_vector::vector <=> %(v)s::vector LIMIT 1",
                    {"v": vector_literal(vector), "project": self.project_id, "kind": mention.kind,
                     "model": provider.model_name})
                row = cursor.fetchone()
            if row is not None and row[1] is not None and not math.isnan(row[1]) and row[1] >= threshold:
                self.known[key] = row[0]
                Entity.objects.filter(pk=row[0]).exclude(aliases__contains=[key]).update(
                    aliases=_array_append("aliases", key), updated_at=timezone.now())
            else:
                self.vectors[key] = (vector, provider.model_name)

    def _create(self, missing: dict[str, Mention]) -> None:
        now = timezone.now()
        rows = []
        for key, mention in missing.items():
            vector, model = self.vectors.get(key, (None, ""))
            rows.append(Entity(project_id=self.project_id, name=mention.name, kind=mention.kind, key=key,
                               name_vector=[round(x, 6) for x in vector] if vector else None,
                               name_vector_model=model, created_at=now, updated_at=now))
        created = Entity.objects.bulk_create(rows, ignore_conflicts=True)
        before = len(self.known)
        self._lookup(list(missing))  # made here or by a concurrent reading: the row that won
        self.report.entities_created += min(len(created), len(self.known) - before)


def _array_append(column: str, value: str) -> Any:
    from django.db.models import F, Func, Value
    from django.db.models.fields import CharField

    return Func(F(column), Value(value, output_field=CharField()), function="array_append")


def _embed_names(names: list[str]) -> list[list[float] | None] | None:
    provider = get_embedding_provider()
    if provider is None:
        return None
    try:
        vectors = provider.embed_documents(names)
    except EmbeddingError as exc:
        logger.warning("embedding entity names failed; resolving by key and alias only: %s", exc)
        return None
    return [vector if any(vector) else None for vector in vectors]


# --------------------------------------------------------------------------- edges


def _memory_edges(memory: Memory, mentions: list[Mention], ids: dict[str, str], extractor: str,
                  now: datetime) -> list[EntityEdge]:
    """The edges of one memory: ``authored_by`` its speaker, ``about`` its subject (with the
    attribute and value it states), ``mentions`` every other name, ``involves`` from the subject
    to each of them."""
    valid_at = memory.created_at
    invalid_at = memory.invalidated_at or (memory.expires_at if memory.expires_at and memory.expires_at <= now
                                           else None)
    common = {"project_id": memory.project_id, "memory_id": memory.pk, "extractor": extractor, "valid_at": valid_at,
              "invalid_at": invalid_at, "created_at": now}
    edges: list[EntityEdge] = []
    said = statement(memory.content.text, mentions)
    subject_id = ids.get(said.subject.key) if said is not None else None
    seen: set[tuple[str, str]] = set()

    def add(entity_id: str, relation: str, **extra: Any) -> None:
        if (entity_id, relation) not in seen:
            seen.add((entity_id, relation))
            edges.append(EntityEdge(entity_id=entity_id, relation=relation, **common, **extra))

    for mention in mentions:
        entity_id = ids.get(mention.key)
        if entity_id is None:
            continue
        if mention.role == SPEAKER:
            add(entity_id, Relation.AUTHORED_BY)
        elif entity_id != subject_id:
            add(entity_id, Relation.MENTIONS)
    if said is not None and subject_id is not None:
        add(subject_id, Relation.ABOUT, attribute=said.attribute, value=said.value)
        for mention in mentions:
            other = ids.get(mention.key)
            if other is not None and other != subject_id and mention.role not in (SPEAKER, SUBJECT) \
                    and (subject_id, other) not in seen:
                seen.add((subject_id, other))
                edges.append(EntityEdge(entity_id=subject_id, relation=Relation.INVOLVES, other_id=other, **common))
    return edges


def _insert_edges(edges: list[EntityEdge]) -> int:
    """Insert ``edges`` in one statement a thousand, skipping those recorded already (a memory
    read twice); the number inserted."""
    inserted = 0
    columns = ("id", "project_id", "entity_id", "relation", "memory_id", "chunk_id", "other_id", "attribute", "value",
               "extractor", "valid_at", "invalid_at", "created_at")
    types = ("text", "text", "text", "text", "text", "text", "text", "text", "text", "text", "timestamptz",
             "timestamptz", "timestamptz")
    for start in range(0, len(edges), 1000):
        part = edges[start:start + 1000]
        arrays = [[getattr(edge, column) for edge in part] for column in columns]
        unnest = ", ".join(f"%s::{kind}[]" for kind in types)
        with connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO memory_engine_entityedge ({', '.join(columns)}) "  # noqa: S608 (constants)
                           f"SELECT * FROM unnest({unnest}) ON CONFLICT DO NOTHING", arrays)
            inserted += cursor.rowcount
    return inserted


# --------------------------------------------------------------------------- reading


def entities_extract_memories(*, memory_ids: Sequence[str] | None = None, limit: int | None = None,
                              extractor: EntityExtractor | None = None) -> ExtractionReport:
    """Read the entities of memories not read yet (``entities_at`` null): those of ``memory_ids``,
    or the oldest ``limit`` (ENTITY_BATCH) of every project. Idempotent: a memory read twice
    (two tasks) records its edges once."""
    extractor = extractor or get_entity_extractor()
    report = ExtractionReport(extractor=extractor.name if extractor else "")
    pending = (Memory.objects.filter(entities_at__isnull=True, content__project_id=F("project_id"))
               .select_related("content"))
    if memory_ids is not None:
        pending = pending.filter(pk__in=list(memory_ids))
    else:
        pending = pending.order_by("created_at")[: limit or engine_settings.ENTITY_BATCH]
    with across_projects():  # every project's pending memories; each project's work is its own
        memories = list(pending)
    if not memories:
        return report
    now = timezone.now()
    if extractor is None:  # no graph: nothing to read, and nothing left pending
        for project_id in {memory.project_id for memory in memories}:
            Memory.objects.filter(project_id=project_id, pk__in=[m.pk for m in memories if m.project_id == project_id]
                                  ).update(entities_at=now)
        return report
    found = extractor.extract([memory.content.text for memory in memories])
    by_project: dict[str, list[tuple[Memory, list[Mention]]]] = defaultdict(list)
    for memory, mentions in zip(memories, found, strict=True):
        by_project[memory.project_id].append((memory, mentions))
    for project_id, items in by_project.items():
        with transaction.atomic():
            ids = _Resolver(project_id, report).resolve(m for _, mentions in items for m in mentions)
            edges = [edge for memory, mentions in items
                     for edge in _memory_edges(memory, mentions, ids, extractor.name, now)]
            report.edges += _insert_edges(edges)
            read = [memory.pk for memory, _ in items]
            Memory.objects.filter(project_id=project_id, pk__in=read).update(entities_at=now)
            # a memory that superseded another retires the other's edges from its own start
            for memory, _ in items:
                retired = list(Memory.objects.filter(project_id=project_id, superseded_by_id=memory.pk)
                               .values_list("pk", flat=True))
                if retired:
                    entity_edges_retire(project_id=project_id, memory_ids=retired, at=memory.created_at)
    report.memories = len(memories)
    return report


def entities_extract_documents(*, document_ids: Sequence[str] | None = None, project_id: str | None = None,
                               limit: int | None = None, extractor: EntityExtractor | None = None) -> ExtractionReport:
    """Read the entities of ready documents' live chunks not read since they were swapped in
    (``Document.entities_at`` null): ``mentions`` edges from each entity to each chunk. With
    ``project_id``, only that project's documents, every statement naming it (docs/scaling.md)."""
    extractor = extractor or get_entity_extractor()
    report = ExtractionReport(extractor=extractor.name if extractor else "")
    pending = Document.objects.filter(entities_at__isnull=True, status=DocumentStatus.READY)
    if project_id is not None:
        pending = pending.filter(project_id=project_id)
    if document_ids is not None:
        pending = pending.filter(pk__in=list(document_ids))
    else:
        pending = pending.order_by("ingested_at")[: limit or engine_settings.ENTITY_BATCH]
    with across_projects() if project_id is None else contextlib.nullcontext():
        documents = list(pending)
    for document in documents:
        with transaction.atomic():
            locked = Document.objects.select_for_update().filter(
                project_id=document.project_id, pk=document.pk, entities_at__isnull=True,
                status=DocumentStatus.READY).first()
            if locked is None:
                continue
            now = timezone.now()
            chunks = list(Chunk.objects.filter(project_id=locked.project_id, document_id=locked.pk,
                                               generation__isnull=True)
                          .order_by("chunk_index").only("id", "text"))
            if extractor is not None and chunks:
                found = extractor.extract([chunk.text for chunk in chunks])
                ids = _Resolver(locked.project_id, report).resolve(m for mentions in found for m in mentions)
                valid_at = locked.ingested_at or now
                edges = [EntityEdge(project_id=locked.project_id, entity_id=ids[m.key], relation=Relation.MENTIONS,
                                    chunk_id=chunk.pk, extractor=extractor.name, valid_at=valid_at, created_at=now)
                         for chunk, mentions in zip(chunks, found, strict=True)
                         for m in {m.key: m for m in mentions if m.key in ids}.values()]
                report.edges += _insert_edges(edges)
            Document.objects.filter(project_id=locked.project_id, pk=locked.pk).update(entities_at=now)
            report.documents += 1
            report.chunks += len(chunks)
    return report


def entities_sweep() -> dict[str, Any]:
    """The scheduled reading: up to ENTITY_BATCH pending memories and documents."""
    memories = entities_extract_memories()
    documents = entities_extract_documents()
    return {"memories": memories.memories, "documents": documents.documents, "chunks": documents.chunks,
            "entities_created": memories.entities_created + documents.entities_created,
            "edges": memories.edges + documents.edges}


# --------------------------------------------------------------------------- history


def entity_edges_retire(*, project_id: str, memory_ids: Sequence[str], at: datetime | None = None) -> int:
    """The edges of the project's memories that stop being valid (superseded, forgotten) end at ``at``."""
    return EntityEdge.objects.filter(project_id=project_id, memory_id__in=list(memory_ids),
                                     invalid_at__isnull=True).update(invalid_at=at or timezone.now())


def entity_edges_revive(*, project_id: str, memory_ids: Sequence[str]) -> int:
    """The edges of the project's restored memories are valid again."""
    return EntityEdge.objects.filter(project_id=project_id, memory_id__in=list(memory_ids),
                                     invalid_at__isnull=False).update(invalid_at=None)


# --------------------------------------------------------------------------- erasure


def entities_named_by(*, project_id: str, memory_ids: Iterable[str] | QuerySet[Any] = (),
                      chunks: QuerySet[Chunk] | None = None) -> set[str]:
    """The entities at either end of an edge to these memories (ids, or a query of their ids) or
    chunks: those a removal of them may leave with no edge (call before the removal, then
    :func:`entities_drop_unnamed`). ``project_id``: the edges' project, named in the statement
    (one node's on a distributed PostgreSQL, docs/scaling.md)."""
    ends = Q(memory_id__in=memory_ids if isinstance(memory_ids, QuerySet) else list(memory_ids))
    if chunks is not None:
        ends |= Q(chunk_id__in=chunks.values("pk"))
    edges = EntityEdge.objects.filter(ends, project_id=project_id)
    return {entity_id for pair in edges.values_list("entity_id", "other_id") for entity_id in pair if entity_id}


def entities_drop_unnamed(*, project_id: str, entity_ids: Iterable[str]) -> list[tuple[str, str]]:
    """Delete those of ``entity_ids`` that no edge names any more (their memories and chunks were
    erased, purged or deleted: a name nothing in reach states would otherwise outlive them) and
    return ``(id, name)`` of each, by id. Runs in the caller's transaction, after the removal."""
    ids = sorted(set(entity_ids))
    if not ids:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM memory_engine_entity e WHERE e.project_id = %(project)s AND e.id = ANY(%(ids)s) "
            "AND NOT EXISTS (SELECT 1 FROM memory_engine_entityedge d "
            "                WHERE d.project_id = %(project)s AND d.entity_id = e.id) "
            "AND NOT EXISTS (SELECT 1 FROM memory_engine_entityedge d "
            "                WHERE d.project_id = %(project)s AND d.other_id = e.id) "
            "RETURNING e.id, e.name", {"project": project_id, "ids": ids})
        return sorted(cursor.fetchall())


# --------------------------------------------------------------------------- merge


@transaction.atomic
def entity_merge(*, target: Entity, sources: Sequence[Entity]) -> Entity:
    """Merge ``sources`` into ``target`` (one project): their edges move to it (an edge it has
    already is dropped), their names and aliases become its aliases, they are deleted.

    Raises EntityMergeInvalid (400) when ``sources`` is empty or holds ``target``."""
    source_ids = [entity.pk for entity in sources]
    if not source_ids or target.pk in source_ids:
        raise EntityMergeInvalid(details={"entity_ids": source_ids})
    for entity in sources:
        if entity.project_id != target.project_id:
            raise ValueError("entities of another project cannot be merged")
    Entity.objects.select_for_update().filter(project_id=target.project_id, pk__in=[target.pk, *source_ids]
                                              ).order_by("pk").exists()
    with connection.cursor() as cursor:
        # Move every edge whose twin the target does not hold yet; the rest go with their entity.
        cursor.execute("""
            UPDATE memory_engine_entityedge e SET entity_id = %(target)s
            WHERE e.entity_id = ANY(%(sources)s) AND NOT EXISTS (
                SELECT 1 FROM memory_engine_entityedge t WHERE t.entity_id = %(target)s AND t.relation = e.relation
                AND t.memory_id IS NOT DISTINCT FROM e.memory_id AND t.chunk_id IS NOT DISTINCT FROM e.chunk_id
                AND t.other_id IS NOT DISTINCT FROM e.other_id)
              AND e.id = (SELECT min(d.id) FROM memory_engine_entityedge d WHERE d.entity_id = ANY(%(sources)s)
                AND d.relation = e.relation AND d.memory_id IS NOT DISTINCT FROM e.memory_id
                AND d.chunk_id IS NOT DISTINCT FROM e.chunk_id AND d.other_id IS NOT DISTINCT FROM e.other_id)""",
                       {"target": target.pk, "sources": source_ids})
        # Edges pointing at a source point at the target (an edge to itself is dropped).
        cursor.execute("DELETE FROM memory_engine_entityedge WHERE entity_id = %(target)s AND other_id = ANY(%(s)s)",
                       {"target": target.pk, "s": source_ids})
        cursor.execute("""
            UPDATE memory_engine_entityedge e SET other_id = %(target)s
            WHERE e.other_id = ANY(%(sources)s) AND e.entity_id <> %(target)s AND NOT EXISTS (
                SELECT 1 FROM memory_engine_entityedge t WHERE t.entity_id = e.entity_id AND t.relation = e.relation
                AND t.memory_id IS NOT DISTINCT FROM e.memory_id AND t.chunk_id IS NOT DISTINCT FROM e.chunk_id
                AND t.other_id = %(target)s)""", {"target": target.pk, "sources": source_ids})
    names = {target.key, *target.aliases}
    aliases = list(target.aliases)
    for entity in sources:
        for alias in (entity.key, *entity.aliases):
            if alias not in names:
                names.add(alias)
                aliases.append(alias)
    # their edges left behind go with them
    delete_in_project(Entity.objects.filter(pk__in=source_ids), target.project_id)
    target.aliases = aliases
    target.updated_at = timezone.now()
    target.save(update_fields=["aliases", "updated_at"])
    return target

