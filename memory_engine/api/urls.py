"""The v1 API router."""

from django.urls import path
from rest_framework.routers import DefaultRouter

from . import generations, rules, views

router = DefaultRouter(trailing_slash=False)
router.register("memory-stores", views.MemoryStoreViewSet, basename="memory-store")
router.register("memories", views.MemoryViewSet, basename="memory")
router.register("memory-assertions", views.MemoryAssertionViewSet, basename="memory-assertion")
router.register("generations", generations.GenerationViewSet, basename="generation")

urlpatterns = [
    path("embeddings", views.EmbeddingsView.as_view(), name="embeddings"),
    path("agents/<str:agent_id>/tools/write_memory", generations.WriteMemoryToolView.as_view(),
         name="agent-tool-write-memory"),
    path("memory-stores/<str:store_id>/rules",
         rules.MemoryRuleViewSet.as_view({"get": "list", "post": "create"}), name="memory-rule-list"),
    path("memory-stores/<str:store_id>/rules/<str:pk>",
         rules.MemoryRuleViewSet.as_view({"get": "retrieve", "put": "update", "patch": "partial_update",
                                          "delete": "destroy"}), name="memory-rule-detail"),
    *router.urls,
]
