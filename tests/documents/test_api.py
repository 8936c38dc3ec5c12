"""Documents API: input checks (path, size, quota, type), listing, chunks, tenant isolation."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from memory_engine.models import Document
from memory_engine.services.documents import normalize_path

from .conftest import pdf_file, upload

pytestmark = pytest.mark.usefixtures("hashing_embedder")

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


@pytest.mark.parametrize("raw, expected", [
    ("handbook/hr.pdf", "/handbook/hr.pdf"),
    ("/handbook//hr.pdf", "/handbook/hr.pdf"),
    ("/./a/./b.txt", "/a/b.txt"),
    ("  /a b/c.pdf ", "/a b/c.pdf"),
    ("/dir/", "/dir"),
    ("/café.md", "/café.md"),
])
def test_normalize_path(raw, expected):
    assert normalize_path(raw) == expected


@pytest.mark.parametrize("raw", ["/../etc/passwd", "/a/../../b", "..", "/a\\b.pdf", "/a\x00b", "/a\nb",
                                 "/a\x1fb", "/", "//", "/./", "/a\u200eb", "/" + "a" * 1001])
def test_bad_paths_are_path_invalid(client, raw):
    response = upload(client, pdf_file("minimal.pdf"), path=raw)
    assert response.status_code == 400, raw
    assert response.json()["code"] == "PATH_INVALID"
    assert not Document.objects.exists()


def test_path_taken_is_409(client):
    assert upload(client, pdf_file("minimal.pdf"), path="/a.pdf").status_code == 202
    response = upload(client, pdf_file("minimal.pdf"), path="a.pdf")
    assert response.status_code == 409 and response.json()["code"] == "PATH_TAKEN"
    assert Document.objects.count() == 1


def test_same_path_in_another_project_is_fine(client, other_client):
    assert upload(client, pdf_file("minimal.pdf")).status_code == 202
    assert upload(other_client, pdf_file("minimal.pdf")).status_code == 202


def test_default_path_is_the_bare_filename(client):
    file = pdf_file("minimal.pdf", as_name="C:\\Users\\me\\report v2.pdf")
    assert upload(client, file).json()["path"] == "/report v2.pdf"


def test_oversized_file_is_413(client, engine):
    engine(MAX_UPLOAD_BYTES=1000)
    response = upload(client, pdf_file("minimal.pdf"))
    assert response.status_code == 413 and response.json()["code"] == "FILE_TOO_LARGE"
    text = client.post("/api/v1/documents", {"content": "x" * 1001}, format="json")
    assert text.status_code == 413


def test_project_quota_is_429(client, project, engine):
    size = len(pdf_file("minimal.pdf").read())
    engine(MAX_DOCUMENT_BYTES_PER_PROJECT=size * 2)
    assert upload(client, pdf_file("minimal.pdf"), path="/1.pdf").status_code == 202
    assert upload(client, pdf_file("minimal.pdf"), path="/2.pdf").status_code == 202
    response = upload(client, pdf_file("minimal.pdf"), path="/3.pdf")
    assert response.status_code == 429 and response.json()["code"] == "QUOTA_EXCEEDED"
    assert response.json()["details"]["limit_bytes"] == size * 2
    project.max_document_bytes = size * 3  # the per-project override wins
    project.save()
    assert upload(client, pdf_file("minimal.pdf"), path="/3.pdf").status_code == 202


def test_unsupported_type_without_rule_is_415(client):
    response = upload(client, SimpleUploadedFile("scan.png", PNG, content_type="image/png"))
    assert response.status_code == 415 and response.json()["code"] == "UNSUPPORTED_CONTENT_TYPE"


def test_content_type_is_sniffed_not_trusted(client):
    file = pdf_file("minimal.pdf", as_name="notes.txt", content_type="text/plain")
    body = upload(client, file, wait="true").json()
    assert body["content_type"] == "application/pdf" and body["status"] == "ready"


def test_tags_and_metadata_travel_as_json_strings_in_multipart(client):
    body = upload(client, pdf_file("minimal.pdf"), tags='{"team": "hr"}',
                  metadata='{"source": "drive"}', title="Minimal").json()
    assert body["tags"] == {"team": "hr"} and body["metadata"] == {"source": "drive"} and body["title"] == "Minimal"
    bad = upload(client, pdf_file("minimal.pdf"), path="/x.pdf", tags="[1]")
    assert bad.status_code == 400


def test_list_filters(client):
    upload(client, pdf_file("minimal.pdf"), path="/hr/a.pdf", tags='{"team": "hr"}', wait="true")
    upload(client, pdf_file("scanned.pdf"), path="/hr/scan.pdf", wait="true")
    upload(client, pdf_file("minimal.pdf"), path="/eng/b.pdf", wait="true")

    def paths(query: str) -> list[str]:
        response = client.get(f"/api/v1/documents{query}")
        assert response.status_code == 200
        return [row["path"] for row in response.json()["results"]]

    assert paths("") == ["/eng/b.pdf", "/hr/a.pdf", "/hr/scan.pdf"]
    assert paths("?path_prefix=/hr/") == ["/hr/a.pdf", "/hr/scan.pdf"]
    assert paths("?status=failed") == ["/hr/scan.pdf"]
    assert paths('?tags={"team":"hr"}') == ["/hr/a.pdf"]
    assert client.get("/api/v1/documents?tags=nope").status_code == 400


def test_retrieve_status_and_chunks(client):
    doc = upload(client, pdf_file("nineteen-pages.pdf"), wait="true").json()
    detail = client.get(f"/api/v1/documents/{doc['id']}").json()
    # The settings used: pages longer than 200 tokens (CHUNK_SIZE_TOKENS) are cut, 40 tokens overlap.
    assert (detail["chunk_strategy"], detail["chunk_size"], detail["chunk_overlap"]) == ("page", 200, 40)
    count = detail["total_chunks"]
    assert count >= 19
    status = client.get(f"/api/v1/documents/{doc['id']}/status").json()
    assert status == {"id": doc["id"], "status": "ready", "indexed_chunks": count, "total_chunks": count,
                      "unembedded_chunks": 0, "error": None, "attempts": 1,
                      "heartbeat_at": status["heartbeat_at"], "ingested_at": status["ingested_at"]}
    first = client.get(f"/api/v1/documents/{doc['id']}/chunks?page_size=3").json()
    assert first["count"] == count and len(first["results"]) == 3 and first["next"]
    assert [c["chunk_index"] for c in first["results"]] == [0, 1, 2] and first["results"][0]["page"] == 1
    assert first["results"][0]["id"].startswith("chk_") and first["results"][0]["has_embedding"]
    second = client.get(f"/api/v1/documents/{doc['id']}/chunks?page_size=3&page=2").json()
    assert [c["chunk_index"] for c in second["results"]] == [3, 4, 5]
    last = client.get(f"/api/v1/documents/{doc['id']}/chunks?page_size=100").json()["results"][-1]
    assert (last["chunk_index"], last["page"]) == (count - 1, 19)


# --- tenant isolation: every endpoint -------------------------------------------------------


def test_other_projects_documents_are_404_everywhere(client, other_client):
    doc = upload(client, pdf_file("minimal.pdf"), wait="true").json()
    base = f"/api/v1/documents/{doc['id']}"
    for method, url in [("get", base), ("get", f"{base}/status"), ("get", f"{base}/chunks"),
                        ("post", f"{base}/ingest"), ("delete", base)]:
        response = getattr(other_client, method)(url, format="json")
        assert response.status_code == 404, (method, url)
        assert response.json()["code"] == "NOT_FOUND"
    assert other_client.get("/api/v1/documents").json()["count"] == 0
    assert other_client.get(f"/api/v1/documents?path_prefix={doc['path']}").json()["count"] == 0
    assert Document.objects.get(pk=doc["id"]).status == "ready"


def test_other_projects_rules_are_404_everywhere(client, other_client):
    rule = client.post("/api/v1/ingestion-rules", {
        "content_type_glob": "image/*", "converter_type": "http", "converter_url": "http://127.0.0.1:9/x",
    }, format="json").json()
    url = f"/api/v1/ingestion-rules/{rule['id']}"
    assert other_client.get(url).status_code == 404
    assert other_client.patch(url, {"enabled": False}, format="json").status_code == 404
    assert other_client.delete(url).status_code == 404
    assert other_client.get("/api/v1/ingestion-rules").json()["count"] == 0
    # And another project's rule never converts my files.
    assert other_client.post("/api/v1/documents/ingest",
                             {"file": SimpleUploadedFile("a.png", PNG)}, format="multipart").status_code == 415


def test_read_only_key_reads_but_cannot_write(client, readonly_client):
    doc = upload(client, pdf_file("minimal.pdf"), wait="true").json()
    base = f"/api/v1/documents/{doc['id']}"
    for url in [base, f"{base}/status", f"{base}/chunks", "/api/v1/documents", "/api/v1/ingestion-rules"]:
        assert readonly_client.get(url).status_code == 200, url
    writes = [
        ("post", "/api/v1/documents/ingest", {"file": pdf_file("minimal.pdf"), "path": "/r.pdf"},
         "multipart"),
        ("post", "/api/v1/documents", {"content": "x"}, "json"),
        ("post", f"{base}/ingest", {}, "json"),
        ("delete", base, None, "json"),
        ("post", "/api/v1/ingestion-rules", {"content_type_glob": "image/*"}, "json"),
    ]
    for method, url, data, fmt in writes:
        response = getattr(readonly_client, method)(url, data, format=fmt)
        assert response.status_code == 403, (method, url)
        assert response.json()["code"] == "READ_ONLY_KEY"
    assert Document.objects.count() == 1


def test_anonymous_is_401(db):
    from rest_framework.test import APIClient

    assert APIClient().get("/api/v1/documents").status_code in (401, 403)
