"""Memories: stores, distinct texts with their vectors, memories and the assertion ledger."""

from __future__ import annotations

from typing import Any

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.db.models import Value
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Coalesce
from django.utils import timezone

from memory_engine.consent_categories.categories import DEFAULT as DEFAULT_CONSENT
from memory_engine.consent_categories.categories import ConsentCategory
from memory_engine.exceptions import LedgerImmutable
from memory_engine.ids import PublicIdField

from .embedded import EmbeddedText, search_indexes
from .origin import Lineage, Provenance
from .retention import retention_class_field
from .tenancy import Project, ProjectRow, TenantProjectField


class Tier(models.TextChoices):
    """Whose memory a store holds (docs/memory.md): one end user, one agent, or the project."""

    USER = "user"
    AGENT = "agent"
    INSTITUTIONAL = "institutional"


class MemoryStore(ProjectRow, models.Model):
    """A named set of memories of one tier, with its own dedup thresholds and lifetimes."""

    id = PublicIdField(prefix="ms")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memory_stores")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True, default="")
    tags = models.JSONField(default=dict, blank=True)
    #: Grant tags (docs/security.md, *Access inside a project*): its memories go with the store.
    access_tags = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    duplicate_threshold = models.FloatField(null=True, blank=True)
    supersede_threshold = models.FloatField(null=True, blank=True)
    require_about_for_kinds = models.JSONField(
        default=list, blank=True, help_text="Memory kinds that must carry an `about` key."
    )
    judge_enabled = models.BooleanField(
        default=False, help_text="Ask the configured LLM whether near matches are the same fact."
    )
    tier = models.CharField(max_length=20, choices=Tier.choices, default=Tier.INSTITUTIONAL)
    # user tier: the end user's id in the host's system (one store per subject and project)
    subject_external_id = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    agent = models.ForeignKey(
        "memory_engine.Agent", null=True, blank=True, on_delete=models.CASCADE, related_name="own_stores",
        help_text="agent tier: the agent whose own memory this is.", db_constraint=False,
    )
    ttl_default = models.PositiveIntegerField(
        null=True, blank=True, help_text="Seconds a memory lives when its writer sets no expires_at (empty: forever)."
    )
    ttl_max = models.PositiveIntegerField(
        null=True, blank=True, help_text="Longest lifetime in seconds any memory of the store may have (empty: no cap)."
    )
    trash_days = models.PositiveIntegerField(
        null=True, blank=True, help_text="Days a forgotten memory stays restorable (empty: TRASH_DAYS)."
    )
    recency_half_life_days = models.FloatField(
        null=True, blank=True, help_text="Recall recency half-life (empty: the tier's default; 0: none)."
    )
    consent_expiry_days = models.JSONField(
        default=dict, blank=True,
        help_text='Days a memory of a consent category may live here, e.g. {"memory:health": 30}; '
                  "overrides CONSENT_EXPIRY_DAYS for the store's tier (docs/memory.md, *Consent categories*).",
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="me_store_name_unique_per_project"),
            models.UniqueConstraint(
                fields=["project", "subject_external_id"], name="me_store_one_per_subject",
                condition=models.Q(tier="user", subject_external_id__isnull=False),
            ),
            models.UniqueConstraint(
                fields=["agent", "project"], name="me_store_one_per_agent", condition=models.Q(tier="agent"),
            ),
        ]
        indexes = [GinIndex(fields=["access_tags"], name="me_store_access_tags")]

    def __str__(self) -> str:
        return self.name


class MemoryContent(ProjectRow, EmbeddedText):
    """One row per distinct (normalised) text per store, holding its vector."""

    id = PublicIdField(prefix="mc")
    # No index of its own: the unique (store, content_hash) index serves lookups by store. With a
    # second index on the store alone, the planner picked it for a lookup by (store, hash) when its
    # statistics had not seen the store yet, and read every content row of the store.
    store = models.ForeignKey(
        MemoryStore, on_delete=models.CASCADE, related_name="contents", db_index=False, db_constraint=False,
    )
    project = TenantProjectField()
    tenant_parent = "store"
    content_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["store", "content_hash", "project"], name="me_content_unique_per_store")
        ]
        indexes = [*search_indexes("content")]

    def __str__(self) -> str:
        return self.text[:80]


class SourceType(models.TextChoices):
    MANUAL = "manual"
    CONVERSATION = "conversation"
    DECLARED = "declared"
    DOCUMENT = "document"  # read out of a document by a distiller


