"""Webhook subscriptions over HTTP (docs/webhooks.md): thin views over memory_engine.services.webhooks."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from memory_engine import strict
from memory_engine.exceptions import GrantRequired, URLNotAllowed
from memory_engine.models import FeedKind, WebhookDelivery, WebhookSubscription
from memory_engine.policy import unrestricted_only
from memory_engine.webhooks import webhook_create, webhook_rotate_secret

from .exceptions import ERRORS, error_responses
from .fields import FeedCursorField
from .scoping import ProjectScopedMixin


class WebhookDeliverySerializer(strict.ModelSerializer):
    cursor_from = FeedCursorField("cursor_from", help_text="The feed cursor before the batch.")
    cursor_to = FeedCursorField("cursor_to", help_text="The feed cursor after the batch.")

    class Meta:
        model = WebhookDelivery
        fields = ["id", "status", "attempt", "http_status", "event_count", "cursor_from", "cursor_to", "error",
                  "next_retry_at", "created_at"]
        read_only_fields = fields


class WebhookSerializer(strict.ModelSerializer):
    event_kinds = serializers.ListField(child=serializers.ChoiceField(choices=FeedKind.choices), required=False,
                                        help_text="Feed entry kinds to send; empty or omitted: all.")
    cursor = FeedCursorField(help_text="The feed cursor delivered up to.")

    class Meta:
        model = WebhookSubscription
        fields = ["id", "url", "event_kinds", "active", "cursor", "failures", "next_attempt_at", "created_by",
                  "created_at"]
        read_only_fields = ["id", "active", "cursor", "failures", "next_attempt_at", "created_by", "created_at"]


class WebhookSecretSerializer(strict.Serializer):
    id = serializers.CharField()
    secret = serializers.CharField(help_text="The new signing secret; shown in this answer only.")


class WebhookCreatedSerializer(WebhookSerializer):
    secret = serializers.CharField(read_only=True, help_text="The signing secret; shown in this answer only.")

    class Meta(WebhookSerializer.Meta):
        fields = [*WebhookSerializer.Meta.fields, "secret"]


@extend_schema_view(
    list=extend_schema(responses={200: WebhookSerializer(many=True), **ERRORS}),
    create=extend_schema(request=WebhookSerializer,
                         responses={201: WebhookCreatedSerializer, **error_responses(URLNotAllowed), **ERRORS}),
    retrieve=extend_schema(responses={200: WebhookSerializer, **ERRORS}),
    destroy=extend_schema(responses={204: None, **ERRORS}),
    deliveries=extend_schema(responses={200: WebhookDeliverySerializer(many=True), **ERRORS}),
)
class WebhookViewSet(ProjectScopedMixin, mixins.CreateModelMixin, mixins.ListModelMixin,
                     mixins.RetrieveModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet):
    """The project's webhook subscriptions: the feed POSTed to a URL (signed, retried, recorded)."""

    queryset = WebhookSubscription.objects.none()  # for the schema; get_queryset scopes by project
    serializer_class = WebhookSerializer

    def get_queryset(self) -> QuerySet[WebhookSubscription]:
        subscriptions = WebhookSubscription.objects.filter(project=self.project).order_by("-created_at", "id")
        # they carry the whole project's feed: for a caller narrowed by grants they do not exist, and
        # creating one answers 403 GRANT_REQUIRED (webhook_create)
        return unrestricted_only(self.caller, subscriptions)

    def perform_create(self, serializer: Any) -> None:
        data = serializer.validated_data
        serializer.instance = webhook_create(project=self.project, url=data["url"],
                                             event_kinds=data.get("event_kinds"), caller=self.caller)

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        response = super().create(request, *args, **kwargs)
        response.data = WebhookCreatedSerializer(response.data.serializer.instance).data
        return response

    @extend_schema(request=None, responses={200: WebhookSecretSerializer, **error_responses(GrantRequired),
                                            **ERRORS})
    @action(detail=True, methods=["post"], url_path="rotate-secret",
            session_permissions=["change_webhooksubscription"])
    def rotate_secret(self, request: Request, pk: str | None = None) -> Response:
        """A new signing secret, shown in this answer only; the next delivery is signed with it."""
        subscription = self.get_object()
        return Response({"id": subscription.pk, "secret": webhook_rotate_secret(subscription=subscription)})

    @action(detail=True, methods=["get"], session_permissions=["view_webhooksubscription"])
    def deliveries(self, request: Request, pk: str | None = None) -> Response:
        """The subscription's deliveries, newest first."""
        subscription = self.get_object()
        page = self.paginate_queryset(subscription.deliveries.order_by("-created_at", "-id"))
        return self.get_paginated_response(WebhookDeliverySerializer(page, many=True).data)


__all__ = ["WebhookViewSet"]
