"""Evidence links in the admin: the read-only inlines on a memory, the list and its delete action."""

from __future__ import annotations

from django.test import Client

from memory_engine.models import EvidenceLink
from memory_engine.services.links import evidence_link_create
from tests.search.helpers import write

from .conftest import World

A = "/admin/memory_engine"


def test_links_show_on_the_memory_and_can_be_deleted(superuser_client: Client, mine: World) -> None:
    claim = write(mine.store, "The canteen opens at eight.")
    witness = write(mine.store, "The canteen was open at eight today.")
    link = evidence_link_create(project=mine.project, kind="supports", source=witness, target=claim, created_by="t")
    page = superuser_client.get(f"{A}/memory/{claim.pk}/change/").content.decode()
    assert "evidence links to this memory" in page.lower() and witness.pk in page and "supports" in page
    listed = superuser_client.get(f"{A}/evidencelink/").content.decode()
    assert link.pk in listed
    assert superuser_client.get(f"{A}/evidencelink/add/").status_code == 403  # created through the API
    response = superuser_client.post(f"{A}/evidencelink/", {"action": "delete_selected", "_selected_action": [link.pk],
                                                            "post": "yes"})
    assert response.status_code == 302 and not EvidenceLink.objects.exists()
