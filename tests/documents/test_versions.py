"""Sources that change: identity (source, external_ref), versions, the raw capture and the
capture path's size guards."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import IntegrityError, connection, transaction

from memory_engine.models import Chunk, Document, DocumentVersion, Project, RawCapture
from memory_engine.services.documents import document_ingest
from memory_engine.services.stores import project_delete

from .conftest import pdf_file

WIKI = "/api/v1/documents/by-ref/wiki/page-42"
SEARCH = "/api/v1/knowledge/search"
OLD = "The cafeteria serves breakfast from seven until nine in the morning."
NEW = "Parking permits are renewed every January at the facilities desk."


def put(client, body, url=WIKI, **kwargs):
    return client.put(url, body, format=kwargs.pop("format", "json"), **kwargs)


@pytest.mark.usefixtures("hashing_embedder")
class TestCaptureByRef:
    def test_created_noop_updated(self, client):
        first = put(client, {"content": OLD, "wait": True})
        assert first.status_code == 201, first.json()
        body = first.json()
        assert body["status"] == "created"
        assert body["version"]["number"] == 1 and body["version"]["status"] == "active"
        document = body["document"]
        assert body["id"] == document["id"]
        assert document["path"] == "/wiki/page-42" and document["source"] == "wiki"
        assert document["external_ref"] == "page-42" and document["status"] == "ready"
        assert document["active_version_id"] == body["version"]["id"]
        seen = document["last_seen_at"]

        again = put(client, {"content": OLD, "wait": True})
        assert again.status_code == 200
        assert again.json()["status"] == "noop" and again.json()["id"] == body["id"]
        assert again.json()["version"]["id"] == body["version"]["id"]
        assert again.json()["document"]["last_seen_at"] > seen
        assert DocumentVersion.objects.count() == 1 and RawCapture.objects.count() == 1

        changed = put(client, {"content": NEW, "wait": True})
        assert changed.status_code == 201
        assert changed.json()["status"] == "updated" and changed.json()["id"] == body["id"]
        assert changed.json()["version"]["number"] == 2 and changed.json()["version"]["status"] == "active"
        versions = {v.number: v for v in DocumentVersion.objects.all()}
        assert versions[1].status == "superseded" and versions[2].status == "active"
        assert Document.objects.get().active_version_id == versions[2].pk
        chunks = Chunk.objects.all()
        assert chunks and {c.version_id for c in chunks} == {versions[2].pk}
        assert all(OLD not in c.text for c in chunks)
        assert Document.objects.count() == 1

    def test_lineage_is_recorded(self, client):
        first = put(client, {"content": OLD, "wait": True, "provenance": "stated", "source_class": "imported",
                             "occurred_at": "2026-01-02T03:04:05Z", "valid_from": "2026-01-01T00:00:00Z",
                             "captured_by_kind": "adapter"}).json()
        version = first["version"]
        assert version["provenance"] == "stated" and version["source_class"] == "imported"
        assert version["occurred_at"].startswith("2026-01-02T03:04:05")
        assert version["captured_by_kind"] == "adapter" and version["captured_by"].startswith("key:")
        derived = client.post("/api/v1/documents", {
            "content": "A summary of the cafeteria page.", "source": "rules", "external_ref": "summary-1",
            "source_class": "derived", "provenance": "inferred", "derived_from": version["id"]}, format="json")
        assert derived.status_code == 202, derived.json()
        assert derived.json()["capture"]["version"]["derived_from_id"] == version["id"]
        assert derived.json()["capture"]["version"]["captured_by_kind"] == "agent"

    def test_derived_from_another_project_is_404(self, client, other_client):
        theirs = put(other_client, {"content": OLD, "wait": True}).json()["version"]["id"]
        response = client.post("/api/v1/documents", {"content": "x y z", "derived_from": theirs}, format="json")
        assert response.status_code == 404 and response.json()["code"] == "DOCUMENT_VERSION_NOT_FOUND"

    def test_file_capture_by_ref(self, client):
        first = put(client, {"file": pdf_file("minimal.pdf"), "wait": "true"}, url="/api/v1/documents/by-ref/drive/f1",
                    format="multipart")
        assert first.status_code == 201 and first.json()["status"] == "created"
        again = put(client, {"file": pdf_file("minimal.pdf"), "wait": "true"},
                    url="/api/v1/documents/by-ref/drive/f1", format="multipart")
        assert again.status_code == 200 and again.json()["status"] == "noop"
        changed = put(client, {"file": pdf_file("four-pages.pdf"), "wait": "true"},
                      url="/api/v1/documents/by-ref/drive/f1", format="multipart")
        assert changed.json()["status"] == "updated" and changed.json()["version"]["number"] == 2
        assert changed.json()["document"]["content_type"] == "application/pdf"

    def test_content_or_file_is_required(self, client):
        response = put(client, {"title": "nothing"})
        assert response.status_code == 400

    def test_external_ref_with_slashes_and_explicit_path(self, client):
        response = put(client, {"content": OLD, "path": "/handbook/cafeteria.md"},
                       url="/api/v1/documents/by-ref/confluence/spaces/HR/pages/7")
        assert response.status_code == 202
        document = Document.objects.get()
        assert document.external_ref == "spaces/HR/pages/7" and document.path == "/handbook/cafeteria.md"

    def test_same_ref_in_another_source_or_project_is_another_document(self, client, other_client):
        put(client, {"content": OLD})
        put(client, {"content": OLD}, url="/api/v1/documents/by-ref/crm/page-42")
        put(other_client, {"content": OLD})
        assert Document.objects.count() == 3

    def test_read_only_key_cannot_capture(self, readonly_client):
        response = put(readonly_client, {"content": OLD})
        assert response.status_code == 403 and response.json()["code"] == "READ_ONLY_KEY"


@pytest.mark.usefixtures("hashing_embedder")
class TestCaptureByPost:
    def test_post_with_identity_is_a_capture(self, client):
        body = {"content": OLD, "source": "http", "external_ref": "https://example.com/a", "wait": True}
        first = client.post("/api/v1/documents", body, format="json")
        assert first.status_code == 201 and first.json()["capture"]["status"] == "created"
        assert first.json()["path"] == "/http/https:/example.com/a"
        again = client.post("/api/v1/documents", body, format="json")
        assert again.status_code == 200 and again.json()["capture"]["status"] == "noop"
        assert again.json()["id"] == first.json()["id"]
        changed = client.post("/api/v1/documents", {**body, "content": NEW}, format="json")
        assert changed.status_code == 201 and changed.json()["capture"]["status"] == "updated"
        assert changed.json()["capture"]["version"]["number"] == 2

    def test_post_without_identity_still_creates(self, client):
        first = client.post("/api/v1/documents", {"content": OLD, "path": "/a.txt"}, format="json")
        assert first.status_code == 202 and first.json()["capture"]["status"] == "created"
        assert first.json()["source"] == "upload" and first.json()["external_ref"] is None
        again = client.post("/api/v1/documents", {"content": OLD, "path": "/a.txt"}, format="json")
        assert again.status_code == 409 and again.json()["code"] == "PATH_TAKEN"

    def test_upload_with_identity(self, client):
        fields = {"source": "drive", "external_ref": "abc", "wait": "true"}
        first = client.post("/api/v1/documents/ingest", {"file": pdf_file("minimal.pdf"), **fields},
                            format="multipart")
        assert first.status_code == 201 and first.json()["capture"]["status"] == "created"
        again = client.post("/api/v1/documents/ingest", {"file": pdf_file("minimal.pdf"), **fields},
                            format="multipart")
        assert again.status_code == 200 and again.json()["capture"]["status"] == "noop"


@pytest.mark.usefixtures("hashing_embedder")
class TestPendingVersions:
    def test_queued_update_stays_pending_until_its_ingestion(self, client, committed):
        committed(put, client, {"content": OLD})  # ingested on commit
        document = Document.objects.get()
        assert document.status == "ready"
        response = put(client, {"content": NEW})  # not committed: still pending
        assert response.status_code == 202 and response.json()["status"] == "updated"
        assert response.json()["version"]["status"] == "pending"
        assert Chunk.objects.filter(text__contains="cafeteria").exists()  # v1 still live
        document_ingest(document_id=document.pk)
        assert DocumentVersion.objects.get(number=2).status == "active"
        assert not Chunk.objects.filter(text__contains="cafeteria").exists()

    def test_a_newer_capture_supersedes_a_pending_one(self, client, committed):
        committed(put, client, {"content": OLD})
        document = Document.objects.get()
        put(client, {"content": NEW})
        third = put(client, {"content": "Third wording about the library opening hours."})
        assert third.json()["status"] == "updated" and third.json()["version"]["number"] == 3
        assert put(client, {"content": "Third wording about the library opening hours."}).json()["status"] == "noop"
        document_ingest(document_id=document.pk)
        states = dict(DocumentVersion.objects.values_list("number", "status"))
        assert states == {1: "superseded", 2: "superseded", 3: "active"}
        assert DocumentVersion.objects.get(number=2).activated_at is None

    def test_a_failed_update_keeps_the_active_version(self, client, engine):
        put(client, {"content": OLD, "wait": True})
        engine(MAX_CHUNKS_PER_DOCUMENT=2)
        long_text = " ".join(f"Sentence number {i} about parking permits." for i in range(400))
        response = put(client, {"content": long_text, "wait": True, "chunk_strategy": "size", "chunk_size": 200,
                                "chunk_overlap": 0})
        assert response.status_code == 201, response.json()
        assert response.json()["version"]["status"] == "failed"
        assert response.json()["version"]["error"]["code"] == "TOO_MANY_CHUNKS"
        assert response.json()["document"]["status"] == "failed"
        v1 = DocumentVersion.objects.get(number=1)
        assert v1.status == "active" and Document.objects.get().active_version_id == v1.pk
        assert {c.version_id for c in Chunk.objects.all()} == {v1.pk}
        # Re-ingesting (a raised cap) retries the newest capture, the one the stored file holds.
        engine(MAX_CHUNKS_PER_DOCUMENT=20000)
        reingest = client.post(f"/api/v1/documents/{v1.document_id}/ingest", {"wait": True}, format="json")
        assert reingest.json()["status"] == "ready"
        assert DocumentVersion.objects.get(number=2).status == "active"


@pytest.mark.usefixtures("hashing_embedder")
class TestVersionsApi:
    def test_list_and_read_by_id(self, client):
        put(client, {"content": OLD, "wait": True})
        put(client, {"content": NEW, "wait": True})
        document = Document.objects.get()
        listing = client.get(f"/api/v1/documents/{document.pk}/versions")
        assert listing.status_code == 200
        results = listing.json()["results"]
        assert [v["number"] for v in results] == [2, 1]
        assert [v["status"] for v in results] == ["active", "superseded"]
        old = client.get(f"/api/v1/documents/{document.pk}/versions/{results[1]['id']}")
        assert old.status_code == 200 and old.json()["text"] == OLD
        assert old.json()["raw_capture_id"]
        paged = client.get(f"/api/v1/documents/{document.pk}/versions?page_size=1")
        assert len(paged.json()["results"]) == 1

    def test_another_projects_versions_are_404(self, client, other_client):
        put(client, {"content": OLD, "wait": True})
        document = Document.objects.get()
        version = document.active_version
        assert other_client.get(f"/api/v1/documents/{document.pk}/versions").status_code == 404
        answer = other_client.get(f"/api/v1/documents/{document.pk}/versions/{version.pk}")
        assert answer.status_code == 404
        put(other_client, {"content": NEW, "wait": True})
        theirs = Document.objects.exclude(pk=document.pk).get()
        crossed = other_client.get(f"/api/v1/documents/{theirs.pk}/versions/{version.pk}")
        assert crossed.status_code == 404 and crossed.json()["code"] == "DOCUMENT_VERSION_NOT_FOUND"

    def test_binary_version_has_no_text(self, client):
        put(client, {"file": pdf_file("minimal.pdf"), "wait": "true"}, format="multipart")
        version = Document.objects.get().active_version
        answer = client.get(f"/api/v1/documents/{version.document_id}/versions/{version.pk}")
        assert answer.status_code == 200 and answer.json()["text"] is None


@pytest.mark.usefixtures("hashing_embedder")
class TestRawCapture:
    def test_same_payload_is_stored_once(self, client):
        put(client, {"content": OLD})
        put(client, {"content": OLD})
        assert RawCapture.objects.count() == 1
        put(client, {"content": OLD, "title": "Cafeteria"})  # another payload, the same content
        assert RawCapture.objects.count() == 2
        assert DocumentVersion.objects.count() == 1
        raw = RawCapture.objects.order_by("created_at").first()
        assert bytes(raw.data) == OLD.encode() and raw.parameters["external_ref"] == "page-42"
        assert DocumentVersion.objects.get().raw_capture_id == raw.pk

    @pytest.mark.parametrize("statement", [
        "UPDATE memory_engine_rawcapture SET content_type = 'x'",
        "DELETE FROM memory_engine_rawcapture",
    ])
    def test_rows_are_append_only(self, client, statement):
        put(client, {"content": OLD})
        with pytest.raises(IntegrityError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement)
        assert RawCapture.objects.count() == 1

    def test_deleting_the_document_erases_it(self, client):
        put(client, {"content": OLD, "wait": True})
        put(client, {"content": NEW, "wait": True})
        document = Document.objects.get()
        assert client.delete(f"/api/v1/documents/{document.pk}").status_code == 204
        assert not RawCapture.objects.exists() and not DocumentVersion.objects.exists()
        assert not Chunk.objects.exists()

    def test_deleting_the_project_erases_it(self, client, project):
        put(client, {"content": OLD, "wait": True})
        project_delete(project=project)
        assert not Project.objects.filter(pk=project.pk).exists()
        assert not RawCapture.objects.exists() and not Document.objects.exists()


@pytest.mark.usefixtures("hashing_embedder")
class TestGuards:
    def test_title_too_long(self, client, engine):
        response = put(client, {"content": OLD, "title": "t" * 501})
        assert response.status_code == 400 and response.json()["code"] == "TITLE_TOO_LONG"
        engine(MAX_TITLE_CHARS=10)
        response = client.post("/api/v1/documents", {"content": OLD, "title": "t" * 11}, format="json")
        assert response.status_code == 400 and response.json()["code"] == "TITLE_TOO_LONG"
        assert response.json()["details"] == {"length": 11, "max_length": 10}
        assert not Document.objects.exists()

    def test_external_ref_invalid(self, client):
        response = client.post("/api/v1/documents", {"content": OLD, "external_ref": "r" * 501}, format="json")
        assert response.status_code == 400 and response.json()["code"] == "EXTERNAL_REF_INVALID"
        response = client.post("/api/v1/documents", {"content": OLD, "source": "a\u200eb", "external_ref": "x"},
                               format="json")
        assert response.status_code == 400 and response.json()["code"] == "EXTERNAL_REF_INVALID"

    def test_file_too_large(self, client, engine):
        engine(MAX_UPLOAD_BYTES=100)
        response = put(client, {"content": "x" * 101})
        assert response.status_code == 413 and response.json()["code"] == "FILE_TOO_LARGE"
        file = SimpleUploadedFile("a.txt", b"y" * 101, content_type="text/plain")
        response = put(client, {"file": file}, format="multipart")
        assert response.status_code == 413 and response.json()["code"] == "FILE_TOO_LARGE"

    def test_body_too_large(self, client, settings):
        settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
        response = put(client, {"content": "x" * 2000})
        assert response.status_code == 413 and response.json()["code"] == "REQUEST_TOO_LARGE"

    def test_too_many_chunks(self, client, engine):
        engine(MAX_CHUNKS_PER_DOCUMENT=2)
        text = " ".join(f"Sentence {i} about permits." for i in range(300))
        response = put(client, {"content": text, "wait": True, "chunk_strategy": "size", "chunk_size": 100,
                                "chunk_overlap": 0})
        assert response.json()["document"]["error"]["code"] == "TOO_MANY_CHUNKS"

    def test_chunk_too_large(self, client, engine):
        engine(MAX_CHUNK_CHARS=100)
        response = put(client, {"content": "word " * 100, "wait": True, "chunk_strategy": "whole"})
        assert response.json()["document"]["error"]["code"] == "CHUNK_TOO_LARGE"


def test_search_sees_only_the_active_version(client):
    """The real embedder: after an update the old wording is gone from search, the new one found."""
    put(client, {"content": OLD, "wait": True})
    query = {"query": "when is breakfast served in the cafeteria", "document_paths": ["/"]}
    before = client.post(SEARCH, query, format="json").json()["results"]
    assert any("breakfast" in hit["text"] for hit in before)
    assert put(client, {"content": NEW, "wait": True}).json()["status"] == "updated"
    for text in ("when is breakfast served in the cafeteria", "parking permit renewal"):
        hits = client.post(SEARCH, {**query, "query": text}, format="json").json()["results"]
        assert all("breakfast" not in hit["text"] for hit in hits)
    after = client.post(SEARCH, {**query, "query": "parking permit renewal"}, format="json").json()["results"]
    assert after and "Parking permits" in after[0]["text"]


@pytest.mark.usefixtures("hashing_embedder")
def test_admin_shows_the_history_and_a_diff(admin_client, client, other_client):
    put(client, {"content": "Line one.\nBreakfast from seven.\n", "wait": True})
    put(client, {"content": "Line one.\nBreakfast from eight.\n", "wait": True})
    document = Document.objects.get()
    v1, v2 = DocumentVersion.objects.order_by("number")
    page = admin_client.get(f"/admin/memory_engine/document/{document.pk}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "superseded" in html and "diff with v1" in html and "page-42" in html
    diff = admin_client.get(f"/admin/memory_engine/document/{document.pk}/versions/diff/?a={v1.pk}&b={v2.pk}")
    assert diff.status_code == 200
    text = diff.content.decode()
    assert "-Breakfast from seven." in text and "+Breakfast from eight." in text
    put(other_client, {"content": "Theirs.", "wait": True})
    theirs = DocumentVersion.objects.exclude(document=document).get()
    crossed = admin_client.get(f"/admin/memory_engine/document/{document.pk}/versions/diff/?a={theirs.pk}&b={v2.pk}")
    assert crossed.status_code == 404


@pytest.mark.usefixtures("hashing_embedder")
def test_list_filters_by_identity(client):
    put(client, {"content": OLD})
    put(client, {"content": NEW}, url="/api/v1/documents/by-ref/crm/page-42")
    client.post("/api/v1/documents", {"content": "plain"}, format="json")
    found = client.get("/api/v1/documents?source=wiki&external_ref=page-42").json()
    assert found["count"] == 1 and found["results"][0]["path"] == "/wiki/page-42"
    assert client.get("/api/v1/documents?source=upload").json()["count"] == 1
