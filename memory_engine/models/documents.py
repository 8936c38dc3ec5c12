"""Documents: uploaded files and texts, their chunks, and the ingestion rules that convert them."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.utils import timezone

from memory_engine.ids import PublicIdField

from .embedded import EmbeddedText, search_indexes
from .origin import Lineage, Provenance
from .retention import retention_class_field
from .tenancy import Project, ProjectRow, TenantProjectField


class ChunkStrategy(models.TextChoices):
    """How a document is cut (memory_engine.chunking); the default depends on the content type."""

    PAGE = "page"
    WHOLE = "whole"
    SIZE = "size"
    RECURSIVE = "recursive"


class DocumentStatus(models.TextChoices):
    PENDING = "pending"
    PROCESSING = "processing"
    READY = "ready"
    FAILED = "failed"


def document_upload_to(instance: Document, filename: str) -> str:
    return f"memory_engine/{instance.project_id}/{instance.id}/{filename}"


class IngestionRule(ProjectRow, models.Model):
    """How to convert a content type: a converter tool, native extraction first or skipped."""

    class ConverterType(models.TextChoices):
        CALLABLE = "callable"
        HTTP = "http"

    class NativeExtraction(models.TextChoices):
        FIRST = "first"
        SKIP = "skip"

    class FileDelivery(models.TextChoices):
        BASE64 = "base64"
        DOWNLOAD_URL = "download_url"

    class GuardPolicy(models.TextChoices):
        """What the instruction guard does with the chunks of the documents this rule converts."""

        JUDGE = "judge"  # each chunk judged; one that reads as instructions is kept out of every read
        TRUST = "trust"  # the operator vouches for these documents (e.g. a security handbook quoting attacks)

    id = PublicIdField(prefix="ir")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="ingestion_rules")
    name = models.CharField(max_length=200, blank=True, default="")
    content_type_glob = models.CharField(max_length=200)
    converter_type = models.CharField(max_length=20, choices=ConverterType.choices)
    converter_path = models.CharField(max_length=300, blank=True, default="")
    converter_url = models.URLField(max_length=1000, blank=True, default="")
    converter_secret = models.CharField(max_length=200, blank=True, default="")
    converter_timeout = models.FloatField(default=60.0)
    native_extraction = models.CharField(
        max_length=10, choices=NativeExtraction.choices, default=NativeExtraction.FIRST
    )
    file_delivery = models.CharField(max_length=20, choices=FileDelivery.choices, default=FileDelivery.BASE64)
    # NULL means "not set by this rule" like chunk_size and chunk_overlap beside it.
    chunk_strategy = models.CharField(  # noqa: DJ001
        max_length=10, choices=ChunkStrategy.choices, null=True, blank=True
    )
    chunk_size = models.PositiveIntegerField(null=True, blank=True)
    chunk_overlap = models.PositiveIntegerField(null=True, blank=True)
    enabled = models.BooleanField(default=True)
    guard_policy = models.CharField(
        max_length=10, choices=GuardPolicy.choices, default=GuardPolicy.JUDGE,
        help_text="judge: the instruction guard judges each chunk and keeps one that reads as instructions to an AI "
                  "out of every read; trust: the chunks of these documents are not judged (docs/security.md).")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "content_type_glob"], name="me_ingestion_rule_glob_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.content_type_glob} -> {self.converter_type}"


class Document(ProjectRow, models.Model):
    """A file or text in the project's library and the state of its ingestion."""

    id = PublicIdField(prefix="doc")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="documents")
    path = models.CharField(max_length=1000)
    title = models.CharField(max_length=500, blank=True, default="")
    content_type = models.CharField(max_length=200)
    file = models.FileField(upload_to=document_upload_to, max_length=1000, blank=True)
    original_filename = models.CharField(max_length=500, blank=True, default="")
    size_bytes = models.PositiveBigIntegerField(default=0)
    sha256 = models.CharField(max_length=64, blank=True, default="")
    tags = models.JSONField(default=dict, blank=True)
    #: Grant tags (docs/security.md, *Access inside a project*): a key with grants reaches the
    #: document through a tag of this list its grants match.
    access_tags = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    chunk_strategy = models.CharField(max_length=10, choices=ChunkStrategy.choices)
    # The effective values: tokens for recursive and page, characters for size, None for whole.
    chunk_size = models.PositiveIntegerField(null=True, blank=True)
    chunk_overlap = models.PositiveIntegerField(null=True, blank=True)
    status = models.CharField(
        max_length=20, choices=DocumentStatus.choices, default=DocumentStatus.PENDING, db_index=True
    )
    error = models.JSONField(null=True, blank=True, help_text="{code, message, details} when failed.")
    total_chunks = models.PositiveIntegerField(default=0)
    indexed_chunks = models.PositiveIntegerField(default=0)
    unembedded_chunks = models.PositiveIntegerField(default=0)
    attempts = models.PositiveIntegerField(default=0)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    ingested_at = models.DateTimeField(null=True, blank=True)
    ingestion_rule = models.ForeignKey(
        IngestionRule, null=True, blank=True, on_delete=models.SET_NULL, related_name="documents", db_constraint=False,
    )
    converter_state = models.JSONField(
        default=dict, blank=True, help_text="Pending-converter bookkeeping (callback nonce, expiry)."
    )
    # Identity of a captured source: (project, source, external_ref) when external_ref is set.
    source = models.CharField(max_length=50, default="upload")
    external_ref = models.CharField(max_length=500, null=True, blank=True)  # noqa: DJ001  (NULL: no identity)
    last_seen_at = models.DateTimeField(null=True, blank=True)
    active_version = models.ForeignKey("DocumentVersion", null=True, blank=True, on_delete=models.SET_NULL,
                                       related_name="+", db_constraint=False)
    # Retention (docs/retention.md): deprecated documents are kept but not searched by default;
    # a forgotten one is a tombstone (no chunks, no raw bytes, no file) that keeps its versions'
    # metadata and the reason.
    deprecated_at = models.DateTimeField(null=True, blank=True)
    forgotten_at = models.DateTimeField(null=True, blank=True)
    forget_reason = models.CharField(max_length=500, blank=True, default="")
    #: When the entity graph read the live chunks (null: not since they were swapped in; the
    #: extraction sweep's work list, services.entities).
    entities_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["path"]
        constraints = [
            models.UniqueConstraint(fields=["project", "path"], name="me_document_path_unique"),
            models.UniqueConstraint(fields=["project", "source", "external_ref"],
                                    condition=models.Q(external_ref__isnull=False),
                                    name="me_document_external_ref_unique"),
        ]
        indexes = [models.Index(fields=["project", "status"], name="me_document_status"),
                   GinIndex(fields=["access_tags"], name="me_document_access_tags")]

    def __str__(self) -> str:
        return self.path


