"""Chunking through the API: recursive defaults for text, the settings reported, the caps.

The retrieval assertion uses the real default embedder (ONNX MiniLM); the size and cap
tests use the hashing embedder where meaning does not matter.
"""

from __future__ import annotations

import random

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from memory_engine.models import Chunk, Document
from tests.conftest import finishes_within

from .conftest import assert_chunks_cover, upload

SEARCH = "/api/v1/knowledge/search"
FACT = ("The Lisbon office replaced its backup diesel generator on 12 March, after the old unit "
        "failed the quarterly load test twice.")
QUESTION = "When did the Lisbon office replace its backup generator?"


def report_text(target_bytes: int, *, seed: int = 12, fact_at: float | None = 0.5) -> str:
    """A plain-text report of varied paragraphs (deterministic), with FACT in the middle."""
    rng = random.Random(seed)
    teams = ["payments", "search", "mobile", "data platform", "security", "support", "billing", "identity"]
    things = ["release checklist", "on-call rota", "incident review", "budget forecast", "vendor contract",
              "latency dashboard", "hiring plan", "test coverage report", "migration runbook"]
    findings = ["response times improved after the cache was resized", "two alerts fired without a runbook",
                "the backlog shrank by a third", "costs rose because of a duplicated storage bucket",
                "customers asked for clearer error messages", "the rollout paused for a config fix",
                "a flaky test hid a real race condition", "the new dashboard replaced three old ones"]
    paragraphs: list[str] = []
    size = 0
    while size < target_bytes:
        sentences = [f"The {rng.choice(teams)} team reviewed the {rng.choice(things)} in week {rng.randint(1, 52)} "
                     f"and noted that {rng.choice(findings)}." for _ in range(rng.randint(3, 7))]
        paragraphs.append(" ".join(sentences))
        size += len(paragraphs[-1]) + 2
    if fact_at is not None:
        paragraphs.insert(int(len(paragraphs) * fact_at), FACT)
    return "\n\n".join(paragraphs)


def text_upload(text: str, name: str = "report.txt") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, text.encode(), content_type="text/plain")


def best_hit(client, path: str) -> dict:
    response = client.post(SEARCH, {"query": QUESTION, "document_paths": [path], "channels": ["vector"],
                                    "limit": 5}, format="json")
    assert response.status_code == 200, response.json()
    return response.json()["results"][0]


def test_a_34_kb_text_becomes_many_chunks_and_its_fact_is_found(client, engine):
    text = report_text(34_000)
    assert 33_000 < len(text) < 36_000
    engine(MAX_CHUNK_CHARS=100_000)  # lets the old behaviour (one chunk) run for comparison
    new = upload(client, text_upload(text), wait="true").json()
    old = upload(client, text_upload(text, "whole.txt"), wait="true", chunk_strategy="whole").json()
    assert new["status"] == old["status"] == "ready", (new["error"], old["error"])

    # The answer reports the settings actually used (tokens of the default embedder).
    assert (new["chunk_strategy"], new["chunk_size"], new["chunk_overlap"]) == ("recursive", 200, 40)
    assert (old["chunk_strategy"], old["chunk_size"], old["chunk_overlap"]) == ("whole", None, None)
    assert old["total_chunks"] == 1 and new["total_chunks"] > 30
    chunks = list(Chunk.objects.filter(document_id=new["id"]).order_by("chunk_index"))
    assert_chunks_cover(chunks, text)
    from memory_engine.providers.embeddings import get_embedding_provider

    tokens = get_embedding_provider().count_tokens([chunk.text for chunk in chunks])
    assert max(tokens) <= 200 and min(tokens[:-1]) >= 100  # within the min/max bounds
    assert all(len(chunk.text) < 2000 for chunk in chunks)

    hit = best_hit(client, "/report.txt")
    assert FACT in hit["text"] and len(hit["text"]) < 2000
    whole = best_hit(client, "/whole.txt")
    assert len(whole["text"]) == len(text)
    assert hit["similarity_score"] > 0.6 and hit["similarity_score"] > whole["similarity_score"] + 0.3


def test_text_created_through_the_api_defaults_to_recursive(client):
    text = report_text(6_000, fact_at=None)
    body = client.post("/api/v1/documents", {"content": text, "path": "/notes.md", "wait": True},
                       format="json").json()
    assert body["status"] == "ready" and body["content_type"] == "text/markdown"
    assert (body["chunk_strategy"], body["chunk_size"], body["chunk_overlap"]) == ("recursive", 200, 40)
    assert body["total_chunks"] > 3