class Kind(models.TextChoices):
    """The built-in memory kinds; a project's MemorySchema may declare others."""

    FACT = "fact"
    PREFERENCE = "preference"
    OBSERVATION = "observation"
    INSTRUCTION = "instruction"


# The live-memory rule, in its one home: a live memory is valid (not superseded, forgotten or in
# the trash) and not expired. Every read of memories (recall, lists, open, counts, dedup) takes
# it from here, in SQL (live_memory_sql, LIVE_MEMORY_SQL) or as an ORM filter (live_memory_q,
# Memory.objects.live()).


def live_memory_sql(*, now: str = "now()") -> str:
    """SQL of a live memory (alias ``m``); ``now`` is the clock it is live by: the transaction's
    (``now()``) or the application's as a parameter (e.g. ``%(now)s``)."""
    return f"m.invalidated_at IS NULL AND (m.expires_at IS NULL OR m.expires_at > {now})"


#: SQL of a live memory (alias ``m``) by the transaction's clock.
LIVE_MEMORY_SQL = live_memory_sql()


def unexpired_memory_q(prefix: str = "") -> models.Q:
    """Not expired (by the application's clock), as an ORM filter; ``prefix`` reaches the memory
    through a relation (``"memories__"``)."""
    return models.Q(**{f"{prefix}expires_at__isnull": True}) | models.Q(**{f"{prefix}expires_at__gt": timezone.now()})


def live_memory_q(prefix: str = "") -> models.Q:
    """A live memory (live_memory_sql) as an ORM filter; ``prefix`` as for unexpired_memory_q."""
    return unexpired_memory_q(prefix) & models.Q(**{f"{prefix}invalidated_at__isnull": True})


class MemoryQuerySet(models.QuerySet["Memory"]):
    def live(self) -> MemoryQuerySet:
        """Valid and not expired (live_memory_q)."""
        return self.filter(live_memory_q())

    def of_project(self, project_id: Any) -> MemoryQuerySet:
        """The project's memories, their store and content rows named by the project too: a
        statement that joins them (``select_related``, a filter through them) names the project
        on every table it reads, which on a distributed PostgreSQL routes it to the project's
        node (docs/scaling.md); on one PostgreSQL the two extra filters are redundant."""
        return self.filter(project_id=project_id, store__project_id=project_id, content__project_id=project_id)


#: Longest ``kind`` and ``title`` of a memory (its columns; the write funnel and the API check them).
MEMORY_KIND_MAX_CHARS = 100
MEMORY_TITLE_MAX_CHARS = 500


