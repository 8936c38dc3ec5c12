"""document_ingest_many: embedder batches shared across documents, failures kept per document."""

from __future__ import annotations

import math

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory_engine.models import Chunk, Document
from memory_engine.providers.embeddings import EmbeddingError
from memory_engine.selectors.search import SearchRequest, knowledge_search
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
            hits = knowledge_search(SearchRequest(project=project, query=f"the {word}", channels=(channel,),
                                                  limit=20)).results
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


@pytest.fixture
def chunk_insert_refused(db):
    """A real PostgreSQL trigger that refuses to store a chunk whose text contains "poison"."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("""
            CREATE FUNCTION test_refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF NEW.text LIKE '%poison%' THEN RAISE EXCEPTION 'chunk refused by the test trigger'; END IF;
                RETURN NEW;
            END $$;
            CREATE TRIGGER test_refuse_poison BEFORE INSERT ON memory_engine_chunk
                FOR EACH ROW EXECUTE FUNCTION test_refuse_poison();
        """)
    yield
    with connection.cursor() as cursor:
        cursor.execute("DROP TRIGGER IF EXISTS test_refuse_poison ON memory_engine_chunk; "
                       "DROP FUNCTION IF EXISTS test_refuse_poison();")


def test_a_batch_lands_in_shared_statements_with_its_rows(project, hashing_embedder):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from memory_engine.models import DocumentVersion

    words = [f"{word}{n}" for n in range(2) for word in WORDS]  # 22 one-chunk documents, one batch of 32
    documents = small_documents(project, words)
    with CaptureQueriesContext(connection) as queries:
        ingested = document_ingest_many(document_ids=[document.pk for document in documents])

    # The per-document claim, swap and activation are shared by the batch (they were ~9
    # statements a document): fewer statements than documents.
    assert len(queries) < len(documents), [query["sql"][:80] for query in queries]
    for document in ingested:
        assert document.status == "ready" and document.attempts == 1 and document.error is None
        assert document.total_chunks == document.indexed_chunks == 1 and document.unembedded_chunks == 0
        assert "run" not in document.converter_state and document.heartbeat_at == document.ingested_at
        version = DocumentVersion.objects.get(document=document)
        assert version.status == "active" and version.activated_at is not None
        assert document.active_version_id == version.pk
        chunk = Chunk.objects.get(document=document)
        assert chunk.version_id == version.pk and chunk.embedding is not None and chunk.chunk_index == 0

    # Again (a re-ingest of the whole batch): the chunks are replaced, the versions stay.
    for document in ingested:
        document_reingest(document=document, enqueue=False)
    again = document_ingest_many(document_ids=[document.pk for document in documents])
    assert all(d.status == "ready" and d.attempts == 1 for d in again)
    assert Chunk.objects.filter(document__in=documents).count() == len(documents)
    assert DocumentVersion.objects.filter(document__in=documents, status="active").count() == len(documents)
    assert all(d.active_version_id == a.active_version_id for d, a in zip(ingested, again, strict=True))


def test_a_document_the_database_refuses_fails_alone_and_is_retryable(project, hashing_embedder,
                                                                        chunk_insert_refused):
    from io import StringIO

    from django.core.management import call_command
    from django.db import connection

    documents = small_documents(project)
    poisoned = document_create_text(project=project, content="A short note about poison ivy.",
                                    path="/notes/poison.txt", enqueue=False)
    ids = [document.pk for document in documents]
    ids.insert(5, poisoned.pk)
    ingested = {document.pk: document for document in document_ingest_many(document_ids=ids)}

    failed = ingested[poisoned.pk]
    assert failed.status == "failed" and failed.error["code"] == "INGESTION_ERROR"
    assert "refused by the test trigger" in failed.error["details"]["error"]
    assert not failed.chunks.exists() and failed.versions.get().status == "failed"
    assert all(ingested[document.pk].status == "ready" for document in documents)
    assert Chunk.objects.filter(document__in=documents).count() == len(documents)

    with connection.cursor() as cursor:  # the database takes it again: re-ingesting the failed ones lands it
        cursor.execute("DROP TRIGGER test_refuse_poison ON memory_engine_chunk")
    out = StringIO()
    call_command("memory_engine_reingest", "--status", "failed", stdout=out, stderr=StringIO())
    assert "1 document(s): 1 ready." in out.getvalue(), out.getvalue()
    again = Document.objects.get(pk=poisoned.pk)
    assert again.status == "ready" and again.error is None and again.chunks.count() == 1
    assert again.active_version.status == "active"


def test_a_document_reingested_during_the_batch_is_left_to_its_new_run(project, calls):
    documents = small_documents(project, WORDS[:4])
    moved = documents[2]

    def reingest_once(texts):
        if Document.objects.get(pk=moved.pk).status == "processing":
            document_reingest(document=Document.objects.get(pk=moved.pk), enqueue=False)

    ON_BATCH.append(reingest_once)
    ingested = document_ingest_many(document_ids=[document.pk for document in documents])

    assert [d.status for d in ingested] == ["ready", "ready", "pending", "ready"]
    assert not Chunk.objects.filter(document=moved).exists()
    ON_BATCH.remove(reingest_once)
    assert document_ingest_many(document_ids=[moved.pk])[0].status == "ready"


def test_documents_waiting_behind_a_long_one_keep_their_heartbeat(project, calls, engine):
    import time

    engine(INGESTION_HEARTBEAT_TIMEOUT=0.4)  # renewed every 0.1 s while they wait
    large = document_create_text(project=project, content="".join(f"Block {i}: " + "lorem " * 60 + "\n\n"
                                                                  for i in range(6)),
                                 path="/notes/large.txt", chunk_strategy="size", chunk_size=300, chunk_overlap=0,
                                 enqueue=False)
    small = small_documents(project, WORDS[:2])
    heartbeats = []

    def watch(texts):
        heartbeats.append(Document.objects.get(pk=small[1].pk).heartbeat_at)
        if any("lorem" in text for text in texts):
            time.sleep(0.15)

    ON_BATCH.append(watch)
    ingested = document_ingest_many(document_ids=[large.pk, small[0].pk, small[1].pk])
    ON_BATCH.remove(watch)

    assert all(document.status == "ready" for document in ingested)
    # Claimed with the large one, the small one waited behind it (one call per batch of 4 chunks,
    # 0.15 s each) and had its heartbeat renewed before its own embedder call.
    assert len(heartbeats) >= 3 and heartbeats[0] == heartbeats[1]
    assert (heartbeats[-1] - heartbeats[0]).total_seconds() >= 0.25


def test_a_worker_task_takes_the_small_documents_waiting_in_its_project(project, other_project, calls, engine):
    """The ingestion task of one small document ingests the other small pending documents of its
    project with it (embedder batches shared); other projects' and large documents wait for
    their own tasks, whose later run finds their documents ready and does nothing."""
    from memory_engine.tasks import document_ingest_task

    engine(EMBEDDING_BATCH_SIZE=4, INGESTION_GROUP_DOCUMENTS=6, INGESTION_GROUP_MAX_BYTES=200)
    documents = small_documents(project, WORDS[:7])
    elsewhere = small_documents(other_project, ["elsewhere"])[0]
    large = document_create_text(project=project, content="A long note. " * 40, path="/notes/large.txt",
                                 enqueue=False)
    calls.clear()

    assert document_ingest_task(documents[2].pk) == "ready"

    status = dict(Document.objects.values_list("pk", "status"))
    taken = [documents[2], *[d for d in documents if d is not documents[2]][:5]]  # itself, then the oldest
    assert [status[d.pk] for d in taken] == ["ready"] * 6
    assert status[documents[6].pk] == "pending"  # beyond INGESTION_GROUP_DOCUMENTS
    assert status[elsewhere.pk] == "pending" and status[large.pk] == "pending"
    assert calls == [4, 2]  # six one-chunk documents in two embedder calls, not six

    # their own queued tasks come later: nothing ingested twice; a task still takes what waits
    calls.clear()
    assert document_ingest_task(documents[0].pk) == "ready"
    assert Document.objects.get(pk=documents[0].pk).attempts == 1
    assert Document.objects.get(pk=documents[6].pk).status == "ready" and calls == [1]
    calls.clear()
    assert document_ingest_task(large.pk) == "ready" and calls == [1]  # a large document goes alone
    assert Document.objects.get(pk=elsewhere.pk).status == "pending"
    assert Chunk.objects.filter(document__in=documents).count() == 7

    # once nothing waits, a task whose document an earlier group took reads two rows and stops
    with CaptureQueriesContext(connection) as queries:
        assert document_ingest_task(documents[1].pk) == "ready"
    assert len(queries) == 2, [query["sql"] for query in queries.captured_queries]
    assert Document.objects.get(pk=documents[1].pk).attempts == 1


def test_one_document_per_task_when_grouping_is_off(project, calls, engine):
    from memory_engine.tasks import document_ingest_task

    engine(EMBEDDING_BATCH_SIZE=4, INGESTION_GROUP_DOCUMENTS=1)
    documents = small_documents(project, WORDS[:3])
    calls.clear()
    assert document_ingest_task(documents[0].pk) == "ready"
    assert list(Document.objects.filter(pk__in=[d.pk for d in documents]).order_by("created_at")
                .values_list("status", flat=True)) == ["ready", "pending", "pending"]
    assert calls == [1]