@pytest.mark.usefixtures("hashing_embedder")
class TestSettingsAndCaps:
    def test_request_then_rule_then_default(self, client, project):
        from memory_engine.models import IngestionRule

        IngestionRule.objects.create(project=project, content_type_glob="text/plain",
                                     converter_type="callable", converter_path="tests.documents.providers."
                                     "pages_converter", chunk_strategy="size", chunk_size=500, chunk_overlap=50)
        text = report_text(3_000, fact_at=None)
        ruled = upload(client, text_upload(text, "a.txt"), wait="true").json()
        assert (ruled["chunk_strategy"], ruled["chunk_size"], ruled["chunk_overlap"]) == ("size", 500, 50)
        asked = upload(client, text_upload(text, "b.txt"), wait="true", chunk_strategy="recursive",
                       chunk_size=64).json()
        # The request's strategy and size; the rule's overlap (the request named none).
        assert (asked["chunk_strategy"], asked["chunk_size"], asked["chunk_overlap"]) == ("recursive", 64, 50)
        default = upload(client, SimpleUploadedFile("c.md", text.encode(), content_type="text/markdown"),
                         wait="true").json()
        assert (default["chunk_strategy"], default["chunk_size"], default["chunk_overlap"]) == ("recursive", 200, 40)

    def test_too_many_chunks_fails_with_a_stable_code_and_keeps_nothing(self, client, engine):
        engine(MAX_CHUNKS_PER_DOCUMENT=10)
        body = upload(client, text_upload(report_text(20_000)), wait="true").json()
        assert body["status"] == "failed"
        assert body["error"]["code"] == "TOO_MANY_CHUNKS"
        assert "MAX_CHUNKS_PER_DOCUMENT" in body["error"]["message"]
        assert body["error"]["details"]["max_chunks"] == 10
        assert body["total_chunks"] == 0 and not Chunk.objects.filter(document_id=body["id"]).exists()

    def test_a_whole_chunk_over_the_cap_fails_instead_of_being_truncated(self, client, engine):
        engine(MAX_CHUNK_CHARS=1000)
        body = upload(client, text_upload(report_text(5_000)), wait="true", chunk_strategy="whole").json()
        assert body["status"] == "failed" and body["error"]["code"] == "CHUNK_TOO_LARGE"
        assert "MAX_CHUNK_CHARS" in body["error"]["message"]

    def test_a_size_window_over_the_cap_is_refused_up_front(self, client, engine):
        engine(MAX_CHUNK_CHARS=1000)
        response = upload(client, text_upload("some text"), chunk_strategy="size", chunk_size=2000,
                          chunk_overlap=0)
        assert response.status_code == 400 and response.json()["code"] == "CHUNK_SETTINGS_INVALID"
        assert "MAX_CHUNK_CHARS" in response.json()["message"]
        assert not Document.objects.exists()

    def test_every_chunk_respects_the_character_cap(self, client, engine):
        engine(MAX_CHUNK_CHARS=300)
        text = report_text(10_000) + "\n\n" + "x" * 5_000  # and one "word" longer than the cap
        body = upload(client, text_upload(text), wait="true").json()
        assert body["status"] == "ready"
        lengths = list(Chunk.objects.filter(document_id=body["id"]).values_list("text", flat=True))
        assert max(len(text) for text in lengths) <= 300

    def test_a_large_text_fails_fast_and_bounded_at_the_chunk_cap(self, client, engine, settings):
        """A few MB standing for the 50 MB case: the cap stops chunking (and token counting) early."""
        from tests.conftest import use_embedder

        use_embedder(settings, "tests.documents.providers.TokenCountingProvider", MODEL="test-hashing")
        from .providers import COUNTED

        COUNTED.clear()
        engine(MAX_CHUNKS_PER_DOCUMENT=200, MAX_UPLOAD_BYTES=8 * 1024 * 1024,
               SYNC_INGESTION_MAX_BYTES=8 * 1024 * 1024)
        text = report_text(4 * 1024 * 1024, fact_at=None)
        with finishes_within(120):  # stops at the cap instead of chunking 4 MB
            body = upload(client, text_upload(text, "big.txt"), wait="true").json()
        assert body["status"] == "failed" and body["error"]["code"] == "TOO_MANY_CHUNKS"
        # Only the beginning of the text was ever counted: about 201 chunks' worth, not 4 MB.
        assert 0 < sum(COUNTED) < len(text) // 10

    def test_a_large_text_under_the_cap_completes(self, client, engine):
        engine(MAX_UPLOAD_BYTES=4 * 1024 * 1024, SYNC_INGESTION_MAX_BYTES=4 * 1024 * 1024)
        text = report_text(1024 * 1024, fact_at=None)
        body = upload(client, text_upload(text, "big.txt"), wait="true").json()
        assert body["status"] == "ready", body["error"]
        assert body["total_chunks"] == body["indexed_chunks"] > 1000
        longest = max(len(t) for t in Chunk.objects.filter(document_id=body["id"]).values_list("text", flat=True))
        assert longest < 1500