class Memory(ProjectRow, models.Model):
    """A fact in a store. Validity lives here: superseded or forgotten memories stay readable
    (until expiry or the trash purge deletes them; the ledger keeps their ids)."""

    id = PublicIdField(prefix="mem")
    store = models.ForeignKey(MemoryStore, on_delete=models.CASCADE, related_name="memories", db_constraint=False)
    project = TenantProjectField()
    tenant_parent = "store"
    content = models.ForeignKey(MemoryContent, on_delete=models.RESTRICT, related_name="memories", db_constraint=False)
    tags = models.JSONField(default=dict, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    source_type = models.CharField(max_length=20, choices=SourceType.choices, default=SourceType.MANUAL)
    # NULL, not "", is "about nothing": the me_memory_about index below covers only rows whose
    # about_key is set, and the API answers `about: null` for them.
    about_kind = models.CharField(max_length=100, null=True, blank=True)  # noqa: DJ001
    about_key = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    # Who or what the fact is about (memory_engine.mentions.subject_keys: identifiers, the name it
    # opens with, the about key), set by the write funnel: two memories with disjoint subjects are
    # two facts, whatever their cosine (docs/write-funnel.md, "Subjects").
    subjects = ArrayField(models.TextField(), default=list, blank=True, editable=False,
                          db_default=models.Value([], output_field=ArrayField(models.TextField())))
    # What the instruction guard found in the title, tags and metadata (the text's finding is
    # its content row's): memory_engine.instruction_guard.Finding, NULL until judged.
    guard = models.JSONField(null=True, blank=True, editable=False)
    kind = models.CharField(max_length=MEMORY_KIND_MAX_CHARS, default=Kind.FACT)
    title = models.CharField(max_length=MEMORY_TITLE_MAX_CHARS, blank=True, default="")
    summary = models.TextField(blank=True, default="")
    confidence = models.FloatField(default=0.7)
    # NULL: cross-cutting (recalled with every facet); else compared exactly (services.facets)
    facet = models.CharField(max_length=128, null=True, blank=True)  # noqa: DJ001
    agent = models.ForeignKey(
        "memory_engine.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="memories",
        help_text="The agent that wrote it or for which it was written (user_for_agent recall).", db_constraint=False,
    )
    evidence_count = models.PositiveIntegerField(default=1)
    reinforced_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    trashed_at = models.DateTimeField(
        null=True, blank=True, help_text="Forgotten into the trash: restorable until the sweep purges it."
    )
    created_at = models.DateTimeField(default=timezone.now)
    invalidated_at = models.DateTimeField(null=True, blank=True)
    superseded_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="supersedes", db_constraint=False,
    )
    # ephemeral: gets an expires_at (MEMORY_EPHEMERAL_TTL_SECONDS) when written without one;
    # legal_hold: forget and erasure refuse it, the sweep keeps it (docs/retention.md)
    retention_class = retention_class_field()
    # Where the fact comes from (docs/memory.md, *Provenance and lineage*): stated by its writer,
    # inferred (a model read it out of a conversation or a document), or unknown; native (written
    # here), imported (brought from elsewhere) or derived (from documents: MemoryDerivation).
    provenance = models.CharField(max_length=10, choices=Provenance.choices, default=Provenance.UNKNOWN,
                                  db_default=Provenance.UNKNOWN)
    lineage = models.CharField(max_length=10, choices=Lineage.choices, default=Lineage.NATIVE,
                               db_default=Lineage.NATIVE)
    # What the memory holds about a person (memory_engine.consent_categories): the writer's claim, raised by the
    # classifier, never lowered. The sensitive ones are masked on the memory map.
    consent_category = models.CharField(max_length=32, choices=ConsentCategory.choices, default=DEFAULT_CONSENT,
                                        db_default=DEFAULT_CONSENT)
    #: When the entity graph read this memory (null: not yet, the extraction sweep's work list;
    #: services.entities).
    entities_at = models.DateTimeField(null=True, blank=True, editable=False)

    objects = MemoryQuerySet.as_manager()

    class Meta:
        ordering = ["created_at", "id"]
        verbose_name_plural = "memories"
        indexes = [
            models.Index(fields=["expires_at"], name="me_memory_expiry",
                         condition=models.Q(expires_at__isnull=False)),
            models.Index(fields=["trashed_at"], name="me_memory_trash",
                         condition=models.Q(trashed_at__isnull=False)),
            models.Index(
                fields=["store", "created_at"],
                name="me_memory_valid_by_store",
                condition=models.Q(invalidated_at__isnull=True),
            ),
            models.Index(fields=["content"], name="me_memory_content"),
            # A conversation's live turns in order: search reads the turns next to a hit by this
            # index, a few rows whatever else the store holds (docs/retrieval.md, *Neighbouring turns*).
            models.Index(
                "store", Coalesce(KeyTextTransform("conversation_id", "metadata"), Value("")), "created_at", "id",
                name="me_memory_turns",
                condition=models.Q(source_type=SourceType.CONVERSATION, invalidated_at__isnull=True),
            ),
            models.Index(
                fields=["store", "about_kind", "about_key"],
                name="me_memory_about",
                condition=models.Q(invalidated_at__isnull=True, about_key__isnull=False),
            ),
            GinIndex(fields=["subjects"], name="me_memory_live_subjects",
                     condition=models.Q(invalidated_at__isnull=True)),
            models.Index(fields=["created_at"], name="me_memory_entities_pending",
                         condition=models.Q(entities_at__isnull=True)),
        ]

    def __str__(self) -> str:
        return f"{self.id}: {self.content.text[:60]}"

    @property
    def is_valid(self) -> bool:
        return self.invalidated_at is None

    @property
    def text(self) -> str:
        return self.content.text


class MemoryRevision(ProjectRow, models.Model):
    """A memory's earlier wording, kept when a reinforcing write restated it differently."""

    id = PublicIdField(prefix="mrev")
    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="revisions", db_constraint=False)
    project = TenantProjectField()
    tenant_parent = "memory"
    content = models.ForeignKey(MemoryContent, on_delete=models.RESTRICT, related_name="revisions", db_constraint=False)
    created_at = models.DateTimeField(default=timezone.now, help_text="When this wording was replaced.")

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.memory_id} @ {self.created_at:%Y-%m-%d %H:%M}"

    @property
    def text(self) -> str:
        return self.content.text


