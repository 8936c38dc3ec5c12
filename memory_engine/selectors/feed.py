"""The change feed read: entries after a cursor, in commit order, no gaps and no repeats.

Entries are ordered by ``(txid, seq)`` (see memory_engine.models.feed). A page only holds
entries whose transaction id is below the oldest transaction still running when the page is
read (``pg_snapshot_xmin(pg_current_snapshot())``, taken in the same statement): every such
transaction has finished, so every entry it wrote is visible now, and any entry committed later
has a larger ``txid`` than all of them. A reader that resumes after the last position it saw
therefore never skips a later commit and never sees an entry twice. The price is lag: one long
transaction anywhere on the server holds the horizon back until it ends (docs/feed.md).

Transaction ids belong to one server; a project's era (memory_engine.models.feed.FeedClock) keeps
its positions rising when its rows move to another.

A position holds the server-wide transaction id, which every project's writes move. It stays on
the server (readers inside it keep it as is); a client only ever sees it sealed under a key of
its project (:func:`encode_feed_cursor`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import struct
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESSIV
from django.conf import settings
from django.db.models import BooleanField, ExpressionWrapper, Q
from django.db.models.expressions import RawSQL

from memory_engine.exceptions import FeedCursorInvalid
from memory_engine.models import FeedEntry, Project
from memory_engine.models.feed import ERA_SHIFT
from memory_engine.policy import SEARCH, Principal, reach, tag_filter

__all__ = ["FEED_START", "FeedPage", "FeedRead", "decode_feed_cursor", "decode_position", "encode_feed_cursor",
           "encode_position", "feed_page", "feed_read", "shown_cursor"]

#: A position in a project's feed: the (transaction id, sequence) of the last entry read.
Position = tuple[int, int]
#: Everything before the first entry.
FEED_START: Position = (0, 0)
#: The form a position is kept in server-side (a distiller's, a webhook subscription's and its
#: deliveries' rows): readable, never shown to a client.
_POSITION = re.compile(r"f1\.(\d{1,20})\.(\d{1,20})")
#: Cursors a client sees: this prefix, then the position sealed under the project's key.
_CURSOR_PREFIX = "c2"
_SEALED_BYTES = 32  # AES-SIV: a 16-byte synthetic IV, then the 16 bytes of the position
_BIGINT_MAX = 2**63 - 1
# xid8 fits a bigint (epoch << 32 | xid); the horizon is computed by the server per statement.
_OLDEST_RUNNING = "pg_snapshot_xmin(pg_current_snapshot())::text::bigint"
# The horizon in the project's positions: above its era (models.feed.FeedClock) while its clock
# names this server. When it names another, the project has moved here and written nothing since:
# every entry it has was committed on the other server, so all are visible.
_PROJECT_HORIZON = (
    f"COALESCE((SELECT CASE WHEN c.node = (pg_control_system()).system_identifier"
    f" THEN (c.era::bigint << {ERA_SHIFT}) + {_OLDEST_RUNNING} ELSE {_BIGINT_MAX} END"
    f" FROM memory_engine_feedclock c WHERE c.project_id = %s), {_OLDEST_RUNNING})"
)


def _visibility_horizon(project_id: str) -> RawSQL:
    """The position below which every entry of the project is committed and visible, computed by
    the server that holds the project's rows, in the reading statement."""
    return RawSQL(_PROJECT_HORIZON, [project_id])


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    """``text``'s bytes, for the canonical unpadded urlsafe base64 only (one text per value)."""
    try:
        data = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(text) from None
    if _b64(data) != text:
        raise ValueError(text)
    return data


def encode_position(position: Position) -> str:
    """The server-side form of ``position`` (kept in rows; a client sees :func:`encode_feed_cursor`'s)."""
    return _b64(f"f1.{position[0]}.{position[1]}".encode())


def decode_position(text: str) -> Position:
    """The position a stored ``text`` names (``""``: the start); ``FeedCursorInvalid`` for anything else."""
    if not text:
        return FEED_START
    try:
        match = _POSITION.fullmatch(_unb64(text).decode("ascii"))
    except (ValueError, UnicodeDecodeError):
        match = None
    if match is None or int(match.group(1)) > _BIGINT_MAX or int(match.group(2)) > _BIGINT_MAX:
        raise FeedCursorInvalid(details={"after": text})
    return int(match.group(1)), int(match.group(2))


