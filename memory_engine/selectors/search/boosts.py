"""The authority prior and the bounded boosts: multipliers on the fused score, before the stages.

Every multiplier is clamped to [BOOST_MIN, BOOST_MAX] (0.7, 1.3), and so is their product, so
no boost can lift a weak match over a strong one: a hit whose fused score is more than
BOOST_MAX / BOOST_MIN (≈ 1.86) times another's stays ahead of it whatever the boosts say
(tests/search/test_ranking_boosts.py). Multiplying the normalised score (score / best) or the
fused score orders the same, so the fused scale is kept.

- **authority prior** ``1 + SEARCH_AUTHORITY_WEIGHT × authority``: a chunk's authority comes from
  the version it was cut from (:func:`version_authority`, the table below), derived in the search
  statement from the version's capture fields (:func:`version_authority_sql`), which are set at
  capture and never change, so no column stores it; a memory's authority is its ``confidence``.
- **recency by class** (SEARCH_BOOSTS): events decay, states and lessons do not. A memory of an
  event kind (EVENT_KINDS: ``observation``) dates from its ``created_at``; a chunk whose version
  records ``occurred_at`` dates from then. Such a hit gets ``BOOST_MIN + (BOOST_MAX − BOOST_MIN)
  × 0.5 ** (age / SEARCH_BOOST_HALF_LIFE_DAYS)`` (1.3 new, 1.0 at one half-life, towards 0.7);
  anything else (facts, preferences, instructions, undated documents) stays at 1.0.
- **corroboration** (SEARCH_CORROBORATION_*): a hit that N live items support (evidence links,
  memory_engine.models.EvidenceLink; a chunk is linked through its version) gets ``1 + a ×
  min(N, cap)``, one they contradict ``1 − b × min(N, cap)``, the product clamped
  (:func:`corroboration_boost`); :func:`corroboration_counts` reads the counts of the hits.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from memory_engine.models import Chunk, Document, DocumentVersion, EvidenceLink, Memory
from memory_engine.models.memories import LIVE_MEMORY_SQL, Kind
from memory_engine.ranking_knobs import RankingKnobs
from memory_engine.replicas import read_connection

from .results import DOCUMENT, MEMORY, SearchHit

#: (supports, contradicts): how many live items a hit is linked from.
Corroboration = tuple[int, int]

BOOST_MIN, BOOST_MAX = 0.7, 1.3

#: Memory kinds that record an event (what happened, when): their recency decays. Other kinds
#: (fact, preference, instruction) are states and lessons: true until replaced, no decay.
EVENT_KINDS = (Kind.OBSERVATION.value,)

#: A version's authority is the sum of one share per capture field, so it lies in [0, 1]:
#: native + human + stated = 1.0 (someone wrote it and said so); derived + agent + inferred = 0.0.
#: A version with the model's defaults (native, system, unknown) scores 0.7, and so does a chunk
#: older than versions.
SOURCE_CLASS_SHARE: Mapping[str, float] = {
    DocumentVersion.SourceClass.NATIVE: 0.5,
    DocumentVersion.SourceClass.IMPORTED: 0.3,
    DocumentVersion.SourceClass.DERIVED: 0.0,
}
CAPTURED_BY_SHARE: Mapping[str, float] = {
    DocumentVersion.CapturedByKind.HUMAN: 0.3,
    DocumentVersion.CapturedByKind.ADAPTER: 0.2,
    DocumentVersion.CapturedByKind.SYSTEM: 0.1,
    DocumentVersion.CapturedByKind.AGENT: 0.0,
}
PROVENANCE_SHARE: Mapping[str, float] = {
    DocumentVersion.Provenance.STATED: 0.2,
    DocumentVersion.Provenance.UNKNOWN: 0.1,
    DocumentVersion.Provenance.INFERRED: 0.0,
}
_SHARES = (("source_class", SOURCE_CLASS_SHARE, DocumentVersion.SourceClass.NATIVE),
           ("captured_by_kind", CAPTURED_BY_SHARE, DocumentVersion.CapturedByKind.SYSTEM),
           ("provenance", PROVENANCE_SHARE, DocumentVersion.Provenance.UNKNOWN))


def version_authority(*, source_class: str, captured_by_kind: str, provenance: str) -> float:
    """A document version's authority in [0, 1] from its capture fields (the table above)."""
    values = {"source_class": source_class, "captured_by_kind": captured_by_kind, "provenance": provenance}
    return round(sum(table.get(values[name], 0.0) for name, table, _ in _SHARES), 6)


def version_authority_sql(version: str) -> str:
    """The same table as a SQL expression over the version row ``version`` (LEFT JOINed: a chunk
    without a version scores as the model's defaults)."""
    terms = []
    for name, table, default in _SHARES:
        cases = " ".join(f"WHEN '{value}' THEN {share}" for value, share in table.items())
        terms.append(f"CASE coalesce({version}.{name}, '{default}') {cases} ELSE 0 END")
    return "(" + " + ".join(terms) + ")::float8"


def clamp(multiplier: float) -> float:
    return min(BOOST_MAX, max(BOOST_MIN, multiplier))


def authority_boost(authority: float, weight: float) -> float:
    """The authority prior ``1 + weight × authority``, clamped; a weight of 0 or less: 1.0 (off)."""
    if weight <= 0:
        return 1.0
    return clamp(1.0 + weight * min(1.0, max(0.0, authority)))


