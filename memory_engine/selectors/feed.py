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

from django.db.models import BooleanField, ExpressionWrapper, Q
from django.db.models.expressions import RawSQL

from memory_engine.exceptions import FeedCursorInvalid
from memory_engine.models import FeedEntry, Project
from memory_engine.policy import SEARCH, Principal, reach, tag_filter

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


#: A page reads at most this many entries per entry it returns when the caller's grants hide
#: entries; the cursor still moves past every entry read (shown or not).
SCAN_FACTOR = 10


@dataclass(frozen=True)
class FeedPage:
    entries: list[FeedEntry]
    next_cursor: str


def feed_page(*, project: Project, caller: Principal, after: str | None = None, limit: int = 100,
              exclude_generator: bool = False) -> FeedPage:
    """Up to ``limit`` entries after the cursor ``after`` (from the start when omitted) that
    ``caller`` may see (memory_engine.policy: an entry goes with its store or its document), and
    the cursor to pass next time (the same one when nothing new is visible yet). Entries the
    caller may not see, and with ``exclude_generator`` those it made, are left out and the cursor
    moves past them: a narrowed reader never stalls behind a run of other teams' changes."""
    position = decode_feed_cursor(after) if after else FEED_START
    txid, seq = position
    entries = (
        # txid >= the cursor's lets the (project, txid, seq) index bound the scan
        FeedEntry.objects.filter(project=project, txid__gte=txid).filter(Q(txid__gt=txid) | Q(txid=txid, seq__gt=seq))
        .filter(txid__lt=_VISIBILITY_HORIZON).order_by("txid", "seq")
    )
    tags = reach(caller, SEARCH)
    if tags is None and not exclude_generator:
        rows = list(entries[:limit])
        if rows:
            position = (rows[-1].txid, rows[-1].seq)
        return FeedPage(entries=rows, next_cursor=encode_feed_cursor(position))
    shown = Q() if tags is None else tag_filter(FeedEntry, tags)
    if exclude_generator:
        shown &= ~Q(principal=caller.label)
    scanned = entries.annotate(shown=ExpressionWrapper(shown, output_field=BooleanField()))[:limit * SCAN_FACTOR]
    rows = []
    for entry in scanned:
        position = (entry.txid, entry.seq)
        if entry.shown:
            rows.append(entry)
            if len(rows) == limit:
                break
    return FeedPage(entries=rows, next_cursor=encode_feed_cursor(position))
