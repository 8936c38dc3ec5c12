"""Pending converters: the signed, single-use, expiring callback (its token in a header, never
in the URL), and the sweep's timeout."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import pytest
from rest_framework.test import APIClient

from memory_engine.models import Chunk, Document
from memory_engine.providers.signing import sign_body
from memory_engine.services.documents import document_sweep
from memory_engine.services.ingestion_rules import ingestion_rule_save
from tests.httpserver import LocalServer
from tests.pdfs import SCANNED_TEXT

from .conftest import assert_chunks_cover, pdf_file, upload

pytestmark = pytest.mark.usefixtures("hashing_embedder")

SECRET = "callback-secret"


@pytest.fixture
def pending_document(client, project, engine):
    """The scan, converted by an HTTP converter that answers pending; yields (document, callback path)."""
    engine(HTTP_RETRIES=0)
    with LocalServer(lambda *a: (200, {"status": "pending"})) as server:
        ingestion_rule_save(project=project, content_type_glob="application/pdf", converter_type="http",
                            converter_url=server.url, converter_secret=SECRET)
        body = upload(client, pdf_file("scanned.pdf"), wait="true").json()
    assert body["status"] == "processing" and body["indexed_chunks"] == 0
    return Document.objects.get(pk=body["id"]), grant_of(server.requests[0])


def grant_of(converter_request) -> tuple[str, str]:
    """(callback path, token) from what the converter received."""
    sent = json.loads(converter_request["body"])
    parts = urlsplit(sent["callback_url"])
    assert not parts.query and sent["callback_token"]  # no token in the URL (access logs)
    return parts.path, sent["callback_token"]


def deliver(grant: tuple[str, str], payload, *, secret: str = SECRET):
    path, token = grant
    body = json.dumps(payload).encode()
    headers = {"HTTP_X_MEMORY_ENGINE_SIGNATURE": sign_body(secret, body)} if secret else {}
    return APIClient().generic("POST", path, body, content_type="application/json",
                               HTTP_X_MEMORY_ENGINE_TOKEN=token, **headers)


def test_valid_callback_finishes_the_document(pending_document, committed, client):
    document, url = pending_document
    response = committed(deliver, url, {"pages": [{"text": SCANNED_TEXT, "page": 1}]})
    assert response.status_code == 202, response.json()
    document.refresh_from_db()
    assert document.status == "ready" and document.total_chunks >= 1
    assert_chunks_cover(Chunk.objects.filter(document=document).order_by("chunk_index"), SCANNED_TEXT)
    assert document.attempts == 1  # the callback continues the same attempt
    assert "delivered_pages" not in document.converter_state and "callback" not in document.converter_state
    assert client.get(f"/api/v1/documents/{document.pk}/status").json()["status"] == "ready"


def test_replayed_callback_is_409(pending_document, committed):
    document, url = pending_document
    assert committed(deliver, url, {"pages": ["first delivery"]}).status_code == 202
    replay = committed(deliver, url, {"pages": ["second delivery"]})
    assert replay.status_code == 409 and replay.json()["code"] == "CALLBACK_USED"
    assert Chunk.objects.get(document=document).text == "first delivery"


def test_expired_callback_is_410(client, project, engine, committed):
    engine(CONVERTER_CALLBACK_TTL=-1, HTTP_RETRIES=0)
    with LocalServer(lambda *a: (200, {"status": "pending"})) as server:
        ingestion_rule_save(project=project, content_type_glob="application/pdf", converter_type="http",
                            converter_url=server.url, converter_secret=SECRET)
        body = upload(client, pdf_file("scanned.pdf"), wait="true").json()
    response = committed(deliver, grant_of(server.requests[0]), {"pages": ["late"]})
    assert response.status_code == 410 and response.json()["code"] == "CALLBACK_EXPIRED"
    # ... and the sweep fails the waiting document with a reason.
    assert committed(document_sweep)["timed_out"] == 1
    document = Document.objects.get(pk=body["id"])
    assert document.status == "failed" and document.error["code"] == "CONVERTER_TIMEOUT"
    assert "re-ingest" in document.error["message"]


def test_forged_token_is_403(pending_document, committed):
    document, (path, token) = pending_document
    forged = committed(deliver, (path, token[:-4] + "AAAA"), {"pages": ["evil"]})
    assert forged.status_code == 403 and forged.json()["code"] == "CALLBACK_SIGNATURE_INVALID"
    # A valid token for another document is no good either.
    other = committed(deliver, (path.replace(document.pk, "doc_00000000000000000000000000"), token), {"pages": ["x"]})
    assert other.status_code == 403
    # Nor is the token in the query string, where access logs would keep it.
    body = json.dumps({"pages": ["x"]}).encode()
    in_query = committed(APIClient().generic, "POST", f"{path}?token={token}", body, content_type="application/json",
                         HTTP_X_MEMORY_ENGINE_SIGNATURE=sign_body(SECRET, body))
    assert in_query.status_code == 403 and "X-Memory-Engine-Token" in in_query.json()["message"]
    document.refresh_from_db()
    assert document.status == "processing" and not document.chunks.exists()


def test_forged_body_signature_is_403(pending_document, committed):
    document, url = pending_document
    wrong = committed(deliver, url, {"pages": ["evil"]}, secret="not-the-secret")
    assert wrong.status_code == 403 and wrong.json()["code"] == "CALLBACK_SIGNATURE_INVALID"
    missing = committed(deliver, url, {"pages": ["evil"]}, secret="")
    assert missing.status_code == 403
    # The URL is still good for the real converter.
    assert committed(deliver, url, {"pages": ["genuine"]}).status_code == 202


def test_malformed_callback_body_is_400_and_keeps_the_url(pending_document, committed):
    document, url = pending_document
    bad = committed(deliver, url, {"pages": [42]})
    assert bad.status_code == 400 and bad.json()["code"] == "CALLBACK_BODY_INVALID"
    assert committed(deliver, url, {"pages": ["fixed"]}).status_code == 202


def test_converter_reporting_failure_through_the_callback(pending_document, committed):
    document, url = pending_document
    response = committed(deliver, url, {"status": "failed", "error": "OCR gave up"})
    assert response.status_code == 202
    document.refresh_from_db()
    assert document.status == "failed" and document.error["code"] == "CONVERTER_FAILED"


def test_pages_without_text_through_the_callback_fail_with_no_text(pending_document, committed, client):
    """Pages that are all blank reach the pipeline, which has nothing to chunk: failed NO_TEXT
    (with the page count), not a ready document without chunks."""
    document, url = pending_document
    response = committed(deliver, url, {"pages": ["   ", {"text": "\n\t", "page": 2}]})
    assert response.status_code == 202, response.json()
    document.refresh_from_db()
    assert document.status == "failed" and document.error["code"] == "NO_TEXT"
    assert document.error["details"] == {"pages": 2} and not Chunk.objects.filter(document=document).exists()
    status = client.get(f"/api/v1/documents/{document.pk}/status").json()
    assert status["status"] == "failed" and status["error"]["code"] == "NO_TEXT"


def test_sweep_leaves_a_waiting_converter_alone_until_expiry(pending_document, committed, engine):
    document, url = pending_document
    engine(INGESTION_HEARTBEAT_TIMEOUT=0)
    assert committed(document_sweep) == {"requeued": 0, "failed": 0, "timed_out": 0, "skipped": 0}
    document.refresh_from_db()
    assert document.status == "processing"


def test_reingest_invalidates_the_old_callback(pending_document, committed, client):
    document, url = pending_document
    with LocalServer(lambda *a: (200, {"status": "pending"})) as server:
        rule = document.ingestion_rule
        rule.converter_url = server.url
        rule.save()
        committed(client.post, f"/api/v1/documents/{document.pk}/ingest", {}, format="json")
    stale = committed(deliver, url, {"pages": ["stale"]})
    assert stale.status_code == 409
    assert committed(deliver, grant_of(server.requests[0]), {"pages": ["fresh"]}).status_code == 202
    assert Chunk.objects.get(document=document).text == "fresh"


def test_callable_converter_can_be_pending_too(client, project, engine, committed, tmp_path):
    engine(CONVERTER_CALLABLE_PREFIXES=["tests.documents."])
    ingestion_rule_save(project=project, content_type_glob="image/png", converter_type="callable",
                        converter_path="tests.documents.providers.pending_converter")
    from django.core.files.uploadedfile import SimpleUploadedFile

    target = tmp_path / "callback.txt"
    body = upload(client, SimpleUploadedFile("a.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 10), wait="true",
                  metadata=json.dumps({"callback_file": str(target)})).json()
    assert body["status"] == "processing"
    grant = json.loads(target.read_text())
    assert "?" not in grant["url"]
    response = committed(deliver, (urlsplit(grant["url"]).path, grant["token"]), {"pages": ["from the callable"]},
                         secret="")
    assert response.status_code == 202
    assert Document.objects.get(pk=body["id"]).status == "ready"
