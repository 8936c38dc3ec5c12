"""document_ingest_many: embedder batches shared across documents, failures kept per document."""

from __future__ import annotations

import math

import pytest

from memory_engine.models import Chunk, Document
from memory_engine.providers.embeddings import EmbeddingError
from memory_engine.selectors.search import knowledge_search
from memory_engine.services.documents import (
    Upload,
    document_create,
    document_create_text,
    document_ingest_many,
    document_reingest,
)
from tests.conftest import use_embedder

from .providers import ON_BATCH

WORDS = ["apricot", "bramble", "cinnabar", "dulcimer", "ember", "fjord", "gossamer", "halcyon", "isthmus",
         "juniper", "kestrel"]


@pytest.fixture
def calls(settings, engine):
    """The sizes of the embedder calls made while the test runs (batch size 4)."""
    use_embedder(settings, "tests.documents.providers.ProgressRecordingProvider", MODEL="all-MiniLM-L6-v2")
    engine(EMBEDDING_BATCH_SIZE=4)
    sizes: list[int] = []
    ON_BATCH.append(lambda texts: sizes.append(len(texts)))
    yield sizes
    ON_BATCH.clear()


def small_documents(project, words=WORDS):
    return [document_create_text(project=project, content=f"A short note about the {word} and nothing else.",
                                 path=f"/notes/{word}.txt", enqueue=False) for word in words]


def test_small_documents_share_embedder_calls(project, calls):
    documents = small_documents(project)
    calls.clear()  # token counting is not an embedder call, but start from nothing all the same
    ingested = document_ingest_many(document_ids=[document.pk for document in documents])

    chunks = Chunk.objects.filter(document__in=documents).count()
    assert chunks == len(WORDS)  # one chunk each
    assert len(calls) == math.ceil(chunks / 4) and calls == [4, 4, 3]
    assert [document.pk for document in ingested] == [document.pk for document in documents]
    assert all(d.status == "ready" and d.unembedded_chunks == 0 and d.total_chunks == 1 for d in ingested)
    for word, document in zip(WORDS, documents, strict=True):
        for channel in ("vector", "lexical"):
            hits = knowledge_search(project=project, query=f"the {word}", channels=(channel,), limit=20).results
            assert document.pk in {hit.document_id for hit in hits}, (word, channel)


def test_one_document_is_the_bulk_path_with_one_document(project, calls):
    from memory_engine.services.documents import document_ingest

    document = small_documents(project, ["solitary"])[0]
    calls.clear()
    ingested = document_ingest(document_id=document.pk)
    assert ingested.status == "ready" and ingested.total_chunks == 1 and calls == [1]


def test_a_poisoned_document_fails_alone_and_is_retryable(project, calls):
    poisoned = {"on": True}

    def refuse(texts):
        if poisoned["on"] and any("halcyon" in text for text in texts):
            raise EmbeddingError("the embedder refuses this text")

    ON_BATCH.append(refuse)
    documents = small_documents(project)
    damaged = document_create(project=project, upload=Upload(b"%PDF-1.4\nnot really a pdf", filename="bad.pdf"),
                              path="/notes/bad.pdf", enqueue=False)
    ids = [document.pk for document in documents]
    ids.insert(3, damaged.pk)
    ingested = {document.pk: document for document in document_ingest_many(document_ids=ids)}

    bad = ingested[damaged.pk]
    assert bad.status == "failed" and bad.error["code"] and not bad.chunks.exists()
    victim = next(document for document in documents if document.path == "/notes/halcyon.txt")
    assert ingested[victim.pk].status == "ready" and ingested[victim.pk].unembedded_chunks == 1
    others = [ingested[document.pk] for document in documents if document.pk != victim.pk]
    assert all(d.status == "ready" and d.unembedded_chunks == 0 for d in others)
    assert not Chunk.objects.filter(document__in=others, embedding__isnull=True).exists()

    poisoned["on"] = False  # the embedder recovered: re-ingesting embeds it
    document_reingest(document=Document.objects.get(pk=victim.pk), enqueue=False)
    again = document_ingest_many(document_ids=[victim.pk])[0]
    assert again.status == "ready" and again.unembedded_chunks == 0
    assert not Chunk.objects.filter(document_id=victim.pk, embedding__isnull=True).exists()


def test_a_large_document_among_small_ones_keeps_its_own_batches(project, calls):
    small = small_documents(project, WORDS[:3])
    large = document_create_text(project=project, content="".join(f"Block {i}: " + "lorem " * 60 + "\n\n"
                                                                  for i in range(6)),
                                 path="/notes/large.txt", chunk_strategy="size", chunk_size=300, chunk_overlap=0,
                                 enqueue=False)
    calls.clear()
    ingested = document_ingest_many(document_ids=[small[0].pk, large.pk, small[1].pk, small[2].pk])
    assert all(document.status == "ready" and document.unembedded_chunks == 0 for document in ingested)
    total = sum(document.total_chunks for document in ingested)
    assert ingested[1].total_chunks > 4
    assert sum(calls) == total and len(calls) == math.ceil(ingested[1].total_chunks / 4) + 1


def test_the_reingest_command_shares_embedder_calls(project, calls):
    from io import StringIO

    from django.core.management import call_command

    documents = small_documents(project)
    document_ingest_many(document_ids=[document.pk for document in documents])
    calls.clear()
    out = StringIO()
    call_command("memory_engine_reingest", "--project", str(project.pk), stdout=out, stderr=StringIO())
    assert calls == [4, 4, 3], out.getvalue()
    assert f"{len(WORDS)} document(s): {len(WORDS)} ready." in out.getvalue()
    assert all(d.status == "ready" and d.unembedded_chunks == 0 for d in Document.objects.filter(project=project))