class MemorySchema(ProjectRow, models.Model):
    """A project's declared memory kinds and relation types, with display names.

    ``kinds`` / ``relation_types``: ``[{"name": "fact", "display_name": "Fact", "description": ""}]``.
    Without a schema (or with empty ``kinds``) any kind is accepted and the tool enums stay open.
    """

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="memory_schema")
    kinds = models.JSONField(default=list, blank=True)
    relation_types = models.JSONField(default=list, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"memory schema of {self.project}"


class Outcome(models.TextChoices):
    CREATED = "created"
    SUPERSEDED = "superseded"
    SKIPPED = "skipped"
    DECLARED = "declared"
    FORGOTTEN = "forgotten"
    FAILED = "failed"
    RESTORED = "restored"
    EXPIRED = "expired"
    PURGED = "purged"


class Mechanism(models.TextChoices):
    API = "api"
    TOOL = "tool"
    RULE = "rule"
    FORMATION = "formation"
    DISTILLER = "distiller"  # a resident distiller's claim read out of a document (services.distillers)
    IMPORT = "import"  # manage.py memory_engine_import (another system's memories)
    SYSTEM = "system"  # the engine itself: the memory sweep (expiry, trash purge)


class MemoryAssertion(ProjectRow, models.Model):
    """Append-only ledger: one row per write attempt, skips included.

    A database trigger (migration 0001) rejects UPDATE and DELETE; ``save()`` refuses
    to update an existing row too.
    """

    id = PublicIdField(prefix="asr")
    store = models.ForeignKey(MemoryStore, on_delete=models.CASCADE, related_name="assertions", db_constraint=False)
    project = TenantProjectField()
    tenant_parent = "store"
    # No database constraint: a memory deleted by expiry, the trash purge or a user-tier
    # forget keeps its ledger rows, which name its id.
    memory = models.ForeignKey(
        Memory, null=True, blank=True, on_delete=models.DO_NOTHING, related_name="assertions",
        db_constraint=False, help_text="The memory created, kept (skip) or retired into (supersede).",
    )
    replaced_memory = models.ForeignKey(
        Memory, null=True, blank=True, on_delete=models.DO_NOTHING, related_name="retiring_assertions",
        db_constraint=False, help_text="The memory this write retired (supersede, forget).",
    )
    content = models.TextField(help_text="The text as asserted.")
    outcome = models.CharField(max_length=20, choices=Outcome.choices)
    similarity = models.FloatField(null=True, blank=True)
    decision_reason = models.CharField(max_length=40, blank=True, default="")
    details = models.JSONField(default=dict, blank=True)
    principal = models.CharField(max_length=200)
    mechanism = models.CharField(max_length=20, choices=Mechanism.choices)
    generation = models.ForeignKey(
        "memory_engine.Generation", null=True, blank=True, on_delete=models.DO_NOTHING,
        related_name="assertions", db_constraint=False,
    )
    rule = models.ForeignKey(
        "memory_engine.MemoryRule", null=True, blank=True, on_delete=models.DO_NOTHING,
        related_name="assertions", db_constraint=False,
    )
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(fields=["store", "created_at"], name="me_assertion_store_time"),
            models.Index(fields=["memory"], name="me_assertion_memory"),
        ]

    def __str__(self) -> str:
        return f"{self.outcome}: {self.content[:60]}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise LedgerImmutable()
        super().save(*args, **kwargs)


class MemoryDerivation(ProjectRow, models.Model):
    """A derived memory and a document version it was read out of (a distiller's claim). A memory
    whose every version is superseded or forgotten is retired with them (services.distillers)."""

    project = models.ForeignKey("memory_engine.Project", on_delete=models.CASCADE, related_name="+")
    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="derivations", db_constraint=False)
    version = models.ForeignKey("memory_engine.DocumentVersion", on_delete=models.CASCADE,
                                related_name="derived_memories", db_constraint=False)
    distiller = models.ForeignKey("memory_engine.Distiller", null=True, blank=True, on_delete=models.SET_NULL,
                                  related_name="+", db_constraint=False)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["memory", "version", "project"], name="me_derivation_unique")]
        indexes = [models.Index(fields=["version"], name="me_derivation_version")]

    def __str__(self) -> str:
        return f"{self.memory_id} <- {self.version_id}"
