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
import hashlib
import hmac
import re
import struct
from dataclasses import dataclass

from django.conf import settings
from django.db.models import BooleanField, ExpressionWrapper, Q
from django.db.models.expressions import RawSQL

from memory_engine.exceptions import FeedCursorInvalid
from memory_engine.models import FeedEntry, Project
from memory_engine.policy import SEARCH, Principal, reach, tag_filter

#: Everything before the first entry.
FEED_START = (0, 0)
#: The earlier, readable cursors (base64 of ``f1.<txid>.<seq>``): still read, no longer issued.
_CURSOR = re.compile(r"f1\.(\d{1,20})\.(\d{1,20})")
#: Cursors issued now: this prefix, then base64 of a synthetic IV and the sealed position.
_CURSOR_PREFIX = "c2"
_IV_BYTES = 12
_BIGINT_MAX = 2**63 - 1
# xid8 fits a bigint (epoch << 32 | xid); the horizon is computed by the server per statement.
_VISIBILITY_HORIZON = RawSQL("pg_snapshot_xmin(pg_current_snapshot())::text::bigint", [])


def _cursor_key(project_id: str) -> bytes:
    """The project's cursor key, derived from ``SECRET_KEY``: one project's cursors mean nothing
    under another's key."""
    secret = hashlib.sha256(f"memory_engine.feed-cursor:{settings.SECRET_KEY}".encode()).digest()
    return hmac.new(secret, project_id.encode(), hashlib.sha256).digest()


def _prf(key: bytes, label: bytes, data: bytes, size: int) -> bytes:
    return hmac.new(key, label + data, hashlib.sha256).digest()[:size]


def encode_feed_cursor(position: tuple[int, int], *, project_id: str) -> str:
    """An opaque cursor for ``(txid, seq)`` in ``project_id``'s feed: the position encrypted under
    the project's key (a synthetic IV, the keyed hash of the position, picks the pad, so one
    position always gives the same cursor and two cursors say nothing of the distance between them
    or of the server's transaction counter, which every project's writes move)."""
    key = _cursor_key(project_id)
    plain = struct.pack(">QQ", *position)
    iv = _prf(key, b"iv", plain, _IV_BYTES)
    sealed = bytes(a ^ b for a, b in zip(plain, _prf(key, b"pad", iv, len(plain)), strict=True))
    return _CURSOR_PREFIX + base64.urlsafe_b64encode(iv + sealed).decode().rstrip("=")


def decode_feed_cursor(cursor: str, *, project_id: str) -> tuple[int, int]:
    """The position a cursor names; ``FeedCursorInvalid`` for anything this project's feed did not
    issue. A cursor of the earlier, readable form (``f1``, kept in webhook subscriptions and
    distillers) still resumes."""
    if cursor.startswith(_CURSOR_PREFIX):
        body = cursor[len(_CURSOR_PREFIX):]
        try:
            data = base64.b64decode(body + "=" * (-len(body) % 4), altchars=b"-_", validate=True)
        except (binascii.Error, ValueError):
            raise FeedCursorInvalid(details={"after": cursor}) from None
        if len(data) != _IV_BYTES + 16:
            raise FeedCursorInvalid(details={"after": cursor})
        key = _cursor_key(project_id)
        iv, sealed = data[:_IV_BYTES], data[_IV_BYTES:]
        plain = bytes(a ^ b for a, b in zip(sealed, _prf(key, b"pad", iv, len(sealed)), strict=True))
        txid, seq = struct.unpack(">QQ", plain)
        if not hmac.compare_digest(iv, _prf(key, b"iv", plain, _IV_BYTES)) or txid > _BIGINT_MAX \
                or seq > _BIGINT_MAX or encode_feed_cursor((txid, seq), project_id=project_id) != cursor:
            raise FeedCursorInvalid(details={"after": cursor})
        return txid, seq
    return _decode_readable_cursor(cursor)


def _decode_readable_cursor(cursor: str) -> tuple[int, int]:
    try:
        raw = base64.b64decode(cursor + "=" * (-len(cursor) % 4), altchars=b"-_", validate=True).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise FeedCursorInvalid(details={"after": cursor}) from None
    match = _CURSOR.fullmatch(raw)
    if match is None:
        raise FeedCursorInvalid(details={"after": cursor})
    txid, seq = int(match.group(1)), int(match.group(2))
    readable = base64.urlsafe_b64encode(f"f1.{txid}.{seq}".encode()).decode().rstrip("=")
    if txid > _BIGINT_MAX or seq > _BIGINT_MAX or readable != cursor:
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
    position = decode_feed_cursor(after, project_id=project.pk) if after else FEED_START
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
        return FeedPage(entries=rows, next_cursor=_next_cursor(project, after, position))
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
    return FeedPage(entries=rows, next_cursor=_next_cursor(project, after, position))


def _next_cursor(project: Project, after: str | None, position: tuple[int, int]) -> str:
    """The cursor of ``position``; the one sent when the page did not move (an earlier form too)."""
    if after and position == decode_feed_cursor(after, project_id=project.pk):
        return after
    return encode_feed_cursor(position, project_id=project.pk)
