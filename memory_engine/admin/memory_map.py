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


def memory_map_svg(answer: dict[str, Any]) -> SafeString:
    """The map (a ready :func:`~memory_engine.selectors.memory_map.memory_map_answer`) as inline SVG:
    a dot per point in its cluster's colour, masked points hollow and grey, each cluster's label at
    the middle of its points."""
    points = answer.get("points", [])
    places: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for point in points:
        places[point["cluster"]].append(_place(point["x"], point["y"]))
    labels = []
    for cluster in answer.get("clusters", []):
        spots = places.get(cluster["id"])
        if not spots or not cluster["label"]:
            continue
        x = round(sum(p[0] for p in spots) / len(spots), 1)
        y = round(sum(p[1] for p in spots) / len(spots), 1)
        labels.append((x, y - 8, PALETTE[cluster["id"] % len(PALETTE)], cluster["label"]))
    return format_html(
        '<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="memory map" viewBox="0 0 {} {}" '
        'width="{}" height="{}" style="background:#fff;border:1px solid #ddd">{}{}</svg>',
        WIDTH, HEIGHT, WIDTH, HEIGHT,
        format_html_join("", "{}", ((_point(point),) for point in points)),
        format_html_join("", '<text x="{}" y="{}" fill="{}" font-size="13" font-weight="bold" text-anchor="middle" '
                             'stroke="#fff" stroke-width="3" paint-order="stroke">{}</text>', labels),
    )


def cluster_rows(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The legend: each cluster with its colour, label and size."""
    return [{**cluster, "colour": PALETTE[cluster["id"] % len(PALETTE)]} for cluster in answer.get("clusters", [])]