def recency_boost(event_at: datetime | None, *, now: datetime, half_life_days: float) -> float:
    """1.0 for a state (``event_at`` None) or without a half-life; an event's freshness mapped
    onto [BOOST_MIN, BOOST_MAX] otherwise (1.3 now, 1.0 at one half-life)."""
    if event_at is None or half_life_days <= 0:
        return 1.0
    age_days = max(0.0, (now - event_at).total_seconds() / 86400.0)
    return clamp(BOOST_MIN + (BOOST_MAX - BOOST_MIN) * 0.5 ** (age_days / half_life_days))


def corroboration_boost(counts: Corroboration, *, support: float, contradict: float, cap: int) -> float:
    """``(1 + support × min(N⁺, cap)) × (1 − contradict × min(N⁻, cap))``, clamped; 1.0 unlinked."""
    supported, contradicted = (min(max(0, n), max(0, cap)) for n in counts)
    return clamp((1.0 + max(0.0, support) * supported) * (1.0 - max(0.0, contradict) * contradicted))


def corroboration_on(knobs: RankingKnobs) -> bool:
    return knobs.corroboration_cap > 0 and (knobs.corroboration_support > 0 or knobs.corroboration_contradict > 0)


def _corroboration_sql() -> str:
    """(source, id, kind, count) of the hits' live links: a memory hit is a link's target itself,
    a chunk hit through its version. A source counts while it is live: a valid, unexpired memory
    (LIVE_MEMORY_SQL), or the active version of a document neither forgotten nor deprecated; an
    erased or purged end is deleted with its links."""
    link, chunk = EvidenceLink._meta.db_table, Chunk._meta.db_table
    memory, version = Memory._meta.db_table, DocumentVersion._meta.db_table
    document = Document._meta.db_table
    live = (f"((m.id IS NOT NULL AND {LIVE_MEMORY_SQL}) OR (sv.status = '{DocumentVersion.Status.ACTIVE}' "
            "AND sd.forgotten_at IS NULL AND sd.deprecated_at IS NULL))")
    sources = (f"LEFT JOIN {memory} m ON m.id = l.source_memory_id "
               f"LEFT JOIN {version} sv ON sv.id = l.source_version_id "
               f"LEFT JOIN {document} sd ON sd.id = sv.document_id")
    return f"""
    SELECT '{MEMORY}' AS source, l.target_memory_id AS id, l.kind, count(*) AS n
      FROM {link} l {sources}
     WHERE l.target_memory_id = ANY(%(memory_ids)s) AND {live}
     GROUP BY l.target_memory_id, l.kind
    UNION ALL
    SELECT '{DOCUMENT}', ch.id, l.kind, count(*)
      FROM {chunk} ch JOIN {link} l ON l.target_version_id = ch.version_id {sources}
     WHERE ch.id = ANY(%(chunk_ids)s) AND {live}
     GROUP BY ch.id, l.kind"""


def corroboration_counts(hits: list[SearchHit]) -> dict[tuple[str, str], Corroboration]:
    """(source, id) -> (supports, contradicts) of the hits linked from live items (one statement)."""
    ids = {source: [h.id for h in hits if h.source == source] for source in (MEMORY, DOCUMENT)}
    if not any(ids.values()):
        return {}
    found: dict[tuple[str, str], list[int]] = {}
    with read_connection().cursor() as cursor:
        cursor.execute(_corroboration_sql(), {"memory_ids": ids[MEMORY], "chunk_ids": ids[DOCUMENT]})
        for source, id_, kind, n in cursor.fetchall():
            found.setdefault((source, id_), [0, 0])[0 if kind == EvidenceLink.Kind.SUPPORTS else 1] += n
    return {key: (counts[0], counts[1]) for key, counts in found.items()}


def apply_boosts(hits: list[SearchHit], event_at: Mapping[tuple[str, str], datetime | None], *,
                 knobs: RankingKnobs, half_life_days: float, now: datetime,
                 corroboration: Mapping[tuple[str, str], Corroboration] | None = None) -> list[SearchHit]:
    """The hits with their scores multiplied by the clamped product of their boosts, re-sorted
    (ties keep the fused order). ``event_at``: (source, id) -> when an event hit happened (absent
    or None: a state). ``knobs.boosts`` switches the class-aware recency boost; the authority
    prior applies whenever ``knobs.authority_weight`` > 0, corroboration whenever one of its
    weights is (``corroboration``: :func:`corroboration_counts` of the hits)."""
    linked = corroboration_on(knobs)
    if knobs.authority_weight <= 0 and not knobs.boosts and not linked:
        return hits
    for hit in hits:
        multiplier = authority_boost(hit.authority, knobs.authority_weight)
        if knobs.boosts:
            multiplier *= recency_boost(event_at.get((hit.source, hit.id)), now=now, half_life_days=half_life_days)
        if linked and corroboration:
            multiplier *= corroboration_boost(corroboration.get((hit.source, hit.id), (0, 0)),
                                              support=knobs.corroboration_support,
                                              contradict=knobs.corroboration_contradict, cap=knobs.corroboration_cap)
        hit.score *= clamp(multiplier)
    return sorted(hits, key=lambda h: -h.score)  # stable: equal scores keep the fused order