class RawCapture(ProjectRow, models.Model):
    """What a capture received, byte for byte, with the request's parameters: stored once per
    document (deduplicated by ``payload_sha256``, the hash of the bytes and the parameters).
    Append-only: a trigger refuses UPDATE and DELETE except under erasure (the ledger's switch,
    ``memory_engine.ledger_erasure``, see ``memory_engine.db.allow_ledger_erasure``); erasing
    the document or its project erases it."""

    id = PublicIdField(prefix="raw")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="raw_captures")
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="raw_captures", db_constraint=False)
    payload_sha256 = models.CharField(max_length=64)
    content_sha256 = models.CharField(max_length=64)
    data = models.BinaryField()
    content_type = models.CharField(max_length=200)
    parameters = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.UniqueConstraint(fields=["document", "payload_sha256", "project"],
                                    name="me_raw_capture_payload_unique")
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.content_type}, {len(self.data or b'')} bytes)"


class DocumentVersion(ProjectRow, models.Model):
    """One captured state of a document. ``active`` is the live one (its chunks are what search
    sees); ``pending`` waits for its ingestion, ``failed`` never became active, ``superseded``
    was active before, ``staged`` was derived by a replay run (``generation``) and waits for its
    promote. Chunks point at the version they were cut from, so a later staged
    generation can hold versions and chunks beside the live ones."""

    class Status(models.TextChoices):
        PENDING = "pending"
        ACTIVE = "active"
        SUPERSEDED = "superseded"
        FAILED = "failed"
        STAGED = "staged"

    Provenance = Provenance
    SourceClass = Lineage  # a version's lineage

    class CapturedByKind(models.TextChoices):
        HUMAN = "human"
        AGENT = "agent"
        SYSTEM = "system"
        ADAPTER = "adapter"

    id = PublicIdField(prefix="dv")
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="versions", db_constraint=False)
    project = TenantProjectField()
    tenant_parent = "document"
    number = models.PositiveIntegerField()
    sha256 = models.CharField(max_length=64, help_text="sha256 of the captured content (file bytes or text).")
    size_bytes = models.PositiveBigIntegerField(default=0)
    content_type = models.CharField(max_length=200, blank=True, default="")
    title = models.CharField(max_length=500, blank=True, default="")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    provenance = models.CharField(max_length=10, choices=Provenance.choices, default=Provenance.UNKNOWN)
    source_class = models.CharField(max_length=10, choices=SourceClass.choices, default=SourceClass.NATIVE)
    occurred_at = models.DateTimeField(null=True, blank=True, help_text="When the content was true at the source.")
    valid_from = models.DateTimeField(null=True, blank=True)
    valid_until = models.DateTimeField(null=True, blank=True)
    captured_by = models.CharField(max_length=200, blank=True, default="")
    captured_by_kind = models.CharField(max_length=10, choices=CapturedByKind.choices,
                                        default=CapturedByKind.SYSTEM)
    derived_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="derivations", db_constraint=False)
    # Erasing a raw capture erases what was derived from it.
    raw_capture = models.ForeignKey(RawCapture, null=True, blank=True, on_delete=models.CASCADE,
                                    related_name="versions", db_constraint=False)
    error = models.JSONField(null=True, blank=True)
    # The staged generation (replay run) that derived this version; NULL for a capture's own.
    generation = models.ForeignKey("ReplayRun", null=True, blank=True, on_delete=models.CASCADE,
                                   related_name="versions", db_constraint=False)
    created_at = models.DateTimeField(default=timezone.now)
    activated_at = models.DateTimeField(null=True, blank=True)
    # ephemeral: tombstoned by the retention sweep DOCUMENT_EPHEMERAL_TTL_SECONDS after capture;
    # legal_hold: the document's forget, purge and erasure refuse it.
    retention_class = retention_class_field()
    tombstoned_at = models.DateTimeField(null=True, blank=True,
                                         help_text="Forgotten: its text, chunks and raw bytes are gone.")

    class Meta:
        ordering = ["document_id", "-number"]  # the id: "document" would join it for its own order
        constraints = [
            models.UniqueConstraint(fields=["document", "number", "project"], name="me_document_version_number_unique"),
            models.UniqueConstraint(fields=["document", "project"], condition=models.Q(status="active"),
                                    name="me_document_one_active_version"),
        ]

    def __str__(self) -> str:
        return f"{self.document_id} v{self.number} ({self.status})"


class Chunk(ProjectRow, EmbeddedText):
    """A searchable piece of a document, with its page when the source was paged."""

    id = PublicIdField(prefix="chk")
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="chunks", db_constraint=False)
    project = TenantProjectField()
    tenant_parent = "document"
    # The version the chunk was cut from (NULL only for rows older than versions).
    version = models.ForeignKey("DocumentVersion", null=True, blank=True, on_delete=models.CASCADE,
                                related_name="chunks", db_constraint=False)
    # NULL: live (what search sees). A replay run: staged by it, or (after its promote) the
    # live chunks it replaced, kept for a demote. Live search filters on ``generation IS NULL``.
    generation = models.ForeignKey("ReplayRun", null=True, blank=True, on_delete=models.CASCADE,
                                   related_name="chunks", db_constraint=False)
    chunk_index = models.PositiveIntegerField()
    page = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["document_id", "chunk_index"]  # the id: "document" would join it for its own order
        constraints = [
            models.UniqueConstraint(fields=["document", "chunk_index", "project"],
                                    condition=models.Q(generation__isnull=True),
                                    name="me_chunk_index_unique"),
        ]
        indexes = search_indexes("chunk")

    def __str__(self) -> str:
        return f"{self.document_id}#{self.chunk_index}"
