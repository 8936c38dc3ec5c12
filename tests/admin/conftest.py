"""Fixtures for the operator console: two projects with data, a superuser, and a staff
member of one project only (the cross-project leak checks)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from memory_engine.models import Document, Generation, IngestionRule, MemoryRule, Project
from memory_engine.models.documents import DocumentStatus
from memory_engine.services.documents import document_create_text
from memory_engine.services.memories import memory_write
from tests.factories import AgentFactory, MemoryStoreFactory, ProjectFactory, make_key

CITY = {"kind": "profile", "key": "city"}


@dataclass
class World:
    """One project's console-visible rows, named for the assertions of the tests."""

    project: Project
    store: Any
    agent: Any
    old: Any  # the retired memory
    new: Any  # the memory that retired it
    ready: Document
    failed: Document
    rule: MemoryRule
    ingestion_rule: IngestionRule
    generation: Generation


def build_world(name: str, marker: str) -> World:
    """Rows tagged with ``marker`` so a page can be searched for another project's leak."""
    project = ProjectFactory(name=f"{name}-project")
    store = MemoryStoreFactory(project=project, name=f"{marker}-store")
    make_key(project)
    agent = AgentFactory(project=project, name=f"{marker}-agent", write_memory_store=store)
    first = memory_write(store=store, content=f"The user {marker} lives in Paris.", principal=f"key:{marker}",
                         about=CITY)
    second = memory_write(store=store, content=f"The user {marker} lives in Berlin.", principal=f"key:{marker}",
                          about=CITY)
    ready = document_create_text(project=project, content=f"{marker} handbook: the office opens at nine.",
                                 path=f"/{marker}/handbook.txt", enqueue=False)
    from memory_engine.services.documents import document_ingest

    document_ingest(document_id=ready.pk)
    ready.refresh_from_db()
    failed = Document.objects.create(
        project=project, path=f"/{marker}/scan.pdf", content_type="application/pdf", chunk_strategy="page",
        status=DocumentStatus.FAILED, error={"code": "NO_TEXT_LAYER", "message": "No text layer.", "details": {}},
    )
    rule = MemoryRule.objects.create(store=store, handler_type="callable",
                                     handler_config={"path": "tests.admin.handlers.fact_lines"})
    ingestion_rule = IngestionRule.objects.create(project=project, name=f"{marker}-ocr",
                                                  content_type_glob="application/pdf", converter_type="callable",
                                                  converter_path="tests.admin.handlers.fact_lines")
    generation = Generation.objects.create(
        project=project, agent=agent, output="ok",
        extraction={rule.pk: {"created": 0, "superseded": 0, "skipped": 0, "failed": 0,
                              "error": {"code": "LLM_NOT_CONFIGURED", "message": f"{marker} no LLM"}}},
    )
    return World(project, store, agent, first.memory, second.memory, ready, failed, rule, ingestion_rule,
                 generation)


@pytest.fixture(autouse=True)
def media_root(settings: Any, tmp_path: Path) -> Path:
    root = tmp_path / "media"
    root.mkdir()
    settings.MEDIA_ROOT = str(root)
    return root


@pytest.fixture
def mine(db: Any, hashing_embedder: Any) -> World:
    return build_world("mine", "alphamark")


@pytest.fixture
def theirs(db: Any, hashing_embedder: Any) -> World:
    return build_world("theirs", "zetamark")


@pytest.fixture
def superuser_client(db: Any) -> Client:
    user = User.objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(user)
    return client


def staff_user(username: str, *, codenames: list[str] | None = None) -> User:
    user = User.objects.create_user(username, f"{username}@example.com", "pw", is_staff=True)
    permissions = Permission.objects.filter(content_type__app_label="memory_engine")
    if codenames is not None:
        permissions = permissions.filter(codename__in=codenames)
    user.user_permissions.set(permissions)
    return user


@pytest.fixture
def member_client(mine: World, theirs: World) -> Client:
    """A staff user with every memory_engine permission, member of ``mine`` only."""
    user = staff_user("member")
    mine.project.members.add(user)
    client = Client()
    client.force_login(user)
    return client
