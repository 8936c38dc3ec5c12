"""The memory map as a picture in the admin: an SVG drawn on the server from the same masked
answer the API serves (memory_engine.selectors.memory_map), so a masked point is a bare dot here
too, for superusers as for everyone: no link, no tooltip, no id in the page."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

WIDTH, HEIGHT, MARGIN = 900, 640, 40
#: Cluster colours (a colour-blind-safe set, repeated past twelve clusters).
PALETTE = ("#4477AA", "#EE6677", "#228833", "#CCBB44", "#66CCEE", "#AA3377", "#44AA99", "#882255",
           "#EE7733", "#0077BB", "#33BBEE", "#009988")
MASKED_COLOUR = "#777777"


def _place(x: float, y: float) -> tuple[float, float]:
    return (round(MARGIN + (x + 1) / 2 * (WIDTH - 2 * MARGIN), 1),
            round(MARGIN + (1 - (y + 1) / 2) * (HEIGHT - 2 * MARGIN), 1))


def _point(point: dict[str, Any]) -> SafeString:
    cx, cy = _place(point["x"], point["y"])
    colour = PALETTE[point["cluster"] % len(PALETTE)]
    if point.get("masked"):
        return format_html('<circle class="masked" cx="{}" cy="{}" r="4" fill="none" stroke="{}" '
                           'stroke-width="1.5"/>', cx, cy, MASKED_COLOUR)
    if point.get("withheld"):
        return format_html('<circle class="withheld" cx="{}" cy="{}" r="4" fill="{}" opacity="0.5"/>',
                           cx, cy, MASKED_COLOUR)
    tip = " — ".join(part for part in (point.get("title"), point.get("text_preview")) if part)
    url = reverse("admin:memory_engine_memory_change", args=[point["id"]])
    return format_html('<a href="{}"><circle cx="{}" cy="{}" r="4.5" fill="{}"><title>{}</title></circle></a>',
                       url, cx, cy, colour, tip)


#: Cluster labels: bold, this size (px), measured with a generous width per character so the box
#: reckoned here holds the drawn text (it is drawn centred in that box).
LABEL_FONT, LABEL_CHAR, LABEL_GAP, LABEL_PAD = 13, 8.6, 9, 4


def _overlaps(box: tuple[float, float, float, float], others: list[tuple[float, float, float, float]]) -> bool:
    left, top, right, bottom = box
    return any(left < o_right and o_left < right and top < o_bottom and o_top < bottom
               for o_left, o_top, o_right, o_bottom in others)


def label_place(cx: float, cy: float, text: str,
                taken: list[tuple[float, float, float, float]]) -> tuple[str, tuple[float, float, float, float]]:
    """Where a cluster's label goes: just above its centre ``(cx, cy)`` (below, or a line further
    away, when that is outside the picture or on a label already placed), shifted sideways only as
    far as keeps it inside the picture. Returns the text (shortened with "…" when wider than the
    picture) and its box ``(left, top, right, bottom)``."""
    most = int((WIDTH - 2 * LABEL_PAD) // LABEL_CHAR)
    if len(text) > most:
        text = text[:most - 1].rstrip(" ,") + "…"
    width = len(text) * LABEL_CHAR
    left = min(max(cx - width / 2, LABEL_PAD), WIDTH - LABEL_PAD - width)
    line = LABEL_FONT + 3
    tops = [cy - LABEL_GAP - LABEL_FONT, cy + LABEL_GAP, cy - LABEL_GAP - LABEL_FONT - line, cy + LABEL_GAP + line]
    boxes = [(left, top, left + width, top + LABEL_FONT + 2) for top in tops
             if top >= LABEL_PAD and top + LABEL_FONT + 2 <= HEIGHT - LABEL_PAD]
    if not boxes:  # cannot happen with a picture taller than four lines; kept for safety
        top = min(max(cy - LABEL_FONT / 2, LABEL_PAD), HEIGHT - LABEL_PAD - LABEL_FONT - 2)
        boxes = [(left, top, left + width, top + LABEL_FONT + 2)]
    free = [box for box in boxes if not _overlaps(box, taken)]
    return text, (free or boxes)[0]


def memory_map_svg(answer: dict[str, Any]) -> SafeString:
    """The map (a ready :func:`~memory_engine.selectors.memory_map.memory_map_answer`) as inline SVG:
    a dot per point in its cluster's colour, masked points hollow and grey, and for each cluster a
    small cross at its centre (the mean of its points) with its label just beside it, inside the
    picture (:func:`label_place`; the largest clusters are labelled first)."""
    points = answer.get("points", [])
    places: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for point in points:
        places[point["cluster"]].append(_place(point["x"], point["y"]))
    taken: list[tuple[float, float, float, float]] = []
    labels, centres = [], []
    for cluster in sorted(answer.get("clusters", []), key=lambda c: (-len(places.get(c["id"], [])), c["id"])):
        spots = places.get(cluster["id"])
        if not spots or not cluster["label"]:
            continue
        cx = round(sum(p[0] for p in spots) / len(spots), 1)
        cy = round(sum(p[1] for p in spots) / len(spots), 1)
        colour = PALETTE[cluster["id"] % len(PALETTE)]
        text, (left, top, right, bottom) = label_place(cx, cy, cluster["label"], taken)
        taken.append((left, top, right, bottom))
        centres.append((f"M{cx - 5} {cy}h10M{cx} {cy - 5}v10", colour))
        labels.append((cluster["id"], cx, cy, round((left + right) / 2, 1), round(top + LABEL_FONT - 2, 1),
                       colour, LABEL_FONT, text))
    return format_html(
        '<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="memory map" viewBox="0 0 {} {}" '
        'width="{}" height="{}" style="background:#fff;border:1px solid #ddd">{}{}{}</svg>',
        WIDTH, HEIGHT, WIDTH, HEIGHT,
        format_html_join("", "{}", ((_point(point),) for point in points)),
        format_html_join("", '<path class="cluster-centre" d="{}" stroke="{}" stroke-width="2.5"/>', centres),
        format_html_join("", '<text class="cluster-label" data-cluster="{}" data-cx="{}" data-cy="{}" x="{}" y="{}" '
                             'fill="{}" font-family="sans-serif" font-size="{}" font-weight="bold" '
                             'text-anchor="middle" stroke="#fff" stroke-width="3" paint-order="stroke">{}</text>',
                         labels),
    )


def cluster_rows(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The legend: each cluster with its colour, label and size."""
    return [{**cluster, "colour": PALETTE[cluster["id"] % len(PALETTE)]} for cluster in answer.get("clusters", [])]
