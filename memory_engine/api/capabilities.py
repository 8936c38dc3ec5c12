"""``GET /api/v1/capabilities``: what this deployment's search can do, so a client knows before
it asks (and what a ``degraded`` answer is measured against)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory_engine import strict
from memory_engine.conf import engine_settings
from memory_engine.lexical import lexical_status
from memory_engine.providers.embeddings import get_embedding_provider
from memory_engine.providers.rerank import get_rerank_provider
from memory_engine.selectors.search import Degraded

from .exceptions import ERRORS
from .scoping import ProjectScopedMixin


class CapabilitiesSerializer(strict.Serializer):
    embeddings_configured = serializers.BooleanField(help_text="A query can be embedded (vector channel).")
    embedding_model = serializers.CharField(allow_null=True)
    embedding_dimensions = serializers.IntegerField(help_text="The vector columns' dimension.")
    lexical_backend = serializers.ChoiceField(choices=["bm25", "tsvector"],
                                              help_text="bm25: pg_textsearch; tsvector: the fallback.")
    rerank_configured = serializers.BooleanField(help_text="A rerank provider orders the fused top.")
    rerank_model = serializers.CharField(allow_null=True)
    dedupe_documents = serializers.BooleanField(help_text="The search default (SEARCH_DEDUPE_DOCUMENTS).")
    mmr = serializers.BooleanField(help_text="The search default (SEARCH_MMR).")
    authority_weight = serializers.FloatField(help_text="The authority prior's weight (SEARCH_AUTHORITY_WEIGHT).")
    boosts = serializers.BooleanField(help_text="Recency and corroboration boosts (SEARCH_BOOSTS).")
    degraded_reasons = serializers.ListField(child=serializers.CharField(),
                                             help_text="Every reason a `degraded` list may name.")


class CapabilitiesView(ProjectScopedMixin, APIView):
    """What the deployment's search offers: channels, models, rerank, stage defaults."""

    read_only_key_allowed = True
    session_permissions: list[str] | None = []  # reads no rows

    @extend_schema(responses={200: CapabilitiesSerializer, **ERRORS})
    def get(self, request: Request) -> Response:
        self.project  # noqa: B018  (resolves and checks the project for staff sessions)
        embedder = get_embedding_provider()
        reranker = get_rerank_provider()
        return Response(CapabilitiesSerializer({
            "embeddings_configured": embedder is not None,
            "embedding_model": embedder.model_name if embedder is not None else None,
            "embedding_dimensions": engine_settings.EMBEDDING["DIMENSIONS"],
            "lexical_backend": lexical_status().backend,
            "rerank_configured": reranker is not None,
            "rerank_model": (reranker.model_name or None) if reranker is not None else None,
            "dedupe_documents": engine_settings.SEARCH_DEDUPE_DOCUMENTS,
            "mmr": engine_settings.SEARCH_MMR,
            "authority_weight": engine_settings.SEARCH_AUTHORITY_WEIGHT,
            "boosts": engine_settings.SEARCH_BOOSTS,
            "degraded_reasons": list(Degraded.ALL),
        }).data)
