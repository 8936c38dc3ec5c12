"""POST /api/v1/documents/batch: many small documents in one request, all or none."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from memory_engine.models import Document, DocumentVersion, RawCapture

from .conftest import PNG, pdf_file

BATCH = "/api/v1/documents/batch"
SEARCH = "/api/v1/knowledge/search"
NOTES = [
    ("kestrel", "The kestrel hovers over the meadow before it drops onto a vole."),
    ("juniper", "Juniper berries flavour gin; the shrub grows on dry chalk slopes."),
    ("isthmus", "The isthmus of Corinth joins the Peloponnese to the Greek mainland."),
]


def notes(**fields):
    return {"documents": [{"content": text, "path": f"/notes/{word}.txt", "title": word.title(), **fields}
                          for word, text in NOTES]}


def assert_nothing_created(project):
    assert not Document.objects.filter(project=project).exists()
    assert not RawCapture.objects.exists() and not DocumentVersion.objects.exists()


def test_a_batch_is_accepted_in_order_and_queued(client, project):
    response = client.post(BATCH, notes(tags={"team": "field"}), format="json")
    assert response.status_code == 202, response.json()
    body = response.json()["documents"]
    assert [d["path"] for d in body] == [f"/notes/{word}.txt" for word, _ in NOTES]
    assert [d["title"] for d in body] == ["Kestrel", "Juniper", "Isthmus"]
    assert all(d["status"] == "pending" and d["tags"] == {"team": "field"} and d["content_type"] == "text/plain"
               for d in body)
    assert Document.objects.filter(project=project).count() == 3


@pytest.mark.usefixtures("hashing_embedder")
def test_wait_ingests_them_and_they_are_searchable(client):
    response = client.post(BATCH, {**notes(), "wait": True}, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()["documents"]
    assert all(d["status"] == "ready" and d["total_chunks"] == 1 and d["unembedded_chunks"] == 0 for d in body)
    for (word, _), document in zip(NOTES, body, strict=True):
        hits = client.post(SEARCH, {"query": word, "channels": ["lexical"], "limit": 5}, format="json").json()
        assert document["id"] in {hit["document_id"] for hit in hits["results"]}, word


@pytest.mark.usefixtures("hashing_embedder")
def test_multipart_files_with_their_paths(client):
    markdown = SimpleUploadedFile("a.md", b"# A\n\nSome markdown.", content_type="text/markdown")
    files = [pdf_file("minimal.pdf"), markdown]
    response = client.post(BATCH, {"file": files, "path": ["/x/min.pdf", "/x/a.md"], "wait": "true",
                                   "metadata": '{"batch": 1}'}, format="multipart")
    assert response.status_code == 201, response.json()
    body = response.json()["documents"]
    assert [(d["path"], d["content_type"], d["status"], d["metadata"]) for d in body] == [
        ("/x/min.pdf", "application/pdf", "ready", {"batch": 1}),
        ("/x/a.md", "text/markdown", "ready", {"batch": 1})]


def test_multipart_paths_must_match_the_files(client, project):
    response = client.post(BATCH, {"file": [pdf_file("minimal.pdf")], "path": ["/a.pdf", "/b.pdf"]},
                           format="multipart")
    assert response.status_code == 400 and response.json()["code"] == "VALIDATION_ERROR"
    assert_nothing_created(project)


def test_a_taken_path_refuses_the_whole_batch(client, project):
    assert client.post("/api/v1/documents", {"content": "first", "path": "/notes/juniper.txt"},
                       format="json").status_code == 202
    response = client.post(BATCH, notes(), format="json")
    assert response.status_code == 409
    assert response.json()["code"] == "PATH_TAKEN" and response.json()["details"] == {
        "path": "/notes/juniper.txt", "index": 1}
    assert Document.objects.filter(project=project).count() == 1


@pytest.mark.parametrize("change, status, code", [
    ({"content": "  "}, 400, "EMPTY_FILE"),
    ({"path": "/../etc/passwd"}, 400, "PATH_INVALID"),
    ({"title": "t" * 501}, 400, "TITLE_TOO_LONG"),
    ({"tags": [1]}, 400, "VALIDATION_ERROR"),
    ({"content": "x" * 101}, 413, "FILE_TOO_LARGE"),
])
def test_a_bad_document_refuses_the_whole_batch(client, project, engine, change, status, code):
    engine(MAX_UPLOAD_BYTES=100)
    body = notes()
    body["documents"][2].update(change)
    response = client.post(BATCH, body, format="json")
    assert response.status_code == status, response.json()
    assert response.json()["code"] == code
    if code != "VALIDATION_ERROR":
        assert response.json()["details"]["index"] == 2
    assert_nothing_created(project)


def test_an_unsupported_file_is_415_with_its_index(client, project):
    files = [pdf_file("minimal.pdf"), SimpleUploadedFile("scan.png", PNG, content_type="image/png")]
    response = client.post(BATCH, {"file": files}, format="multipart")
    assert response.status_code == 415 and response.json()["code"] == "UNSUPPORTED_CONTENT_TYPE"
    assert response.json()["details"]["index"] == 1
    assert_nothing_created(project)


def test_the_quota_counts_the_whole_batch(client, project, engine):
    total = sum(len(text.encode()) for _, text in NOTES)
    engine(MAX_DOCUMENT_BYTES_PER_PROJECT=total - 1)
    response = client.post(BATCH, notes(), format="json")
    assert response.status_code == 429 and response.json()["code"] == "QUOTA_EXCEEDED"
    assert response.json()["details"]["incoming_bytes"] == total
    assert_nothing_created(project)


def test_more_than_max_batch_documents_is_413(client, project, engine):
    engine(MAX_BATCH_DOCUMENTS=2)
    response = client.post(BATCH, notes(), format="json")
    assert response.status_code == 413 and response.json()["code"] == "BATCH_TOO_LARGE"
    assert response.json()["details"] == {"documents": 3, "max_documents": 2}
    files = client.post(BATCH, {"file": [pdf_file("minimal.pdf")] * 3}, format="multipart")
    assert files.status_code == 413 and files.json()["code"] == "BATCH_TOO_LARGE"
    assert_nothing_created(project)


@pytest.mark.parametrize("body", [{}, {"documents": []}, {"documents": "text"}, [{"content": "a list"}]])
def test_no_documents_is_400(client, body):
    response = client.post(BATCH, body, format="json")
    assert response.status_code == 400 and response.json()["code"] == "VALIDATION_ERROR"


@pytest.mark.usefixtures("hashing_embedder")
def test_another_projects_key_cannot_see_them(client, other_client, project, other_project):
    body = client.post(BATCH, {**notes(), "wait": True}, format="json").json()["documents"]
    assert {d.project_id for d in Document.objects.filter(pk__in=[d["id"] for d in body])} == {project.pk}
    for document in body:
        assert other_client.get(f"/api/v1/documents/{document['id']}").status_code == 404
    assert other_client.get("/api/v1/documents").json()["count"] == 0
    hits = other_client.post(SEARCH, {"query": "kestrel", "channels": ["lexical"]}, format="json").json()
    assert hits["results"] == []
    # the same paths are free in the other project
    assert other_client.post(BATCH, notes(), format="json").status_code == 202
    assert Document.objects.filter(project=other_project).count() == 3


def test_a_read_only_key_cannot_create(readonly_client, project):
    response = readonly_client.post(BATCH, notes(), format="json")
    assert response.status_code == 403 and response.json()["code"] == "READ_ONLY_KEY"
    assert_nothing_created(project)
