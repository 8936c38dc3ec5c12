"""Memory stores, memories and the assertion ledger over HTTP: thin views over the write funnel.

``views`` holds the store, memory and ledger viewsets and the subject's store; ``serializers``
what they read and answer (and the answer of a write, which the agent tools' write answers too);
``filters`` their list filters.
"""

from __future__ import annotations

from .serializers import (
    WRITE_RESPONSES,
    MemoryAssertionSerializer,
    MemoryBatchItemSerializer,
    MemoryFullSerializer,
    write_response,
)
from .views import MemoryAssertionViewSet, MemoryStoreViewSet, MemoryViewSet, SubjectMemoryStoreView

__all__ = [
    "WRITE_RESPONSES",
    "MemoryAssertionSerializer",
    "MemoryAssertionViewSet",
    "MemoryBatchItemSerializer",
    "MemoryFullSerializer",
    "MemoryStoreViewSet",
    "MemoryViewSet",
    "SubjectMemoryStoreView",
    "write_response",
]
