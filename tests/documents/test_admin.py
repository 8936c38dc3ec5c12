"""The admin: document list/detail, upload through the service, actions, rule validation."""

from __future__ import annotations

import pytest

from memory_engine.models import Document, IngestionRule

from .conftest import pdf_file, upload

pytestmark = pytest.mark.usefixtures("hashing_embedder")


def test_document_admin_pages(admin_client, client):
    ok = upload(client, pdf_file("four-pages.pdf"), wait="true").json()
    bad = upload(client, pdf_file("scanned.pdf"), wait="true").json()
    listing = admin_client.get("/admin/memory_engine/document/")
    assert listing.status_code == 200
    count = ok["total_chunks"]
    assert b"NO_TEXT_LAYER" in listing.content and f"{count}/{count}".encode() in listing.content
    detail = admin_client.get(f"/admin/memory_engine/document/{bad['id']}/change/")
    assert detail.status_code == 200 and b"Add an ingestion rule for application/pdf" in detail.content
    detail = admin_client.get(f"/admin/memory_engine/document/{ok['id']}/change/")
    assert detail.status_code == 200 and b"Hello, here is some text" in detail.content


def test_upload_through_the_admin(admin_client, project, committed):
    assert admin_client.get("/admin/memory_engine/document/add/").status_code == 200
    response = committed(admin_client.post, "/admin/memory_engine/document/add/", {
        "project": project.pk, "upload": pdf_file("minimal.pdf"), "document_path": "/admin/min.pdf",
        "title": "", "tags": "{}", "metadata": "{}", "strategy": "", "size": "", "overlap": "", "password": "",
    })
    assert response.status_code == 302, response.content[:2000]
    document = Document.objects.get(path="/admin/min.pdf")
    assert document.status == "ready" and document.total_chunks == 1
    version = document.active_version
    assert version.captured_by == "user:admin" and version.captured_by_kind == "human"
    again = admin_client.post("/admin/memory_engine/document/add/", {
        "project": project.pk, "upload": pdf_file("minimal.pdf"), "document_path": "/admin/min.pdf",
        "tags": "{}", "metadata": "{}",
    })
    assert again.status_code == 200 and b"PATH_TAKEN" in again.content


def test_reingest_and_reembed_actions(admin_client, client, committed, settings):
    doc = upload(client, pdf_file("four-pages.pdf"), wait="true").json()
    response = committed(admin_client.post, "/admin/memory_engine/document/", {
        "action": "reingest", "_selected_action": [doc["id"]],
    })
    assert response.status_code == 302
    assert Document.objects.get(pk=doc["id"]).ingested_at.isoformat() != doc["ingested_at"]
    response = admin_client.post("/admin/memory_engine/document/", {
        "action": "reembed_missing", "_selected_action": [doc["id"]],
    }, follow=True)
    assert response.status_code == 200 and b"chunk vector(s) filled" in response.content


def test_rule_admin_validates(admin_client, project):
    base = {"project": project.pk, "name": "", "converter_type": "http", "converter_url": "http://127.0.0.1:9/",
            "converter_path": "", "converter_secret": "", "converter_timeout": "60", "native_extraction": "first",
            "file_delivery": "base64", "chunk_strategy": "", "chunk_size": "", "chunk_overlap": "", "enabled": "on"}
    assert admin_client.post("/admin/memory_engine/ingestionrule/add/",
                             {**base, "content_type_glob": "Image/*"}).status_code == 302
    assert IngestionRule.objects.get().content_type_glob == "image/*"
    ambiguous = admin_client.post("/admin/memory_engine/ingestionrule/add/", {**base, "content_type_glob": "*/image"})
    assert ambiguous.status_code == 200 and b"RULE_AMBIGUOUS" in ambiguous.content
    callable_ok = admin_client.post("/admin/memory_engine/ingestionrule/add/", {
        **base, "content_type_glob": "application/zip", "converter_type": "callable",
        "converter_path": "tests.documents.providers.pages_converter", "converter_url": ""})
    assert callable_ok.status_code == 302  # staff may name any importable callable
    assert admin_client.get("/admin/memory_engine/ingestionrule/").status_code == 200
