"""Ingestion rules: specificity, ambiguity, converters (callable and a real HTTP server)."""

from __future__ import annotations

import base64
import json
import threading
from urllib.parse import urlsplit

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from memory_engine.models import Chunk, Document, IngestionRule
from memory_engine.providers.signing import SIGNATURE_HEADER, sign_body
from memory_engine.services.ingestion_rules import (
    glob_specificity,
    globs_overlap,
    ingestion_rule_save,
    rule_for_content_type,
)
from tests.httpserver import LocalServer
from tests.pdfs import SCANNED_TEXT

from .conftest import assert_chunks_cover, pdf_file, upload
from .providers import SLOW_CONVERTER_RELEASE, SLOW_CONVERTER_RETURNED

pytestmark = pytest.mark.usefixtures("hashing_embedder")

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64
SECRET = "s3cret-for-tests"


@pytest.fixture(autouse=True)
def allow_test_callables(engine):
    engine(CONVERTER_CALLABLE_PREFIXES=["tests.documents."], HTTP_RETRIES=0)


def make_rule(project, glob, **fields):
    fields.setdefault("converter_type", "callable")
    if fields["converter_type"] == "callable":
        fields.setdefault("converter_path", "tests.documents.providers.pages_converter")
    return ingestion_rule_save(project=project, content_type_glob=glob, **fields)


# --- specificity -----------------------------------------------------------------------


def test_specificity_key():
    assert glob_specificity("application/pdf") < glob_specificity("application/*")
    assert glob_specificity("application/*") < glob_specificity("*/*")
    assert glob_specificity("application/vnd.*") < glob_specificity("application/*")  # longer literal


@pytest.mark.parametrize("a, b, overlap", [
    ("image/*", "*/png", True), ("image/*", "text/*", False), ("a?c/x", "abc/*", True),
    ("image/p*", "image/j*", False), ("*/*", "text/plain", True), ("text/*ml", "text/x*", True),
])
def test_globs_overlap(a, b, overlap):
    assert globs_overlap(a, b) is overlap and globs_overlap(b, a) is overlap


def test_most_specific_rule_wins(project):
    catch_all = make_rule(project, "*/*")
    images = make_rule(project, "image/*")
    png = make_rule(project, "image/png")
    vendor = make_rule(project, "application/vnd.*")
    assert rule_for_content_type(project=project, content_type="image/png") == png
    assert rule_for_content_type(project=project, content_type="image/jpeg") == images
    assert rule_for_content_type(project=project, content_type="application/vnd.ms-excel") == vendor
    assert rule_for_content_type(project=project, content_type="application/zip") == catch_all
    png.enabled = False
    png.save()
    assert rule_for_content_type(project=project, content_type="image/png") == images


