"""The admin's transform configs (created through the service, then read-only) and replay
runs (replay, promote and demote actions; a view-only user gets none of them)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from memory_engine.models import Chunk, Document, ReplayRun, TransformConfig
from memory_engine.services.documents import document_capture_text, document_ingest
from memory_engine.services.documents.replay import replay_run, transform_config_create

from .conftest import World, staff_user

A = "/admin/memory_engine"


@pytest.fixture
def captured(mine: World) -> Document:
    document = document_capture_text(project=mine.project, content="The canteen opens at eight on weekdays.",
                                     source="wiki", external_ref="canteen", enqueue=False).document
    document_ingest(document_id=document.pk)
    return document


@pytest.mark.usefixtures("hashing_embedder")
def test_create_config_replay_promote_demote(superuser_client: Client, mine: World, captured: Document) -> None:
    response = superuser_client.post(f"{A}/transformconfig/add/", {
        "project": mine.project.pk, "name": "tiny", "chunk_strategy": "size", "chunk_size": "20",
        "chunk_overlap": "0", "search": "{}", "embedding_provider": "", "embedding_model": ""})
    assert response.status_code == 302, response.context["adminform"].form.errors
    config = TransformConfig.objects.get(name="tiny")
    assert config.version == 1 and config.created_by == "user:root" and config.embedding_model
    bad = superuser_client.post(f"{A}/transformconfig/add/", {
        "project": mine.project.pk, "name": "tiny", "search": "{}", "embedding_model": "other"})
    assert bad.status_code == 200, bad
    assert "EMBEDDING_MODEL_NOT_ACTIVE" in str(bad.context["adminform"].form.errors)
    shape = superuser_client.post(f"{A}/transformconfig/add/", {
        "project": mine.project.pk, "name": "tiny", "search": "[1]"})
    assert "TRANSFORM_CONFIG_INVALID" in str(shape.context["adminform"].form.errors)
    assert TransformConfig.objects.count() == 1
    page = superuser_client.get(f"{A}/transformconfig/{config.pk}/change/").content.decode()
    assert 'name="chunk_size"' not in page  # immutable

    superuser_client.post(f"{A}/transformconfig/", {"action": "replay", "_selected_action": [config.pk]})
    run = ReplayRun.objects.get()
    assert run.status == "completed" and run.started_by == "user:root" and run.documents_total == 2
    superuser_client.post(f"{A}/replayrun/", {"action": "promote", "_selected_action": [run.pk]})
    run.refresh_from_db()
    assert run.status == "promoted" and run.promoted_by == "user:root"
    assert all(len(c.text) <= 20 for c in Chunk.objects.filter(document=captured, generation=None))
    superuser_client.post(f"{A}/replayrun/", {"action": "demote", "_selected_action": [run.pk]})
    run.refresh_from_db()
    assert run.status == "demoted" and run.demoted_by == "user:root"
    page = superuser_client.get(f"{A}/document/{captured.pk}/change/").content.decode()
    assert "The canteen opens at eight on weekdays." in page  # the live chunk inline, not the staged ones


@pytest.mark.usefixtures("hashing_embedder")
def test_viewer_cannot_replay_or_promote(mine: World, captured: Document) -> None:
    user = staff_user("viewer", codenames=["view_transformconfig", "view_replayrun"])
    mine.project.members.add(user)
    client = Client()
    client.force_login(user)
    config = transform_config_create(project=mine.project, name="tiny")
    run = replay_run(config=config)
    listing = client.get(f"{A}/replayrun/")
    assert listing.status_code == 200 and listing.context["action_form"] is None
    client.post(f"{A}/replayrun/", {"action": "promote", "_selected_action": [run.pk]})
    client.post(f"{A}/transformconfig/", {"action": "replay", "_selected_action": [config.pk]})
    run.refresh_from_db()
    assert run.status == "completed" and ReplayRun.objects.count() == 1
    assert client.get(f"{A}/transformconfig/add/").status_code == 403


@pytest.mark.usefixtures("hashing_embedder")
def test_other_projects_runs_are_not_listed(member_client: Client, mine: World, theirs: World) -> None:
    theirs_run = replay_run(config=transform_config_create(project=theirs.project, name="theirs"))
    mine_run = replay_run(config=transform_config_create(project=mine.project, name="mine"))
    body = member_client.get(f"{A}/replayrun/").content.decode()
    assert mine_run.pk in body and theirs_run.pk not in body
    assert member_client.get(f"{A}/replayrun/{theirs_run.pk}/change/").status_code in (302, 404)
    configs: Any = member_client.get(f"{A}/transformconfig/").content.decode()
    assert "mine" in configs and "theirs</a>" not in configs
