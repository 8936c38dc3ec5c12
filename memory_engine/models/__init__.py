"""All memory_engine models (app label ``memory_engine``)."""

from .agents import Agent, Generation
from .distillers import Distiller, DistillerRun, DistillerVersion
from .documents import Chunk, Document, DocumentVersion, IngestionRule, RawCapture
from .embedding_models import EmbeddingModel
from .entities import Entity, EntityEdge, EntityKind, Relation
from .feed import FeedClock, FeedEntry, FeedKind
from .lexical import LexicalPart, LexicalStatistics, LexicalTerm
from .links import EvidenceLink
from .memories import (
    Memory,
    MemoryAssertion,
    MemoryContent,
    MemoryDerivation,
    MemoryRevision,
    MemorySchema,
    MemoryStore,
)
from .memory_map import MemoryMap, MemoryMapStatus
from .origin import Lineage, Provenance
from .replay import ReplayRun, TransformConfig
from .retention import ErasureReceipt, RetentionChange, RetentionClass
from .rules import MemoryRule
from .tenancy import ApiKey, Project, ProjectRow, StaffGrants
from .webhooks import DeliveryStatus, WebhookDelivery, WebhookSubscription

__all__ = [
    "Agent",
    "ApiKey",
    "Chunk",
    "Distiller",
    "DistillerRun",
    "DistillerVersion",
    "Document",
    "DocumentVersion",
    "EmbeddingModel",
    "Entity",
    "EntityEdge",
    "EntityKind",
    "ErasureReceipt",
    "FeedClock",
    "FeedEntry",
    "FeedKind",
    "Generation",
    "IngestionRule",
    "Lineage",
    "Memory",
    "MemoryAssertion",
    "MemoryContent",
    "MemoryDerivation",
    "MemoryMap",
    "MemoryMapStatus",
    "MemoryRevision",
    "MemoryRule",
    "MemorySchema",
    "MemoryStore",
    "Project",
    "ProjectRow",
    "Provenance",
    "RawCapture",
    "EvidenceLink",
    "LexicalPart",
    "LexicalStatistics",
    "LexicalTerm",
    "Relation",
    "ReplayRun",
    "StaffGrants",
    "TransformConfig",
    "WebhookDelivery",
    "WebhookSubscription",
    "DeliveryStatus",
    "RetentionChange",
    "RetentionClass",
]
