"""The documents API's serializers: what its requests carry and its answers hold (wire names
exactly as DESIGN.md lists them)."""

from __future__ import annotations

from typing import Any

from django.core.validators import ProhibitNullCharactersValidator
from drf_spectacular.utils import inline_serializer
from rest_framework import serializers

from memory_engine import strict
from memory_engine.models import Chunk, Document, DocumentVersion, IngestionRule
from memory_engine.models.documents import ChunkStrategy
from memory_engine.models.retention import RetentionClass
from memory_engine.selectors.documents import version_text
from memory_engine.strict import JSONObjectField

from ..fields import ShareSerializer


class PathField(serializers.CharField):
    """A path checked by the service (PATH_INVALID names the problem), NUL characters included."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(trim_whitespace=False, max_length=4000, **kwargs)
        self.validators = [v for v in self.validators if not isinstance(v, ProhibitNullCharactersValidator)]


class DocumentErrorSerializer(strict.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    details = serializers.DictField(required=False)


STATUS_HELP = "pending | processing | ready | failed"


class DocumentSerializer(strict.ModelSerializer):
    error = DocumentErrorSerializer(read_only=True, allow_null=True)
    status = serializers.CharField(read_only=True, help_text=STATUS_HELP)
    ingestion_rule_id = serializers.CharField(read_only=True, allow_null=True)
    active_version_id = serializers.CharField(read_only=True, allow_null=True,
                                              help_text="The version whose chunks search sees.")

    class Meta:
        model = Document
        fields = [
            "id", "path", "title", "content_type", "status", "error", "total_chunks", "indexed_chunks",
            "unembedded_chunks", "attempts", "chunk_strategy", "chunk_size", "chunk_overlap", "tags", "metadata",
            "size_bytes", "sha256", "original_filename", "ingestion_rule_id", "heartbeat_at", "ingested_at",
            "source", "external_ref", "last_seen_at", "active_version_id", "deprecated_at", "forgotten_at",
            "forget_reason", "created_at", "updated_at",
        ]
        read_only_fields = fields


class DocumentStatusSerializer(strict.ModelSerializer):
    error = DocumentErrorSerializer(read_only=True, allow_null=True)
    status = serializers.CharField(read_only=True, help_text=STATUS_HELP)

    class Meta:
        model = Document
        fields = ["id", "status", "indexed_chunks", "total_chunks", "unembedded_chunks", "error", "attempts",
                  "heartbeat_at", "ingested_at"]
        read_only_fields = fields


class ChunkSettingsSerializer(strict.Serializer):
    chunk_strategy = serializers.ChoiceField(
        choices=ChunkStrategy.choices, required=False,
        help_text="Default: recursive for text/plain and text/markdown, page (long pages cut recursively) "
                  "for everything else; an ingestion rule may set another.")
    chunk_size = serializers.IntegerField(
        min_value=1, max_value=1_000_000, required=False,
        help_text="Tokens of the embedder for recursive and page, characters for size; unused by whole.")
    chunk_overlap = serializers.IntegerField(min_value=0, max_value=999_999, required=False,
                                             help_text="In the unit of chunk_size; less than chunk_size.")
    wait = serializers.BooleanField(required=False, default=False,
                                    help_text="Ingest inline and answer 201 when the file is at most "
                                              "SYNC_INGESTION_MAX_BYTES; otherwise 202.")


class LineageSerializer(ChunkSettingsSerializer):
    """What a capture says about its content, recorded on the version it makes."""

    provenance = serializers.ChoiceField(choices=DocumentVersion.Provenance.choices, required=False,
                                         default=DocumentVersion.Provenance.UNKNOWN)
    source_class = serializers.ChoiceField(choices=DocumentVersion.SourceClass.choices, required=False,
                                           default=DocumentVersion.SourceClass.NATIVE)
    occurred_at = serializers.DateTimeField(required=False, allow_null=True,
                                            help_text="When the content was true at the source.")
    valid_from = serializers.DateTimeField(required=False, allow_null=True)
    valid_until = serializers.DateTimeField(required=False, allow_null=True)
    captured_by_kind = serializers.ChoiceField(
        choices=DocumentVersion.CapturedByKind.choices, required=False,
        help_text="Default: human for a staff session, agent for an API key.")
    derived_from = serializers.CharField(required=False, allow_null=True, max_length=40,
                                         help_text="The id of the version this content was derived from.")
    title = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False,
                                  help_text="At most MAX_TITLE_CHARS (400 TITLE_TOO_LONG).")
    tags = JSONObjectField(required=False)
    metadata = JSONObjectField(required=False)
    retention_class = serializers.ChoiceField(
        choices=RetentionClass.choices, required=False, default=RetentionClass.DURABLE,
        help_text="durable | ephemeral (tombstoned after DOCUMENT_EPHEMERAL_TTL_SECONDS) | legal_hold.")


class IdentitySerializer(LineageSerializer):
    source = serializers.CharField(  # type: ignore[assignment]  # a field, not Field.source
                                   required=False, default="upload", trim_whitespace=False,
                                   help_text="Where the content comes from: upload, http, gdrive, crm, ...")
    external_ref = serializers.CharField(
        required=False, allow_null=True, trim_whitespace=False,
        help_text="The source's id of the content; with it, (source, external_ref) names the document "
                  "and a new capture is a noop or a new version.")


class DocumentUploadSerializer(IdentitySerializer):
    file = serializers.FileField(allow_empty_file=True)
    path = PathField(required=False, help_text="Default: /<original filename>.")
    password = serializers.CharField(required=False, allow_blank=True, write_only=True, max_length=1000,
                                     help_text="Opens an encrypted PDF; stored encrypted for re-ingestion.")


class DocumentTextSerializer(IdentitySerializer):
    content = serializers.CharField(allow_blank=True, trim_whitespace=False)
    content_type = serializers.ChoiceField(choices=["text/plain", "text/markdown"], required=False)
    path = PathField(required=False)
    share = ShareSerializer(required=False, help_text="A new document: keys of your project that get access "
                                                      "(docs/security.md).")


class BatchTextSerializer(strict.Serializer):
    """One text document of a batch."""

    content = serializers.CharField(allow_blank=True, trim_whitespace=False)
    content_type = serializers.ChoiceField(choices=["text/plain", "text/markdown"], required=False)
    path = PathField(required=False, help_text="Default: /<slug of the title>-<random>.txt.")
    title = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False,
                                  help_text="At most MAX_TITLE_CHARS (400 TITLE_TOO_LONG).")
    tags = JSONObjectField(required=False)
    metadata = JSONObjectField(required=False)


class DocumentBatchSerializer(LineageSerializer):
    """Many text documents (JSON); the chunk settings, lineage and ``wait`` apply to all."""

    title = None  # type: ignore[assignment]  # per document
    tags = None  # type: ignore[assignment]
    metadata = None  # type: ignore[assignment]
    documents = BatchTextSerializer(many=True, allow_empty=False,
                                    help_text="At most MAX_BATCH_DOCUMENTS (413 BATCH_TOO_LARGE).")


class DocumentBatchUploadSerializer(LineageSerializer):
    """Many files (multipart: one ``file`` part each); ``tags``, ``metadata``, the chunk settings,
    lineage and ``wait`` apply to all."""

    title = None  # type: ignore[assignment]  # from the file name
    file = serializers.ListField(child=serializers.FileField(allow_empty_file=True), allow_empty=False,
                                 help_text="One part per document; at most MAX_BATCH_DOCUMENTS.")
    path = serializers.ListField(child=PathField(), required=False,
                                 help_text="One per file, in the same order. Default: /<original filename>.")


class ByRefCaptureSerializer(LineageSerializer):
    content = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False,
                                    help_text="Text content (JSON); or send `file` (multipart).")
    content_type = serializers.ChoiceField(choices=["text/plain", "text/markdown"], required=False)
    file = serializers.FileField(required=False, allow_empty_file=True)
    path = PathField(required=False, help_text="Default: /<source>/<external_ref>.")
    password = serializers.CharField(required=False, allow_blank=True, write_only=True, max_length=1000)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("content" in attrs) == ("file" in attrs):
            raise serializers.ValidationError("Send either `content` (text) or `file` (multipart upload).")
        return attrs


class DocumentVersionSerializer(strict.ModelSerializer):
    document_id = serializers.CharField(read_only=True)
    derived_from_id = serializers.CharField(read_only=True, allow_null=True)
    raw_capture_id = serializers.CharField(read_only=True, allow_null=True)
    status = serializers.CharField(read_only=True, help_text="pending | active | superseded | failed | staged")
    generation_id = serializers.CharField(read_only=True, allow_null=True,
                                          help_text="The replay run (staged generation) that derived it.")
    error = DocumentErrorSerializer(read_only=True, allow_null=True)

    class Meta:
        model = DocumentVersion
        fields = [
            "id", "document_id", "number", "status", "sha256", "size_bytes", "content_type", "title",
            "provenance", "source_class", "occurred_at", "valid_from", "valid_until", "captured_by",
            "captured_by_kind", "derived_from_id", "raw_capture_id", "generation_id", "error", "created_at",
            "activated_at", "retention_class", "tombstoned_at",
        ]
        read_only_fields = fields


class DocumentVersionDetailSerializer(DocumentVersionSerializer):
    text = serializers.SerializerMethodField(help_text="The captured text; null for binary content.")

    class Meta(DocumentVersionSerializer.Meta):
        fields = [*DocumentVersionSerializer.Meta.fields, "text"]
        read_only_fields = fields

    def get_text(self, obj: DocumentVersion) -> str | None:
        return version_text(obj)


class CaptureSerializer(strict.Serializer):
    """The answer to a capture: what it did, the version it made (or matched) and the document."""

    id = serializers.CharField(help_text="The document's id.")
    status = serializers.CharField(help_text="created | noop | updated")
    version = DocumentVersionSerializer()
    document = DocumentSerializer()


class DocumentForgetSerializer(strict.Serializer):
    reason = serializers.CharField(max_length=400, help_text="Why it is forgotten; kept on the tombstone.")


class DocumentRetentionSerializer(strict.Serializer):
    retention_class = serializers.ChoiceField(choices=RetentionClass.choices)
    version_ids = serializers.ListField(child=serializers.CharField(max_length=40), required=False,
                                        max_length=1000, help_text="Default: every version of the document.")


class ReingestSerializer(ChunkSettingsSerializer):
    password = serializers.CharField(required=False, allow_blank=True, write_only=True, max_length=1000)


class ChunkSerializer(strict.ModelSerializer):
    document_id = serializers.CharField(read_only=True)
    has_embedding = serializers.SerializerMethodField()

    class Meta:
        model = Chunk
        fields = ["id", "document_id", "chunk_index", "page", "text", "has_embedding", "embedding_model"]
        read_only_fields = fields

    def get_has_embedding(self, obj: Chunk) -> bool:
        return obj.embedding is not None


class IngestionRuleSerializer(strict.ModelSerializer):
    converter_secret = serializers.CharField(write_only=True, required=False, allow_blank=True, max_length=200)
    has_secret = serializers.SerializerMethodField()

    class Meta:
        model = IngestionRule
        fields = [
            "id", "name", "content_type_glob", "converter_type", "converter_path", "converter_url",
            "converter_secret", "has_secret", "converter_timeout", "native_extraction", "file_delivery",
            "chunk_strategy", "chunk_size", "chunk_overlap", "enabled", "guard_policy", "created_at",
        ]
        read_only_fields = ["id", "has_secret", "created_at"]
        # Uniqueness and ambiguity are checked by the service with clearer messages.
        validators: list[Any] = []

    def get_has_secret(self, obj: IngestionRule) -> bool:
        return bool(obj.converter_secret)


class CallbackAcceptedSerializer(strict.Serializer):
    document_id = serializers.CharField()
    status = serializers.CharField()



class CapturedDocumentSerializer(DocumentSerializer):
    capture = inline_serializer("CaptureOutcome", fields={
        "status": serializers.CharField(help_text="created | noop | updated"),
        "version": DocumentVersionSerializer(),
    })

    class Meta(DocumentSerializer.Meta):
        fields = [*DocumentSerializer.Meta.fields, "capture"]
        read_only_fields = fields


class DocumentBatchCreatedSerializer(strict.Serializer):
    documents = DocumentSerializer(many=True, help_text="In the order sent.")
