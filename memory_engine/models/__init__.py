"""All memory_engine models (app label ``memory_engine``)."""

from .agents import Agent, Generation
from .documents import Chunk, Document, DocumentVersion, IngestionRule, RawCapture
from .feed import FeedEntry, FeedKind
from .links import EvidenceLink
from .memories import Memory, MemoryAssertion, MemoryContent, MemoryRevision, MemorySchema, MemoryStore
from .replay import ReplayRun, TransformConfig
from .retention import ErasureReceipt, RetentionClass
from .rules import MemoryRule
from .tenancy import ApiKey, Project

__all__ = [
    "Agent",
    "ApiKey",
    "Chunk",
    "Document",
    "DocumentVersion",
    "ErasureReceipt",
    "FeedEntry",
    "FeedKind",
    "Generation",
    "IngestionRule",
    "Memory",
    "MemoryAssertion",
    "MemoryContent",
    "MemoryRevision",
    "MemoryRule",
    "MemorySchema",
    "MemoryStore",
    "Project",
    "RawCapture",
    "EvidenceLink",
    "ReplayRun",
    "TransformConfig",
    "RetentionClass",
]