def test_ambiguous_tie_is_refused_with_a_clear_400(client):
    first = client.post("/api/v1/ingestion-rules", {"content_type_glob": "image/*", "converter_type": "http",
                                                    "converter_url": "http://127.0.0.1:9/"}, format="json")
    assert first.status_code == 201, first.json()
    # "*/png" has 1 wildcard and 4 literals vs 6 for image/*: not a tie, allowed.
    assert client.post("/api/v1/ingestion-rules", {"content_type_glob": "*/png", "converter_type": "http",
                                                   "converter_url": "http://127.0.0.1:9/"},
                       format="json").status_code == 201
    # "*/jpeg" vs "image/*"? 4 literals: fine. "video/*" ties with nothing it overlaps... but "*/image"
    # is 1 wildcard + 6 literals like image/* and both match "image/image": ambiguous.
    response = client.post("/api/v1/ingestion-rules", {"content_type_glob": "*/image", "converter_type": "http",
                                                       "converter_url": "http://127.0.0.1:9/"}, format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "RULE_AMBIGUOUS" and body["details"]["conflicts_with"] == first.json()["id"]
    assert "image/*" in body["message"]
    same = client.post("/api/v1/ingestion-rules", {"content_type_glob": "image/*", "converter_type": "http",
                                                   "converter_url": "http://127.0.0.1:9/"}, format="json")
    assert same.status_code == 400 and same.json()["code"] == "RULE_EXISTS"


def test_rule_crud_and_validation(client):
    bad = [
        ({"content_type_glob": "not a type", "converter_type": "http", "converter_url": "http://127.0.0.1:9/"},
         "INGESTION_RULE_INVALID"),
        ({"content_type_glob": "image/*", "converter_type": "http"}, "INGESTION_RULE_INVALID"),
        ({"content_type_glob": "image/*", "converter_type": "callable", "converter_path": "os.system"},
         "CONVERTER_NOT_ALLOWED"),
        ({"content_type_glob": "image/*", "converter_type": "callable",
          "converter_path": "tests.documents.providers.nope"}, "CONVERTER_NOT_FOUND"),
        ({"content_type_glob": "image/*", "converter_type": "http", "converter_url": "http://127.0.0.1:9/",
          "chunk_strategy": "size", "chunk_size": 10, "chunk_overlap": 10}, "CHUNK_SETTINGS_INVALID"),
    ]
    for payload, code in bad:
        response = client.post("/api/v1/ingestion-rules", payload, format="json")
        assert response.status_code == 400, payload
        assert response.json()["code"] == code, response.json()
    created = client.post("/api/v1/ingestion-rules", {
        "content_type_glob": "Image/PNG", "converter_type": "http", "converter_url": "http://127.0.0.1:9/",
        "converter_secret": SECRET, "chunk_strategy": "whole",
    }, format="json")
    assert created.status_code == 201
    rule = created.json()
    assert rule["content_type_glob"] == "image/png" and rule["has_secret"] and "converter_secret" not in rule
    url = f"/api/v1/ingestion-rules/{rule['id']}"
    assert client.patch(url, {"enabled": False}, format="json").json()["enabled"] is False
    assert client.get("/api/v1/ingestion-rules").json()["count"] == 1
    assert client.delete(url).status_code == 204
    assert not IngestionRule.objects.exists()


# --- converters --------------------------------------------------------------------------


def test_callable_converter_for_an_unsupported_type(client, project):
    rule = make_rule(project, "image/*", chunk_strategy="whole")
    body = upload(client, SimpleUploadedFile("scan.png", PNG), wait="true").json()
    assert body["status"] == "ready", body["error"]
    assert body["ingestion_rule_id"] == rule.pk and body["chunk_strategy"] == "whole"
    chunk = Chunk.objects.get(document_id=body["id"])
    assert chunk.text.startswith("converted scan.png (72 bytes, image/png)") and chunk.page is None


def test_converter_pages_keep_their_numbers(client, project):
    make_rule(project, "image/png")
    body = upload(client, SimpleUploadedFile("scan.png", PNG), wait="true").json()
    pages = list(Chunk.objects.filter(document_id=body["id"]).values_list("page", flat=True))
    assert pages == [1, 7]


def test_request_chunk_settings_beat_the_rules(client, project):
    make_rule(project, "image/png", chunk_strategy="whole")
    body = upload(client, SimpleUploadedFile("scan.png", PNG), wait="true", chunk_strategy="page").json()
    assert body["chunk_strategy"] == "page" and body["total_chunks"] == 2


def test_a_raising_converter_fails_the_document(client, project):
    make_rule(project, "image/png", converter_path="tests.documents.providers.broken_converter")
    body = upload(client, SimpleUploadedFile("scan.png", PNG), wait="true").json()
    assert body["status"] == "failed" and body["error"]["code"] == "CONVERTER_FAILED"
    assert "converter exploded" in body["error"]["message"]


def test_a_slow_callable_times_out(client, project):
    make_rule(project, "image/png", converter_path="tests.documents.providers.slow_converter",
              converter_timeout=0.3)
    SLOW_CONVERTER_RELEASE.clear()
    SLOW_CONVERTER_RETURNED.clear()
    try:
        body = upload(client, SimpleUploadedFile("scan.png", PNG), wait="true").json()
        # answered while the converter is still held: the pipeline did not wait for it
        assert not SLOW_CONVERTER_RETURNED.is_set()
    finally:
        SLOW_CONVERTER_RELEASE.set()
    assert body["status"] == "failed" and body["error"]["code"] == "CONVERTER_TIMEOUT"


def test_native_first_keeps_native_text(client, project):
    make_rule(project, "application/pdf")
    body = upload(client, pdf_file("minimal.pdf"), wait="true").json()
    assert "Lorem ipsum" in Chunk.objects.get(document_id=body["id"]).text


def test_native_skip_uses_the_converter_only(client, project):
    make_rule(project, "application/pdf", native_extraction="skip")
    body = upload(client, pdf_file("minimal.pdf"), wait="true").json()
    assert Chunk.objects.filter(document_id=body["id"]).first().text.startswith("converted ")


class OcrServer:
    """Stands in for an OCR service: checks the signature, answers the known text of the scan."""

    def __init__(self, *, answer=None, hold: threading.Event | None = None) -> None:
        self.answer, self.hold = answer, hold

    def __call__(self, method, path, headers, body):
        if self.hold is not None:  # a slow service: answers only once the test releases it
            self.hold.wait(timeout=60)
        if headers.get(SIGNATURE_HEADER) != sign_body(SECRET, body):
            return 401, {"error": "bad signature"}
        if self.answer is not None:
            return 200, self.answer
        return 200, {"pages": [{"text": SCANNED_TEXT, "page": 1}]}


def test_scanned_pdf_is_converted_by_an_http_rule(client, project):
    """scanned.pdf has no text layer: native extraction fails with NO_TEXT_LAYER,
    the rule's HTTP converter (a real server on 127.0.0.1) supplies its text."""
    assert SCANNED_TEXT.strip()
    with LocalServer(OcrServer()) as server:
        make_rule(project, "application/pdf", converter_type="http", converter_url=f"{server.url}/ocr",
                  converter_secret=SECRET, converter_timeout=10)
        body = upload(client, pdf_file("scanned.pdf"), wait="true").json()
    assert body["status"] == "ready", body["error"]
    chunks = Chunk.objects.filter(document_id=body["id"]).order_by("chunk_index")
    assert_chunks_cover(chunks, SCANNED_TEXT)
    assert all(chunk.page == 1 and chunk.embedding is not None for chunk in chunks)
    sent = json.loads(server.requests[0]["body"])
    assert base64.b64decode(sent["file"]) == pdf_file("scanned.pdf").read()
    assert sent["document"]["id"] == body["id"] and sent["download_url"] is None
    assert sent["callback_url"].startswith("http://testserver/api/v1/documents/")
    # Text PDFs of the same type still use the native extractor (native_extraction=first).
    assert len(server.requests) == 1


def test_same_scan_without_a_rule_is_no_text_layer(client):
    body = upload(client, pdf_file("scanned.pdf"), wait="true").json()
    assert body["status"] == "failed" and body["error"]["code"] == "NO_TEXT_LAYER"
    assert "ingestion rule" in body["error"]["message"]


def test_reingest_after_adding_a_rule_converts_the_scan(client, committed, project):
    body = upload(client, pdf_file("scanned.pdf"), wait="true").json()
    assert body["status"] == "failed"
    with LocalServer(OcrServer()) as server:
        make_rule(project, "application/pdf", converter_type="http", converter_url=server.url,
                  converter_secret=SECRET)
        committed(client.post, f"/api/v1/documents/{body['id']}/ingest", {}, format="json")
    document = Document.objects.get(pk=body["id"])
    assert document.status == "ready" and document.ingestion_rule is not None and document.attempts == 1


def test_download_url_delivery(client, project):
    with LocalServer(OcrServer()) as server:
        make_rule(project, "application/pdf", converter_type="http", converter_url=server.url,
                  converter_secret=SECRET, file_delivery="download_url")
        body = upload(client, pdf_file("scanned.pdf"), wait="true").json()
    assert body["status"] == "ready"
    sent = json.loads(server.requests[0]["body"])
    assert sent["file"] is None
    url = urlsplit(sent["download_url"])
    assert not url.query  # the token travels in a header, never in the (logged) URL
    token = sent["download_token"]
    anonymous = APIClient()  # the signed token is the credential
    response = anonymous.get(url.path, HTTP_X_MEMORY_ENGINE_TOKEN=token)
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == pdf_file("scanned.pdf").read()
    forged = anonymous.get(url.path, HTTP_X_MEMORY_ENGINE_TOKEN=token[:-3] + "abc")
    assert forged.status_code == 403 and forged.json()["code"] == "DOWNLOAD_SIGNATURE_INVALID"
    assert anonymous.get(f"{url.path}?token={token}").status_code == 403


def test_download_url_expires(client, project, engine):
    engine(DOWNLOAD_URL_TTL=-1)
    with LocalServer(OcrServer()) as server:
        make_rule(project, "application/pdf", converter_type="http", converter_url=server.url,
                  converter_secret=SECRET, file_delivery="download_url")
        upload(client, pdf_file("scanned.pdf"), wait="true")
    sent = json.loads(server.requests[0]["body"])
    response = APIClient().get(urlsplit(sent["download_url"]).path, HTTP_X_MEMORY_ENGINE_TOKEN=sent["download_token"])
    assert response.status_code == 410 and response.json()["code"] == "DOWNLOAD_EXPIRED"


@pytest.mark.parametrize("answer, code", [
    ({"pages": "nope"}, "CONVERTER_BAD_RESPONSE"),
    ({"pages": [{"page": 1}]}, "CONVERTER_BAD_RESPONSE"),
    ({"pages": ["", "  "]}, "CONVERTER_EMPTY"),
    ({"status": "failed", "error": "OCR engine down"}, "CONVERTER_FAILED"),
])
def test_bad_http_converter_answers(client, project, answer, code):
    with LocalServer(OcrServer(answer=answer)) as server:
        make_rule(project, "application/pdf", converter_type="http", converter_url=server.url,
                  converter_secret=SECRET)
        body = upload(client, pdf_file("scanned.pdf"), wait="true").json()
    assert body["status"] == "failed" and body["error"]["code"] == code
    assert body["error"]["details"]["native_error"] == "NO_TEXT_LAYER"


def test_http_converter_errors_and_timeouts(client, project):
    with LocalServer(lambda *a: (401, {"error": "no"})) as server:
        make_rule(project, "image/png", converter_type="http", converter_url=server.url)
        body = upload(client, SimpleUploadedFile("a.png", PNG), wait="true").json()
    assert body["error"]["code"] == "CONVERTER_FAILED" and "401" in body["error"]["message"]
    hold = threading.Event()
    with LocalServer(OcrServer(hold=hold)) as server:
        rule = IngestionRule.objects.get()
        rule.converter_url, rule.converter_timeout = server.url, 0.2
        rule.save()
        try:
            # the service answers only when released: a client that waited for it would
            # get pages (a ready document), not the timeout
            body = upload(client, SimpleUploadedFile("b.png", PNG), wait="true").json()
        finally:
            hold.set()
    assert len(server.requests) == 1
    assert body["status"] == "failed" and body["error"]["code"] == "CONVERTER_TIMEOUT"
