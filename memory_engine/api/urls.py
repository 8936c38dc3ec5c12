"""The v1 API router."""

from django.urls import path
from rest_framework.routers import DefaultRouter

from . import (
    agents,
    capabilities,
    consent,
    distillers,
    documents,
    embeddings,
    entities,
    erasure,
    feed,
    generations,
    links,
    memories,
    memory_map,
    memory_schema,
    replay,
    rules,
    search,
    timeline,
    webhooks,
)

router = DefaultRouter(trailing_slash=False)
router.register("memory-stores", memories.MemoryStoreViewSet, basename="memory-store")
router.register("memories", memories.MemoryViewSet, basename="memory")
router.register("memory-assertions", memories.MemoryAssertionViewSet, basename="memory-assertion")
router.register("generations", generations.GenerationViewSet, basename="generation")
router.register("documents", documents.DocumentViewSet, basename="document")
router.register("ingestion-rules", documents.IngestionRuleViewSet, basename="ingestion-rule")
router.register("agents", agents.AgentViewSet, basename="agent")
router.register("erasure-receipts", erasure.ErasureReceiptViewSet, basename="erasure-receipt")
router.register("transform-configs", replay.TransformConfigViewSet, basename="transform-config")
router.register("replay-runs", replay.ReplayRunViewSet, basename="replay-run")
router.register("webhooks", webhooks.WebhookViewSet, basename="webhook")
router.register("distillers", distillers.DistillerViewSet, basename="distiller")
router.register("links", links.EvidenceLinkViewSet, basename="evidence-link")
router.register("entities", entities.EntityViewSet, basename="entity")

urlpatterns = [
    path("embeddings", embeddings.EmbeddingsView.as_view(), name="embeddings"),
    path("capabilities", capabilities.CapabilitiesView.as_view(), name="capabilities"),
    path("erasure", erasure.ErasureView.as_view(), name="erasure"),
    path("consent/revoke", consent.ConsentRevokeView.as_view(), name="consent-revoke"),
    path("feed", feed.FeedView.as_view(), name="feed"),
    path("timeline", timeline.TimelineView.as_view(), name="timeline"),
    path("memory-schema", memory_schema.MemorySchemaView.as_view(), name="memory-schema"),
    path("memory-map", memory_map.MemoryMapView.as_view(), name="memory-map"),
    path("knowledge/search", search.KnowledgeSearchView.as_view(), name="knowledge-search"),
    path("agents/<str:agent_id>/tools/write_memory", agents.WriteMemoryToolView.as_view(),
         name="agent-tool-write-memory"),
    path("agents/<str:agent_id>/tools/forget_memory", agents.ForgetMemoryToolView.as_view(),
         name="agent-tool-forget-memory"),
    path("memory-stores/<str:store_id>/rules",
         rules.MemoryRuleViewSet.as_view({"get": "list", "post": "create"}), name="memory-rule-list"),
    path("memory-stores/<str:store_id>/rules/<str:pk>",
         rules.MemoryRuleViewSet.as_view({"get": "retrieve", "put": "update", "patch": "partial_update",
                                          "delete": "destroy"}), name="memory-rule-detail"),
    path("documents/<str:pk>/converter-callback", documents.ConverterCallbackView.as_view(),
         name="document-converter-callback"),
    path("subjects/<str:external_id>/memory-store", memories.SubjectMemoryStoreView.as_view(),
         name="subject-memory-store"),
    path("documents/<str:pk>/file", documents.DocumentFileView.as_view(), name="document-file"),
    *router.urls,
]
