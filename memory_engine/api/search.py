"""``POST /api/v1/knowledge/search``: the one search function over HTTP."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory_engine import strict
from memory_engine.conf import SEARCH_KNOBS, Knob
from memory_engine.exceptions import AgentNotFound, ValidationFailed
from memory_engine.models import Agent, EntityKind, Lineage, Provenance
from memory_engine.policy import SEARCH, get_visible_or_404, reach, require_generation_access
from memory_engine.selectors.search import (
    DOCUMENT,
    EVIDENCE_GRADES,
    MEMORY,
    Actor,
    Degraded,
    SearchRequest,
    SearchResult,
    knowledge_search,
)

from .exceptions import ERRORS, ErrorSerializer
from .fields import TagFilterField
from .scoping import ProjectScopedMixin

#: A staff session searching reads memories and documents (the admin playground asks the same).
SEARCH_PERMISSIONS = ["view_memory", "view_document"]


class _KnobRange:
    """A knob's range shown in the schema, not checked by the field: the search checks it and
    answers each knob with its own code (LIMIT_INVALID, RRF_K_INVALID…), not VALIDATION_ERROR."""

    min_value: Any
    max_value: Any

    def __init__(self, *, knob: Knob, **options: Any) -> None:
        super().__init__(**options)
        self.min_value = None if knob.low_open else knob.low  # OpenAPI 3.0 has no bare exclusive minimum
        self.max_value = knob.high


class IntegerKnobField(_KnobRange, serializers.IntegerField):
    pass


class FloatKnobField(_KnobRange, serializers.FloatField):
    pass


def knob_field(name: str) -> serializers.Field:
    """A search knob's request field, derived from its declaration (memory_engine.conf.SEARCH_KNOBS):
    its type, null where a request may leave it unset, its default, its range and its schema line."""
    knob = SEARCH_KNOBS[name]
    options: dict[str, Any] = {"required": False, "help_text": knob.help_text}
    options.update({"allow_null": True, "default": None} if knob.nullable else {"default": knob.default})
    if knob.kind is bool:
        return serializers.BooleanField(**options)
    return (IntegerKnobField if knob.kind is int else FloatKnobField)(knob=knob, **options)


class KnowledgeSearchRequestSerializer(strict.Serializer):
    query = serializers.CharField(required=False, allow_null=True, allow_blank=True, trim_whitespace=False,
                                  help_text="Natural-language query. Without one the read is deterministic.")
    memory_store_ids = serializers.ListField(child=serializers.CharField(max_length=40), required=False,
                                             max_length=1000)
    document_ids = serializers.ListField(child=serializers.CharField(max_length=40), required=False,
                                         max_length=1000)
    document_paths = serializers.ListField(child=serializers.CharField(max_length=1000), required=False,
                                           max_length=1000, help_text="Path prefixes.")
    tags = TagFilterField(required=False, allow_null=True,
                           help_text="jsonb containment on the memory's, its store's or the document's tags.")
    min_similarity = knob_field("min_similarity")
    min_relevance = knob_field("min_relevance")
    rrf_k = knob_field("rrf_k")
    recency_half_life_days = knob_field("recency_half_life_days")
    limit = knob_field("limit")
    vector_weight = knob_field("vector_weight")
    lexical_weight = knob_field("lexical_weight")
    facet = serializers.CharField(required=False, allow_null=True, allow_blank=True, trim_whitespace=False,
                                  help_text="That facet's memories and the cross-cutting ones (none: all).")
    provenance = serializers.ListField(
        child=serializers.ChoiceField(choices=Provenance.choices), required=False, allow_null=True, max_length=3,
        help_text="Only memories, and chunks of document versions, of these provenances (none: any).")
    lineage = serializers.ListField(
        child=serializers.ChoiceField(choices=Lineage.choices), required=False, allow_null=True, max_length=3,
        help_text="Only memories, and chunks of document versions, of these lineages (none: any).")
    entity_ids = serializers.ListField(
        child=serializers.CharField(max_length=40), required=False, max_length=100,
        help_text="Only memories and chunks that mention one of these entities (docs/entities.md); alone, every "
                  "store and document you may search.")
    kinds = serializers.ListField(
        child=serializers.ChoiceField(choices=EntityKind.choices), required=False, allow_null=True,
        max_length=len(EntityKind.choices),
        help_text="Entity kinds (not a memory's own `kind`): only memories and chunks that mention an entity of one "
                  "of these kinds (docs/entities.md); with entity_ids, both hold; alone, every store and document you "
                  "may search.")
    agent_id = serializers.CharField(required=False, allow_null=True, max_length=40,
                                     help_text="Recall as this agent: its own store joins the memory scope.")
    subject = serializers.CharField(required=False, allow_null=True, allow_blank=True, trim_whitespace=False,
                                    help_text="With agent_id: the end user's external id; their store joins.")
    dedupe_documents = knob_field("dedupe_documents")
    mmr = knob_field("mmr")
    include_deprecated = serializers.BooleanField(required=False, default=False,
                                                  help_text="Search deprecated documents too.")
    channels = serializers.ListField(
        child=serializers.ChoiceField(choices=["vector", "lexical"]), required=False, min_length=1, max_length=2,
        help_text="The ranked channels to run (default both): one alone for a lexical-only or vector-only search.")
    generation = serializers.CharField(required=False, allow_null=True, max_length=40,
                                       help_text="A staged generation (replay run id): search its chunks instead "
                                                 "of the live ones. Staff sessions only.")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("subject") is not None and not attrs.get("agent_id"):
            raise ValidationFailed("`subject` recalls as an agent: send `agent_id` too.",
                                   details={"field": "agent_id"})
        return attrs


class SearchRanksSerializer(strict.Serializer):
    vector = serializers.IntegerField(allow_null=True)
    lexical = serializers.IntegerField(allow_null=True)
    graph = serializers.IntegerField(required=False,
                                     help_text="The graph channel's rank, present when it ranked the hit "
                                               "(SEARCH_GRAPH_WEIGHT > 0, docs/entities.md).")
    # A declared field leaves the class (DRF's metaclass collects it), so DRF's own ``context``
    # stays; the stubs see the class attribute.
    context = serializers.IntegerField(required=False,  # type: ignore[assignment]
                                       help_text="For a conversation turn next to a top hit: the best rank among "
                                                 "the hits it neighbours (SEARCH_CONTEXT_TURNS, docs/retrieval.md).")


class SearchHitSerializer(strict.Serializer):
    # The API names the hit's origin ``source``; on a serializer field that name is also DRF's
    # ``Field.source`` attribute, which the stubs type as a string.
    source = serializers.ChoiceField(choices=[DOCUMENT, MEMORY])  # type: ignore[assignment]
    id = serializers.CharField()
    text = serializers.CharField()
    score = serializers.FloatField(help_text="Fused RRF value; comparable only inside one response.")
    similarity_score = serializers.FloatField(allow_null=True, help_text="Raw cosine similarity.")
    document_id = serializers.CharField(allow_null=True)
    document_path = serializers.CharField(allow_null=True)
    document_title = serializers.CharField(allow_null=True)
    page = serializers.IntegerField(allow_null=True)
    chunk_index = serializers.IntegerField(allow_null=True)
    memory_store_id = serializers.CharField(allow_null=True)
    memory_store_name = serializers.CharField(allow_null=True)
    tags = serializers.DictField()
    created_at = serializers.DateTimeField(allow_null=True)
    ranks = SearchRanksSerializer()
    lexical_score = serializers.FloatField(allow_null=True,
                                           help_text="BM25 score of the lexical channel; null when it did not find it.")
    authority = serializers.FloatField(
        help_text="The source's authority prior in [0, 1]: a chunk's from its version's capture fields, a memory's "
                  "confidence.")
    content_preview = serializers.CharField(
        help_text="The text, or its head when longer than INLINE_THRESHOLD_BYTES (UTF-8 bytes).")
    has_full_body = serializers.BooleanField(
        help_text="The text is longer than the preview: GET /memories/{id}/open returns it whole.")
    tier = serializers.ChoiceField(choices=["user", "user_for_agent", "agent", "institutional"], allow_null=True,
                                   help_text="A memory's tier (null for a document chunk).")
    title = serializers.CharField(allow_null=True, allow_blank=True, help_text="A memory's title.")
    provenance = serializers.ChoiceField(choices=Provenance.choices, allow_null=True,
                                         help_text="A memory's, or a chunk's version's (docs/memory.md).")
    lineage = serializers.ChoiceField(choices=Lineage.choices, allow_null=True,
                                      help_text="A memory's, or a chunk's version's (its source_class).")
    relevance = serializers.FloatField(
        allow_null=True,
        help_text="How surely the hit bears on the query, in [0, 1] (docs/retrieval.md, Relevance); null for a "
                  "read without a query or without a query vector.")
    entity_ids = serializers.ListField(child=serializers.CharField(),
                                       help_text="The entities the memory or chunk mentions (GET /entities/{id}).")
    relevant = serializers.BooleanField(
        help_text="relevance reaches the request's min_relevance, else the SEARCH_MIN_RELEVANCE setting (true "
                  "when there is no relevance to judge). Injection and the search_knowledge tool hand on only "
                  "relevant hits.")


class SearchResultSerializer(strict.Serializer):
    results = SearchHitSerializer(many=True)
    degraded = serializers.ListField(child=serializers.ChoiceField(choices=list(Degraded.ALL)),
                                     help_text="Why the answer is less than the deployment offers "
                                               "(docs/retrieval.md, Degrading).")
    lexical_backend = serializers.ChoiceField(
        choices=["bm25", "tsvector"], allow_null=True,
        help_text="bm25: pg_textsearch BM25 index; tsvector: the fallback where the database lacks it; "
                  "null when the lexical channel did not run.")
    evidence = serializers.ChoiceField(
        choices=list(EVIDENCE_GRADES),
        help_text="none: no hit is relevant; weak: relevant hits, the first of them not a close match (say you "
                  "do not know unless the passages answer it); strong: the first relevant hit is a close match.")
    withheld = serializers.IntegerField(
        help_text="How many candidates (memories and document chunks) were kept out because their text reads as "
                  "instructions to an AI; they stay stored (docs/security.md, Instruction guard).")


def search_response(result: SearchResult) -> Response:
    """The answer plus a Server-Timing header (query embedding and database time, ms)."""
    headers: dict[str, str] = {}
    if result.timings:
        headers["Server-Timing"] = ", ".join(
            f"{name.removesuffix('_ms')};dur={value:.2f}" for name, value in result.timings.items()
        )
    return Response(SearchResultSerializer(result.as_dict()).data, headers=headers)


def search_arguments(data: dict[str, Any]) -> dict[str, Any]:
    """The validated request as SearchRequest's fields (and ``agent_id``, ``subject``): unset knobs
    and an empty query are left to its defaults."""
    args = {key: value for key, value in data.items() if value is not None}
    if args.get("query") == "":
        args.pop("query")
    if "channels" in args:
        args["channels"] = tuple(dict.fromkeys(args["channels"]))
    return args


class KnowledgeSearchView(ProjectScopedMixin, APIView):
    """Hybrid search over your memories and documents (vector + full text, fused by RRF)."""

    read_only_key_allowed = True
    session_permissions = SEARCH_PERMISSIONS
    replica_search = True

    @extend_schema(
        request=KnowledgeSearchRequestSerializer,
        responses={200: SearchResultSerializer,
                   503: OpenApiResponse(ErrorSerializer, description="No embedding provider configured"),
                   **ERRORS},
    )
    def post(self, request: Request) -> Response:
        serializer = KnowledgeSearchRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        args = search_arguments(serializer.validated_data)
        agent_id, subject = args.pop("agent_id", None), args.pop("subject", None)
        if args.get("generation") is not None:
            require_generation_access(self.caller)
        if agent_id:
            agent = get_visible_or_404(self.caller, Agent.objects.filter(project=self.project), agent_id,
                                       error=AgentNotFound, field="agent_id")
            args["actor"] = Actor(agent=agent, subject=subject)
        result = knowledge_search(SearchRequest(project=self.project, access_tags=reach(self.caller, SEARCH), **args))
        return search_response(result)