def _cursor_keys(project_id: str) -> list[bytes]:
    """The project's cursor keys, derived from ``SECRET_KEY`` (first: the one that seals) and then
    ``SECRET_KEY_FALLBACKS`` (still opened, so a key rotated the Django way keeps cursors working)."""
    keys = []
    for secret in [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]:
        root = hashlib.sha256(f"memory_engine.feed-cursor:{secret}".encode()).digest()
        keys.append(hmac.new(root, project_id.encode(), hashlib.sha512).digest())
    return keys


def encode_feed_cursor(position: Position, *, project_id: str) -> str:
    """The cursor a client of ``project_id``'s feed sees for ``position``: the position sealed with
    AES-SIV under the project's key. It is deterministic (one position, one cursor) and says
    nothing of the server-wide transaction counter the position holds, which every project's
    writes move (a readable position told a reader how busy the other tenants were)."""
    plain = struct.pack(">QQ", *position)
    return _CURSOR_PREFIX + _b64(AESSIV(_cursor_keys(project_id)[0]).encrypt(plain, [project_id.encode()]))


def decode_feed_cursor(cursor: str, *, project_id: str) -> Position:
    """The position a client's ``cursor`` names; ``FeedCursorInvalid`` for anything ``project_id``'s
    feed did not issue (another project's cursor, a changed one, a readable position)."""
    try:
        if not cursor.startswith(_CURSOR_PREFIX):
            raise ValueError(cursor)
        sealed = _unb64(cursor[len(_CURSOR_PREFIX):])
        if len(sealed) != _SEALED_BYTES:
            raise ValueError(cursor)
    except ValueError:
        raise FeedCursorInvalid(details={"after": cursor}) from None
    for key in _cursor_keys(project_id):
        try:
            plain = AESSIV(key).decrypt(sealed, [project_id.encode()])
        except InvalidTag:
            continue
        txid, seq = struct.unpack(">QQ", plain)
        if txid <= _BIGINT_MAX and seq <= _BIGINT_MAX:
            return txid, seq
    raise FeedCursorInvalid(details={"after": cursor})


def shown_cursor(stored: str, *, project_id: str) -> str:
    """A stored position as a client sees it (``""`` stays ``""``: nothing read yet)."""
    return encode_feed_cursor(decode_position(stored), project_id=project_id) if stored else ""


#: A page reads at most this many entries per entry it returns when the caller's grants hide
#: entries; the cursor still moves past every entry read (shown or not).
SCAN_FACTOR = 10


@dataclass(frozen=True)
class FeedRead:
    entries: list[FeedEntry]
    #: The position to read on from (the one read from when nothing new is visible yet).
    position: Position


@dataclass(frozen=True)
class FeedPage:
    entries: list[FeedEntry]
    next_cursor: str


def feed_read(*, project: Project, caller: Principal, position: Position = FEED_START, limit: int = 100,
              exclude_generator: bool = False) -> FeedRead:
    """Up to ``limit`` entries after ``position`` that ``caller`` may see (memory_engine.policy: an
    entry goes with its store or its document), and the position to read on from. Entries the
    caller may not see, and with ``exclude_generator`` those it made, are left out and the
    position moves past them: a narrowed reader never stalls behind a run of other teams'
    changes. Server-side readers (distillers, webhook deliveries) keep the position; a client
    gets it sealed (:func:`feed_page`)."""
    txid, seq = position
    entries = (
        # txid >= the cursor's lets the (project, txid, seq) index bound the scan
        FeedEntry.objects.filter(project=project, txid__gte=txid).filter(Q(txid__gt=txid) | Q(txid=txid, seq__gt=seq))
        .filter(txid__lt=_visibility_horizon(project.pk)).order_by("txid", "seq")
    )
    tags = reach(caller, SEARCH)
    if tags is None and not exclude_generator:
        rows = list(entries[:limit])
        if rows:
            position = (rows[-1].txid, rows[-1].seq)
        return FeedRead(entries=rows, position=position)
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
    return FeedRead(entries=rows, position=position)


def feed_page(*, project: Project, caller: Principal, after: str | None = None, limit: int = 100,
              exclude_generator: bool = False) -> FeedPage:
    """:func:`feed_read` for a client: after the cursor ``after`` (from the start when omitted), with
    the cursor to pass next time, sealed for the project (the same one when nothing new is
    visible yet)."""
    position = decode_feed_cursor(after, project_id=project.pk) if after else FEED_START
    read = feed_read(project=project, caller=caller, position=position, limit=limit,
                     exclude_generator=exclude_generator)
    if after and read.position == position:
        return FeedPage(entries=read.entries, next_cursor=after)
    return FeedPage(entries=read.entries, next_cursor=encode_feed_cursor(read.position, project_id=project.pk))
