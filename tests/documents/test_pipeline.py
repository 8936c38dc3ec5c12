"""The ingestion pipeline end to end (API -> task -> chunks) on every PDF outcome and on text."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from memory_engine.extraction import PDF_EXTRACTORS
from memory_engine.models import Chunk, Document
from memory_engine.services.documents import document_ingest, document_reingest
from tests.pdfs import LIGATURE_TEXT, pdf_params, read_pdf
from tests.test_extraction import EXPECTED, PASSWORDS, ZERO_BYTES, Fails, Text

from .conftest import pdf_file, upload
from .providers import PROGRESS

pytestmark = pytest.mark.usefixtures("hashing_embedder")


@pytest.fixture(params=PDF_EXTRACTORS)
def extractor(request, engine) -> str:
    """Each PDF extractor in turn, as the PDF_EXTRACTOR setting."""
    engine(PDF_EXTRACTOR=request.param)
    return request.param


def ingest_pdf(client, committed, name, **fields):
    response = committed(upload, client, pdf_file(name), **fields)
    assert response.status_code == 202, response.json()
    return Document.objects.get(pk=response.json()["id"])


@pytest.mark.parametrize("name", pdf_params(sorted(set(EXPECTED) - ZERO_BYTES)))
def test_every_pdf_ends_in_its_terminal_status(client, committed, name, extractor):
    document = ingest_pdf(client, committed, name)
    expected = EXPECTED[name]
    if name in PASSWORDS:
        expected = Fails("PDF_ENCRYPTED", {"reason": "password_required"})
    if isinstance(expected, Fails):
        assert document.status == "failed", document.error
        assert document.error["code"] == expected.code
        assert document.error["message"]
        assert document.total_chunks == 0 and not document.chunks.exists()
        return
    assert_ready_with_pages(document, expected)


def assert_ready_with_pages(document: Document, expected: Text) -> None:
    assert document.status == "ready", document.error
    assert document.chunk_strategy == "page"
    chunks = list(document.chunks.order_by("chunk_index"))
    # One chunk per page, or several for a page longer than chunk_size tokens; pages in order.
    pages = [chunk.page for chunk in chunks]
    assert pages == sorted(pages)
    assert list(dict.fromkeys(pages)) == list(expected.text_pages or range(1, expected.pages + 1))
    # Spacing differs between the PDF extractors (pypdf keeps a layout's runs of spaces).
    assert " ".join(expected.contains.split()) in " ".join("\n".join(chunk.text for chunk in chunks).split())
    assert document.total_chunks == document.indexed_chunks == len(chunks)
    assert document.unembedded_chunks == 0 and all(chunk.embedding is not None for chunk in chunks)
    assert document.attempts == 1 and document.error is None and document.ingested_at


@pytest.mark.parametrize("name", pdf_params(sorted(PASSWORDS)))
def test_encrypted_pdfs_open_with_their_password(client, committed, name, extractor):
    document = ingest_pdf(client, committed, name, password=PASSWORDS[name])
    expected = EXPECTED[name]
    assert isinstance(expected, Text)
    assert_ready_with_pages(document, expected)
    assert "openpassword" not in str(document.converter_state)  # stored encrypted


def test_wrong_password_fails_then_reingest_with_the_right_one(client, committed, extractor):
    document = ingest_pdf(client, committed, "encrypted-rc4.pdf", password="nope")
    assert document.error["code"] == "PDF_ENCRYPTED"
    assert document.error["details"]["reason"] == "wrong_password"
    response = committed(client.post, f"/api/v1/documents/{document.pk}/ingest", {"password": "openpassword"},
                         format="json")
    assert response.status_code == 202
    document.refresh_from_db()
    assert document.status == "ready" and document.total_chunks >= 4
    assert sorted(set(document.chunks.values_list("page", flat=True))) == [1, 2, 3, 4]


def test_zero_byte_file_is_refused_up_front(client):
    response = upload(client, pdf_file("empty.pdf"))
    assert response.status_code == 400
    assert response.json()["code"] == "EMPTY_FILE"
    assert not Document.objects.exists()


def test_wait_true_ingests_inline_and_answers_201(client):
    response = upload(client, pdf_file("four-pages.pdf"), wait="true")
    assert response.status_code == 201
    body = response.json()
    assert body["status"] == "ready" and body["total_chunks"] == body["indexed_chunks"] >= 4
    assert body["path"] == "/four-pages.pdf"
    assert {"id", "path", "title", "content_type", "status", "error", "total_chunks", "indexed_chunks",
            "unembedded_chunks", "attempts", "chunk_strategy", "chunk_size", "chunk_overlap", "tags",
            "metadata", "created_at"} <= set(body)


def test_wait_true_over_the_sync_limit_runs_in_the_background(client, committed, engine):
    engine(SYNC_INGESTION_MAX_BYTES=100)
    response = committed(upload, client, pdf_file("four-pages.pdf"), wait="true")
    assert response.status_code == 202
    assert response.json()["status"] == "pending"
    assert Document.objects.get().status == "ready"  # the task ran (inline broker in tests)


def test_wait_true_failure_is_201_with_the_error(client):
    response = upload(client, pdf_file("scanned.pdf"), wait="true")
    assert response.status_code == 201
    assert response.json()["status"] == "failed"
    assert response.json()["error"]["code"] == "NO_TEXT_LAYER"


def test_size_strategy_windows_and_page_attribution(client):
    response = upload(client, pdf_file("four-pages.pdf"), wait="true", chunk_strategy="size",
                      chunk_size=300, chunk_overlap=50)
    body = response.json()
    assert (body["chunk_strategy"], body["chunk_size"], body["chunk_overlap"]) == ("size", 300, 50)
    chunks = list(Chunk.objects.filter(document_id=body["id"]).order_by("chunk_index"))
    assert len(chunks) > 4
    assert all(len(chunk.text) <= 300 for chunk in chunks)
    # Windows overlap by whole words (at most 50 characters) and never cut a word in half.
    first_words = chunks[1].text.split()
    assert " ".join(first_words[:2]) in chunks[0].text[-50:]
    from memory_engine.extraction import extract_pages

    pages = extract_pages(read_pdf("four-pages.pdf"), "application/pdf")
    words = {word for page in pages for word in page.text.split()}
    assert all(set(chunk.text.split()) <= words for chunk in chunks)  # no half words
    pages = [chunk.page for chunk in chunks]
    assert pages == sorted(pages) and pages[0] == 1 and pages[-1] == 4


def test_invalid_chunk_settings_are_400(client):
    response = upload(client, pdf_file("minimal.pdf"), chunk_strategy="size", chunk_size=100,
                      chunk_overlap=100)
    assert response.status_code == 400
    assert response.json()["code"] == "CHUNK_SETTINGS_INVALID"


def test_text_document_defaults_to_recursive(client, committed):
    response = committed(client.post, "/api/v1/documents",
                         {"content": "# Leave policy\n\nTwenty days a year.", "path": "/hr/leave.md",
                          "title": "Leave", "tags": {"team": "hr"}}, format="json")
    assert response.status_code == 202, response.json()
    document = Document.objects.get(pk=response.json()["id"])
    assert (document.status, document.content_type, document.chunk_strategy) == ("ready", "text/markdown",
                                                                                  "recursive")
    assert (document.chunk_size, document.chunk_overlap) == (200, 40)  # CHUNK_SIZE_TOKENS, CHUNK_OVERLAP_TOKENS
    chunk = document.chunks.get()
    assert chunk.page is None and chunk.text.startswith("# Leave policy")
    assert document.file.read().decode().startswith("# Leave policy")


def test_text_document_without_path_gets_one(client):
    response = client.post("/api/v1/documents", {"content": "plain words", "title": "Some Note", "wait": True},
                           format="json")
    assert response.status_code == 201
    assert response.json()["path"].startswith("/some-note-") and response.json()["content_type"] == "text/plain"


MARKDOWN = "# Leave policy\n\nTwenty days a year; see [the handbook](https://example.com/hb)."


@pytest.mark.parametrize(("fields", "content_type", "suffix"), [
    ({"content": MARKDOWN}, "text/markdown", ".md"),                               # the markup says so
    ({"content": "Twenty days a year.\n- ask first"}, "text/plain", ".txt"),       # no markup: plain
    ({"content": MARKDOWN, "path": "/hr/leave.txt"}, "text/plain", ".txt"),        # the path's suffix decides
    ({"content": "Twenty days a year.", "path": "/hr/leave.md"}, "text/markdown", ".md"),
    ({"content": MARKDOWN, "path": "/hr/leave"}, "text/markdown", "leave"),         # no suffix: the markup
    ({"content": "Twenty days.", "content_type": "text/markdown"}, "text/markdown", ".md"),  # named: wins
    ({"content": MARKDOWN, "content_type": "text/plain"}, "text/plain", ".txt"),
])
def test_text_document_type_from_content_type_then_path_then_markup(client, fields, content_type, suffix):
    response = client.post("/api/v1/documents", {**fields, "title": "Leave", "wait": True}, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["content_type"], body["path"].endswith(suffix)) == (content_type, True)
    assert Document.objects.get(pk=body["id"]).content_type == content_type


def test_blank_text_is_400(client):
    response = client.post("/api/v1/documents", {"content": "  \n "}, format="json")
    assert response.status_code == 400 and response.json()["code"] == "EMPTY_FILE"


def test_markdown_upload_with_size_strategy(client):
    text = "# Title\n\n" + "word " * 500
    file = SimpleUploadedFile("notes.md", text.encode(), content_type="application/octet-stream")
    body = upload(client, file, wait="true", chunk_strategy="size").json()
    assert body["content_type"] == "text/markdown" and body["status"] == "ready"
    assert (body["chunk_size"], body["chunk_overlap"]) == (1000, 200) and body["total_chunks"] == 3


def test_indexed_chunks_advance_per_batch(client, engine, settings):
    from tests.conftest import use_embedder

    use_embedder(settings, "tests.documents.providers.ProgressRecordingProvider", MODEL="all-MiniLM-L6-v2")
    engine(EMBEDDING_BATCH_SIZE=2)
    PROGRESS.clear()
    body = upload(client, pdf_file("nineteen-pages.pdf"), wait="true",
                  chunk_strategy="size").json()
    assert body["status"] == "ready" and body["total_chunks"] == body["indexed_chunks"] > 10
    assert [indexed for indexed, _ in PROGRESS] == list(range(0, body["total_chunks"], 2))


def test_pdf_pages_are_embedded_while_later_pages_are_read(client, engine, settings, extractor, monkeypatch):
    """page strategy on a PDF streams: each embedder call takes the pages read so far (with
    either extractor: pdfium's calls from the reader thread take turns on its lock). The reader
    stops after its fifth page until the embedder has been called: a pipeline that read every
    page before embedding would call it only after the reader gave up waiting (30 s)."""
    from memory_engine.chunking import chunk_pages
    from memory_engine.extraction import extract_pages
    from memory_engine.providers.embeddings import get_embedding_provider
    from memory_engine.services.documents import pipeline
    from tests.conftest import use_embedder
    from tests.documents import providers

    use_embedder(settings, "tests.documents.providers.ProgressRecordingProvider", MODEL="all-MiniLM-L6-v2")
    engine(EMBEDDING_BATCH_SIZE=4)
    PROGRESS.clear()
    embedding = threading.Event()
    called_while_reading: list[bool] = []
    read_pages = pipeline.iter_pages

    def reader_that_waits_for_the_embedder(*args, **kwargs):
        for number, page in enumerate(read_pages(*args, **kwargs), start=1):
            yield page
            if number == 5:  # pages 6 to 19 are read only once the embedder has been called
                called_while_reading.append(embedding.wait(timeout=30))

    monkeypatch.setattr(pipeline, "iter_pages", reader_that_waits_for_the_embedder)
    monkeypatch.setattr(providers, "ON_BATCH", [lambda texts: embedding.set()])
    name = "nineteen-pages.pdf"
    body = upload(client, pdf_file(name), wait="true").json()
    assert called_while_reading == [True]
    expected = chunk_pages(extract_pages(read_pdf(name), "application/pdf", pdf_extractor=extractor), strategy="page",
                           chunk_size=200, chunk_overlap=40, count_tokens=get_embedding_provider().count_tokens,
                           max_chars=32 * 1024)
    assert body["status"] == "ready" and body["total_chunks"] == body["indexed_chunks"] == len(expected) >= 19
    indexed = [done for done, _ in PROGRESS]
    assert len(indexed) >= 5 and indexed == sorted(indexed) and indexed[0] == 0
    stored = list(Chunk.objects.filter(document_id=body["id"]).order_by("chunk_index"))
    assert [(c.chunk_index, c.page, c.text) for c in stored] == [(e.chunk_index, e.page, e.text) for e in expected]


def test_a_failed_embedding_batch_is_stored_without_vectors(client, engine, settings):
    from tests.conftest import use_embedder

    use_embedder(settings, "tests.documents.providers.ProgressRecordingProvider", MODEL="all-MiniLM-L6-v2")
    engine(EMBEDDING_BATCH_SIZE=2)
    blocks = ["alpha " * 50, "beta. " * 50, ("FAIL_ME " + "gamma " * 50)[:300], "delta " * 50, "omega " * 50]
    assert all(len(block) == 300 for block in blocks)
    text = "".join(blocks)  # windows of 300 are the blocks; batches of 2: the 2nd batch fails
    body = client.post("/api/v1/documents", {"content": text, "chunk_strategy": "size", "chunk_size": 300,
                                             "chunk_overlap": 0, "wait": True}, format="json").json()
    assert body["status"] == "ready"
    chunks = list(Chunk.objects.filter(document_id=body["id"]).order_by("chunk_index"))
    missing = [chunk.chunk_index for chunk in chunks if chunk.embedding is None]
    assert body["unembedded_chunks"] == len(missing) == 2
    assert all(chunk.embedding_model == "" for chunk in chunks if chunk.embedding is None)


def test_failing_embedder_still_makes_the_document_lexically_searchable(client, project, failing_embedder):
    from memory_engine.selectors.search import SearchRequest, knowledge_search

    body = upload(client, pdf_file("four-pages.pdf"), wait="true").json()
    assert body["status"] == "ready"
    assert body["unembedded_chunks"] == body["total_chunks"] >= 4
    hits = knowledge_search(SearchRequest(project=project, query="hello", document_ids=[body["id"]],
                                          channels=("lexical",))).results
    assert hits and {h.document_id for h in hits} == {body["id"]}


def test_a_pdf_set_with_ligatures_is_found_by_its_words(client, project, extractor):
    from memory_engine.selectors.search import SearchRequest, knowledge_search

    body = upload(client, pdf_file("ligatures.pdf"), wait="true").json()
    assert body["status"] == "ready", body["error"]
    assert [chunk.text for chunk in Chunk.objects.filter(document_id=body["id"])] == [LIGATURE_TEXT]
    # A query copied from the PDF, ligatures and all, reads as its letters too.
    for query in ("fluid workflow", "\ufb02uid work\ufb02ow", "office filing"):
        hits = knowledge_search(SearchRequest(project=project, query=query, channels=("lexical",))).results
        assert [hit.document_id for hit in hits] == [body["id"]], query


def test_no_embedder_configured(client, no_embedder):
    body = upload(client, pdf_file("minimal.pdf"), wait="true").json()
    assert body["status"] == "ready" and body["unembedded_chunks"] == 1


def test_ingest_is_idempotent(client):
    body = upload(client, pdf_file("four-pages.pdf"), wait="true").json()
    ids = set(Chunk.objects.filter(document_id=body["id"]).values_list("pk", flat=True))
    document = document_ingest(document_id=body["id"])  # a duplicate delivery of the task
    assert document.status == "ready" and document.attempts == 1
    assert set(Chunk.objects.filter(document_id=body["id"]).values_list("pk", flat=True)) == ids


def test_reingest_with_new_settings_replaces_the_chunks(client, committed):
    body = upload(client, pdf_file("four-pages.pdf"), wait="true").json()
    old = set(Chunk.objects.filter(document_id=body["id"]).values_list("pk", flat=True))
    response = committed(client.post, f"/api/v1/documents/{body['id']}/ingest",
                         {"chunk_strategy": "whole"}, format="json")
    assert response.status_code == 202 and response.json()["status"] == "pending"
    document = Document.objects.get(pk=body["id"])
    assert (document.status, document.chunk_strategy, document.total_chunks) == ("ready", "whole", 1)
    assert not old & set(document.chunks.values_list("pk", flat=True))
    # The new settings stick for later re-ingests without settings.
    document = committed(document_reingest, document=document)
    document.refresh_from_db()
    assert document.chunk_strategy == "whole" and document.total_chunks == 1


def test_failed_reingest_keeps_the_previous_chunks(client, committed):
    body = upload(client, pdf_file("minimal.pdf"), wait="true").json()
    document = Document.objects.get(pk=body["id"])
    Path(document.file.path).write_bytes(b"%PDF-1.4\n garbage")  # the stored file got damaged
    committed(document_reingest, document=document)
    document.refresh_from_db()
    assert document.status == "failed" and document.error["code"] == "PDF_DAMAGED"
    assert document.total_chunks == document.chunks.count() == 1


def test_delete_removes_chunks_and_the_stored_file(client, committed):
    body = upload(client, pdf_file("minimal.pdf"), wait="true").json()
    path = Path(Document.objects.get(pk=body["id"]).file.path)
    assert path.exists()
    response = committed(client.delete, f"/api/v1/documents/{body['id']}")
    assert response.status_code == 204
    assert not Document.objects.exists() and not Chunk.objects.exists() and not path.exists()


def test_sha256_and_size_are_recorded(client):
    data = read_pdf("minimal.pdf")
    body = upload(client, pdf_file("minimal.pdf"), wait="true").json()
    assert body["sha256"] == hashlib.sha256(data).hexdigest() and body["size_bytes"] == len(data)
