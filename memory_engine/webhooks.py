"""Webhooks on top of the change feed (docs/webhooks.md).

A subscription follows its project's feed from its own cursor. :func:`webhook_deliver` reads the
next page after the cursor, POSTs the entries of the subscribed kinds as one JSON batch signed
by the one outbound signer (``X-Memory-Engine-Signature`` over ``timestamp + "." + body``, with
``X-Memory-Engine-Timestamp``) through the outbound guard, and records the delivery. The cursor
moves only when the receiver answers 2xx; after a failure the same batch is tried again after a
backoff (``WEBHOOK_RETRY_SECONDS`` doubling up to ``WEBHOOK_RETRY_MAX_SECONDS``). The
subscription row is locked for the attempt, so two workers never send the same batch at once.
Delivery is at least once: a receiver that answered 2xx but whose acknowledgement was lost (the
worker died before commit) sees the batch again, with the same ``X-Memory-Engine-Delivery-From``
cursor; entries carry ids to deduplicate on.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Sequence
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from memory_engine.conf import engine_settings
from memory_engine.db import across_projects
from memory_engine.exceptions import MemoryEngineError, PrincipalInactive, ValidationFailed
from memory_engine.guards import check_outbound_url
from memory_engine.models import DeliveryStatus, FeedEntry, FeedKind, Project, WebhookDelivery, WebhookSubscription
from memory_engine.policy import Principal, principal_from_reference, require_unrestricted
from memory_engine.providers.http import ProviderHTTPError, post_once
from memory_engine.providers.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, sign_body
from memory_engine.selectors.feed import decode_position, encode_position, feed_read, shown_cursor

__all__ = ["webhook_create", "webhook_deliver", "webhook_rotate_secret", "webhooks_dispatch", "entry_payload"]

DELIVERY_HEADER = "X-Memory-Engine-Delivery"
CURSOR_HEADER = "X-Memory-Engine-Delivery-From"
#: Batches one dispatch sends per subscription at most (the rest waits for the next run).
MAX_BATCHES_PER_RUN = 10


def validate_event_kinds(value: Sequence[str] | None) -> list[str]:
    kinds = list(dict.fromkeys(value or []))
    if unknown := [k for k in kinds if k not in FeedKind.values]:
        raise ValidationFailed(f"Unknown event kinds: {', '.join(map(str, unknown))}.",
                               details={"field": "event_kinds", "allowed": list(FeedKind.values)})
    return kinds


def webhook_create(*, project: Project, url: str, event_kinds: Sequence[str] | None = None,
                   caller: Principal) -> WebhookSubscription:
    """A subscription from now on (its cursor starts at the feed's current end), delivered as
    ``caller`` (checked again at every delivery). The feed is project-wide: a caller narrowed by
    grants may not follow it (403 GRANT_REQUIRED). The URL must pass the outbound guard
    (URL_NOT_ALLOWED; private hosts only through OUTBOUND_ALLOW); the secret is generated here
    and shown to the creator once."""
    require_unrestricted(caller)
    check_outbound_url(url)
    position = feed_read(project=project, caller=caller, limit=1).position
    while True:  # the end of the feed now: the subscription is for what happens next
        page = feed_read(project=project, caller=caller, position=position, limit=1000)
        if page.position == position:
            break
        position = page.position
    return WebhookSubscription.objects.create(
        project=project, url=url, event_kinds=validate_event_kinds(event_kinds), cursor=encode_position(position),
        secret=secrets.token_urlsafe(32), created_by=caller.label[:200], acting_as=caller.reference[:200])


def webhook_rotate_secret(*, subscription: WebhookSubscription) -> str:
    """A new signing secret for ``subscription``, returned once (nothing shows it again); the
    next delivery is signed with it."""
    secret = secrets.token_urlsafe(32)
    WebhookSubscription.objects.filter(pk=subscription.pk).update(secret=secret)
    subscription.secret = secret
    return secret


def entry_payload(entry: FeedEntry) -> dict[str, object]:
    """One feed entry as sent: the shape of ``GET /api/v1/feed``'s entries."""
    return {"kind": entry.kind, "id": entry.object_id, "store_id": entry.store_id,
            "document_id": entry.document_id, "memory_id": entry.memory_id, "state": entry.state,
            "principal": entry.principal, "created_at": entry.created_at.isoformat()}


def _backoff(failures: int) -> timedelta:
    seconds = engine_settings.WEBHOOK_RETRY_SECONDS * 2 ** max(0, failures - 1)
    return timedelta(seconds=min(seconds, engine_settings.WEBHOOK_RETRY_MAX_SECONDS))


@transaction.atomic
def webhook_deliver(*, subscription_id: str, project_id: str | None = None) -> WebhookDelivery | None:
    """Send the next batch of one subscription if it is due; the recorded delivery, or None
    when there was nothing to send (the cursor still moves past entries of other kinds), the
    subscription is inactive, not due, or being delivered by another worker. With its
    ``project_id`` (the dispatcher's), every statement names the project (docs/scaling.md)."""
    subscriptions = WebhookSubscription.objects.filter(pk=subscription_id, active=True)
    if project_id is not None:
        subscriptions = subscriptions.filter(project_id=project_id)
    # the lock takes the subscription's row only (the project is a reference table)
    subscription = (subscriptions.select_for_update(skip_locked=True, of=("self",))
                    .select_related("project").first())
    now = timezone.now()
    if subscription is None or (subscription.next_attempt_at and subscription.next_attempt_at > now):
        return None
    try:  # the feed as its creator sees it now (memory_engine.policy)
        caller = principal_from_reference(subscription.acting_as, project_id=subscription.project_id)
    except PrincipalInactive as exc:
        subscription.active = False
        subscription.save(update_fields=["active"])
        return WebhookDelivery.objects.create(subscription=subscription, project_id=subscription.project_id,
                                              attempt=subscription.failures + 1,
                                              status=DeliveryStatus.FAILED, error=f"{exc.code}: {exc.message}",
                                              event_count=0,
                                              cursor_from=subscription.cursor, cursor_to=subscription.cursor)
    # the position stays on the server; the receiver sees it sealed, as a feed reader would
    page = feed_read(project=subscription.project, caller=caller, position=decode_position(subscription.cursor),
                     limit=engine_settings.WEBHOOK_BATCH_SIZE)
    next_cursor = encode_position(page.position)
    entries = [e for e in page.entries if not subscription.event_kinds or e.kind in subscription.event_kinds]
    if not entries:
        if page.position != decode_position(subscription.cursor):
            subscription.cursor = next_cursor
            subscription.save(update_fields=["cursor"])
        return None
    delivery = WebhookDelivery(subscription=subscription, project_id=subscription.project_id,
                               attempt=subscription.failures + 1,
                               event_count=len(entries), cursor_from=subscription.cursor,
                               cursor_to=next_cursor)
    project_id = subscription.project_id
    body = json.dumps({"subscription_id": subscription.pk, "cursor": shown_cursor(next_cursor, project_id=project_id),
                       "events": [entry_payload(e) for e in entries]}).encode()
    timestamp = str(int(time.time()))
    headers = {SIGNATURE_HEADER: sign_body(subscription.secret, body, timestamp=timestamp),
               TIMESTAMP_HEADER: timestamp, DELIVERY_HEADER: delivery.pk,
               CURSOR_HEADER: shown_cursor(subscription.cursor, project_id=project_id)}
    try:
        delivery.http_status = post_once(subscription.url, content=body, headers=headers,
                                         timeout=engine_settings.WEBHOOK_TIMEOUT_SECONDS)
    except (ProviderHTTPError, MemoryEngineError) as exc:  # connection failed, timed out, URL_NOT_ALLOWED
        delivery.error = str(getattr(exc, "message", exc))[:1000]
    if delivery.http_status is not None and 200 <= delivery.http_status < 300:
        delivery.status = DeliveryStatus.DELIVERED
        subscription.cursor, subscription.failures, subscription.next_attempt_at = next_cursor, 0, None
    else:
        delivery.status = DeliveryStatus.FAILED
        if delivery.http_status is not None:
            delivery.error = delivery.error or f"answered HTTP {delivery.http_status}"
        subscription.failures += 1
        subscription.next_attempt_at = delivery.next_retry_at = now + _backoff(subscription.failures)
    delivery.save()
    subscription.save(update_fields=["cursor", "failures", "next_attempt_at"])
    return delivery


def webhooks_dispatch() -> int:
    """The Schedule's entry point: every due subscription sends what the feed holds for it (up to
    MAX_BATCHES_PER_RUN batches each). Returns the number of deliveries made."""
    now = timezone.now()
    due = WebhookSubscription.objects.filter(active=True).exclude(next_attempt_at__gt=now)
    with across_projects():  # every project's subscriptions; each delivery is its project's
        subscriptions = list(due.values_list("project_id", "pk"))
    made = 0
    for project_id, subscription_id in subscriptions:
        for _ in range(MAX_BATCHES_PER_RUN):
            delivery = webhook_deliver(subscription_id=subscription_id, project_id=project_id)
            if delivery is None:
                break
            made += 1
            if delivery.status != DeliveryStatus.DELIVERED:
                break
    return made
