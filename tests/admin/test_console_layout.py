"""The console's layout through Django's test client (issue 70): the memory maps linked from the
console's panel, map labels inside the picture and beside their cluster's centre, timestamps that
read "2026-12-06 03:48" (never "3:48 a.m.." at the end of a sentence). The widths of the
superseded-facts columns are measured in a real browser (tests/admin/test_browser.py)."""

from __future__ import annotations

import re
from typing import Any

from django.test import Client
from django.urls import reverse
from django.utils import timezone

from memory_engine.admin.memory_map import HEIGHT, LABEL_CHAR, LABEL_FONT, WIDTH, _place
from memory_engine.models import MemoryMap, MemoryMapStatus
from memory_engine.services.memories import memory_write

from .conftest import World

A = "/admin/memory_engine"
ISO_MINUTE = r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}"


def body(response: Any) -> str:
    assert response.status_code == 200
    return response.content.decode()


def test_the_console_panel_links_the_memory_maps(superuser_client: Client, mine: World) -> None:
    panel = body(superuser_client.get(f"{A}/"))
    panel = panel[panel.index('id="operator-console"'):]
    assert f'href="{A}/memorystore/">Memory maps</a>' in panel
    the_map = reverse("admin:memory_engine_memorystore_map", args=[mine.store.pk])
    assert f'href="{the_map}">map</a>' in body(superuser_client.get(f"{A}/memorystore/"))
    assert f'href="{the_map}">map</a>' in body(superuser_client.get(f"{A}/project/{mine.project.pk}/overview/"))
    assert "Memory map of" in body(superuser_client.get(the_map))


def labels_of(page: str) -> list[tuple[float, float, str]]:
    """``(x, y, text)`` of each label the map draws (text-anchor middle, y the baseline)."""
    found = []
    for attributes, text in re.findall(r"<text ([^>]*)>([^<]*)</text>", page):
        values = dict(re.findall(r'([\w-]+)="([^"]*)"', attributes))
        found.append((float(values["x"]), float(values["y"]), text))
    return found


def test_map_labels_stay_inside_the_picture_beside_their_centre(superuser_client: Client, mine: World) -> None:
    """Clusters in two corners, with long labels: each label's box is inside the picture, spans its
    cluster's centre horizontally and sits within two lines of it."""
    left = [memory_write(store=mine.store, content=text, principal="p").memory for text in (
        "The user collects extraordinarily complicated mechanical chronometers.",
        "Extraordinarily complicated chronometers fill the user's cabinets.")]
    right = [memory_write(store=mine.store, content=text, principal="p").memory for text in (
        "The user photographs thunderstorms professionally over grasslands.",
        "Thunderstorms over grasslands are what the user photographs.")]
    corners = {0: [(-1.0, 1.0), (-0.96, 0.97)], 1: [(1.0, -1.0), (0.97, -0.95)]}
    points = [[m.pk, x, y, cluster] for cluster, ms in ((0, left), (1, right))
              for m, (x, y) in zip(ms, corners[cluster], strict=True)]
    MemoryMap.objects.create(store=mine.store, project_id=mine.project.pk, status=MemoryMapStatus.READY,
                             points=points, clusters=[{"id": 0}, {"id": 1}], live_memories=6,
                             computed_at=timezone.now())
    page = body(superuser_client.get(reverse("admin:memory_engine_memorystore_map", args=[mine.store.pk])))
    labels = labels_of(page)
    assert len(labels) == 2
    centres = []
    for cluster in (0, 1):
        spots = [_place(x, y) for x, y in corners[cluster]]
        centres.append((sum(p[0] for p in spots) / 2, sum(p[1] for p in spots) / 2))
    for (x, y, text), (cx, cy) in zip(sorted(labels), sorted(centres), strict=True):
        half = len(text) * LABEL_CHAR / 2
        assert len(text) > 20, text  # long enough to have been clipped at a corner
        assert x - half >= 0 and x + half <= WIDTH, (x, text)
        assert y - LABEL_FONT >= 0 and y + 4 <= HEIGHT, (y, text)
        assert x - half <= cx <= x + half, (cx, x, text)
        assert abs((y - LABEL_FONT / 2) - cy) <= 2 * (LABEL_FONT + 9), (cy, y, text)


def test_timestamps_read_without_a_trailing_period(superuser_client: Client, mine: World) -> None:
    the_map = body(superuser_client.get(reverse("admin:memory_engine_memorystore_map", args=[mine.store.pk])))
    assert re.search(rf"computed {ISO_MINUTE}\.", the_map), the_map
    pages = [the_map] + [body(superuser_client.get(url)) for url in (
        f"{A}/memory/", f"{A}/memory/superseded/", f"{A}/memoryassertion/", f"{A}/memory/{mine.old.pk}/change/",
        f"{A}/memory/{mine.new.pk}/change/", f"{A}/memorystore/", f"{A}/document/{mine.ready.pk}/change/")]
    for page in pages:
        assert not re.search(r"\d(a|p)\.m\.|\d (a|p)\.m\.", page)
        assert ".." not in re.sub(r"<[^>]*>", "", page).replace("...", "")
    superseded = pages[2]
    assert re.search(rf'<td class="field-retired_at">{ISO_MINUTE}</td>', superseded), superseded
