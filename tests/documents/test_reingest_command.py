"""manage.py memory_engine_reingest."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from memory_engine.models import Document

from .conftest import pdf_file, upload

pytestmark = pytest.mark.usefixtures("hashing_embedder")


def run(*args: str) -> str:
    out, err = StringIO(), StringIO()
    call_command("memory_engine_reingest", *args, stdout=out, stderr=err)
    assert "re-ingest [" in err.getvalue() or "No documents" in out.getvalue() or "--dry-run" in args
    return out.getvalue()


def test_reingest_by_prefix_with_new_settings(client):
    upload(client, pdf_file("four-pages.pdf"), path="/a/four.pdf", wait="true")
    upload(client, pdf_file("minimal.pdf"), path="/b/one.pdf", wait="true")
    output = run("--path-prefix", "/a/", "--strategy", "size", "--chunk-size", "300", "--chunk-overlap", "30")
    four = Document.objects.get(path="/a/four.pdf")
    assert (four.chunk_strategy, four.chunk_size, four.chunk_overlap) == ("size", 300, 30)
    assert four.status == "ready" and four.total_chunks > 4
    assert Document.objects.get(path="/b/one.pdf").chunk_strategy == "page"
    assert "/a/four.pdf" in output and "1 document(s): 1 ready." in output
    assert "path" in output.splitlines()[0] and "status" in output.splitlines()[0]


def test_reingest_failed_only_and_summary_shows_errors(client):
    upload(client, pdf_file("scanned.pdf"), path="/scan.pdf", wait="true")
    upload(client, pdf_file("minimal.pdf"), path="/ok.pdf", wait="true")
    before = Document.objects.get(path="/ok.pdf").ingested_at
    output = run("--status", "failed")
    assert "NO_TEXT_LAYER" in output and "1 failed" in output
    assert Document.objects.get(path="/ok.pdf").ingested_at == before
    assert Document.objects.get(path="/scan.pdf").attempts == 1


def test_by_document_id_dry_run_and_errors(client):
    doc = upload(client, pdf_file("minimal.pdf"), wait="true").json()
    assert "would be re-ingested" in run("--document", doc["id"], "--dry-run")
    with pytest.raises(CommandError, match="No such document"):
        run("--document", "doc_nope")
    with pytest.raises(CommandError, match="CHUNK_SETTINGS_INVALID"):
        run("--document", doc["id"], "--strategy", "size", "--chunk-size", "10", "--chunk-overlap", "10")
    assert "No documents match." in run("--path-prefix", "/nothing/")


def test_background_only_queues(client, committed):
    doc = upload(client, pdf_file("minimal.pdf"), wait="true").json()
    output = committed(run, "--document", doc["id"], "--background")
    assert "1 document(s): 1 pending." in output
    assert Document.objects.get(pk=doc["id"]).status == "ready"  # the queued task ran on commit
