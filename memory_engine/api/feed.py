"""``GET /api/v1/feed``: new live memories, active document versions and assertions in commit
order, after an opaque cursor (thin view over memory_engine.selectors.feed; docs/feed.md)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory_engine import strict
from memory_engine.exceptions import FeedCursorInvalid
from memory_engine.models import FeedEntry, FeedKind
from memory_engine.selectors.feed import feed_page

from .exceptions import ERRORS, error_responses
from .scoping import ProjectScopedMixin

FEED_MAX_LIMIT = 1000


class FeedQuerySerializer(strict.Serializer):
    also_known = frozenset({"project_id", "format"})  # a staff session's project; DRF's renderer switch

    after = serializers.CharField(required=False, allow_blank=True, max_length=200,
                                  help_text="A `next_cursor` from an earlier page; omit to start at the beginning.")
    limit = serializers.IntegerField(required=False, default=100, min_value=1, max_value=FEED_MAX_LIMIT)
    exclude_generator = serializers.BooleanField(required=False, default=False,
                                                 help_text="Leave out the changes the caller made.")


class FeedEntrySerializer(strict.ModelSerializer):
    kind = serializers.ChoiceField(choices=FeedKind.choices)
    id = serializers.CharField(source="object_id", help_text="The memory, document version or assertion id.")
    state = serializers.CharField(help_text="assertion: its outcome; document_version: active; memory: live.")
    principal = serializers.CharField(help_text="Who made the change (the assertion's principal, "
                                                "the version's captured_by).")

    class Meta:
        model = FeedEntry
        fields = ["kind", "id", "store_id", "document_id", "memory_id", "state", "principal", "created_at"]
        read_only_fields = fields


class FeedPageSerializer(strict.Serializer):
    entries = FeedEntrySerializer(many=True)
    next_cursor = serializers.CharField(help_text="Pass as `after` to read on; unchanged when nothing is new.")


class FeedView(ProjectScopedMixin, APIView):
    """Changes of the caller's project in commit order: every committed change exactly once."""

    read_only_key_allowed = True
    session_permissions: list[str] | None = ["view_memory", "view_memoryassertion", "view_document"]

    @extend_schema(
        parameters=[FeedQuerySerializer],
        responses={200: FeedPageSerializer, **error_responses(FeedCursorInvalid), **ERRORS},
    )
    def get(self, request: Request) -> Response:
        query = FeedQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        data = query.validated_data
        page = feed_page(project=self.project, caller=self.caller, after=data.get("after") or None,
                         limit=data["limit"], exclude_generator=data["exclude_generator"])
        return Response({"entries": FeedEntrySerializer(page.entries, many=True).data,
                         "next_cursor": page.next_cursor})


__all__ = ["FeedView"]
