"""The v1 API router."""

from django.urls import path
from rest_framework.routers import DefaultRouter

from . import views

router = DefaultRouter(trailing_slash=False)
router.register("memory-stores", views.MemoryStoreViewSet, basename="memory-store")
router.register("memories", views.MemoryViewSet, basename="memory")
router.register("memory-assertions", views.MemoryAssertionViewSet, basename="memory-assertion")

urlpatterns = [
    path("embeddings", views.EmbeddingsView.as_view(), name="embeddings"),
    *router.urls,
]
