"""The change feed read: entries after a cursor, in commit order, no gaps and no repeats.

Entries are ordered by ``(txid, seq)`` (see memory_engine.models.feed). A page only holds
entries whose transaction id is below the oldest transaction still running when the page is
read (``pg_snapshot_xmin(pg_current_snapshot())``, taken in the same statement): every such
transaction has finished, so every entry it wrote is visible now, and any entry committed later
has a larger ``txid`` than all of them. A reader that resumes after the last position it saw
therefore never skips a later commit and never sees an entry twice. The price is lag: one long
transaction anywhere on the server holds the horizon back until it ends (docs/feed.md).
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass

from django.db.models import Q, QuerySet
from django.db.models.expressions import RawSQL

from memory_engine.exceptions import FeedCursorInvalid
from memory_engine.models import FeedEntry, Project

#: Everything before the first entry.
FEED_START = (0, 0)
_CURSOR = re.compile(r"f1\.(\d{1,20})\.(\d{1,20})")
_BIGINT_MAX = 2**63 - 1
# xid8 fits a bigint (epoch << 32 | xid); the horizon is computed by the server per statement.
_VISIBILITY_HORIZON = RawSQL("pg_snapshot_xmin(pg_current_snapshot())::text::bigint", [])


def encode_feed_cursor(position: tuple[int, int]) -> str:
    """An opaque cursor for ``(txid, seq)``."""
    raw = f"f1.{position[0]}.{position[1]}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_feed_cursor(cursor: str) -> tuple[int, int]:
    """The position a cursor names; ``FeedCursorInvalid`` for anything this feed did not issue."""
    try:
        raw = base64.b64decode(cursor + "=" * (-len(cursor) % 4), altchars=b"-_", validate=True).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise FeedCursorInvalid(details={"after": cursor}) from None
    match = _CURSOR.fullmatch(raw)
    if match is None:
        raise FeedCursorInvalid(details={"after": cursor})
    txid, seq = int(match.group(1)), int(match.group(2))
    if txid > _BIGINT_MAX or seq > _BIGINT_MAX or encode_feed_cursor((txid, seq)) != cursor:
        raise FeedCursorInvalid(details={"after": cursor})
    return txid, seq


def feed_grant_filter(entries: QuerySet[FeedEntry], *, project: Project, principal: str) -> QuerySet[FeedEntry]:
    """The entries the caller may see. The one place access to feed entries is decided: today
    the caller's project; per-store and per-document grants plug in here."""
    return entries.filter(project=project)


@dataclass(frozen=True)
class FeedPage:
    entries: list[FeedEntry]
    next_cursor: str


def feed_page(*, project: Project, principal: str, after: str | None = None, limit: int = 100,
              exclude_generator: bool = False) -> FeedPage:
    """Up to ``limit`` entries after the cursor ``after`` (from the start when omitted), and the
    cursor to pass next time (the same one when nothing new is visible yet)."""
    position = decode_feed_cursor(after) if after else FEED_START
    entries = feed_grant_filter(FeedEntry.objects.all(), project=project, principal=principal)
    if exclude_generator:
        entries = entries.exclude(principal=principal)
    txid, seq = position
    rows = list(
        # txid >= the cursor's lets the (project, txid, seq) index bound the scan
        entries.filter(txid__gte=txid).filter(Q(txid__gt=txid) | Q(txid=txid, seq__gt=seq))
        .filter(txid__lt=_VISIBILITY_HORIZON)
        .order_by("txid", "seq")[:limit]
    )
    if rows:
        position = (rows[-1].txid, rows[-1].seq)
    return FeedPage(entries=rows, next_cursor=encode_feed_cursor(position))
