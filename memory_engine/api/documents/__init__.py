"""Documents and ingestion rules over HTTP: thin views over memory_engine.services.documents.

``views`` holds the document viewset (its capture actions in ``capture``, its retention actions
in ``retention``), the ingestion rules and the converter's signed URLs; ``serializers`` and
``filters`` what they read and answer.
"""

from __future__ import annotations

from .views import ConverterCallbackView, DocumentFileView, DocumentViewSet, IngestionRuleViewSet

__all__ = ["ConverterCallbackView", "DocumentFileView", "DocumentViewSet", "IngestionRuleViewSet"]
