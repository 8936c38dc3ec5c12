"""The memory schema edited in the admin passes the API's checks
(memory_engine.services.memory_schema): errors read ``SCHEMA_INVALID: ...``."""

from __future__ import annotations

import json
from typing import Any

from django.test import Client

from memory_engine.models import MemorySchema
from memory_engine.services.memory_schema import memory_schema_save

from .conftest import World

A = "/admin/memory_engine/memoryschema"


def schema_form(project: Any, kinds: Any, relation_types: Any = ()) -> dict[str, Any]:
    return {"project": project.pk, "kinds": json.dumps(kinds), "relation_types": json.dumps(list(relation_types))}


def test_admin_schema_add_saves_through_the_service(member_client: Client, mine: World) -> None:
    response = member_client.post(f"{A}/add/", schema_form(mine.project, [
        "fact", {"name": "preference", "display_name": "Preference", "description": "What the user likes."}]))
    assert response.status_code == 302, response.content.decode()[:2000]
    schema = MemorySchema.objects.get(project=mine.project)
    assert schema.kinds == [{"name": "fact", "display_name": "Fact", "description": ""},
                            {"name": "preference", "display_name": "Preference",
                             "description": "What the user likes."}]
    assert schema.relation_types == []
    listing = member_client.get(f"{A}/").content.decode()
    assert "fact, preference" in listing


def test_admin_schema_errors_show_the_code(member_client: Client, mine: World) -> None:
    response = member_client.post(f"{A}/add/", schema_form(mine.project, [{"name": "fact"}, {"name": "fact"}]))
    assert response.status_code == 200
    assert "SCHEMA_INVALID: kinds[1]: name &#x27;fact&#x27; is declared twice." in response.content.decode()
    assert not MemorySchema.objects.exists()


def test_admin_schema_change(member_client: Client, mine: World) -> None:
    schema = memory_schema_save(project=mine.project, kinds=["fact"], relation_types=[])
    url = f"{A}/{schema.pk}/change/"
    bad = member_client.post(url, {"kinds": json.dumps([{"name": "Fact!"}]), "relation_types": "[]"})
    assert bad.status_code == 200 and "SCHEMA_INVALID: kinds[0]" in bad.content.decode()
    saved = member_client.post(url, {"kinds": json.dumps(["fact", "observation"]),
                                     "relation_types": json.dumps(["contradicts"])})
    assert saved.status_code == 302
    schema.refresh_from_db()
    assert [k["name"] for k in schema.kinds] == ["fact", "observation"]
    assert schema.relation_types[0]["display_name"] == "Contradicts"


def test_admin_schemas_are_project_scoped(member_client: Client, mine: World, theirs: World) -> None:
    theirs_schema = memory_schema_save(project=theirs.project, kinds=["zetamark_kind"], relation_types=[])
    assert "zetamark_kind" not in member_client.get(f"{A}/").content.decode()
    assert member_client.get(f"{A}/{theirs_schema.pk}/change/").status_code in (302, 404)
    planted = member_client.post(f"{A}/add/", schema_form(theirs.project, ["fact"]))
    assert planted.status_code == 200  # not a choice
    assert MemorySchema.objects.get(project=theirs.project).kinds[0]["name"] == "zetamark_kind"
