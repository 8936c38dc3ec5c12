"""Re-ingest atomicity, run fencing, the sweep, and a real worker killed mid-ingest."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.utils import timezone

from memory_engine.models import Chunk, Document
from memory_engine.services.documents import document_ingest, document_reingest, document_sweep
from memory_engine.services.ingestion_rules import ingestion_rule_save
from tests.conftest import use_embedder, wait_for

from .conftest import pdf_file, upload
from .providers import ON_BATCH

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


@pytest.fixture
def recording_embedder(settings, engine):
    use_embedder(settings, "tests.documents.providers.ProgressRecordingProvider", MODEL="all-MiniLM-L6-v2")
    engine(EMBEDDING_BATCH_SIZE=2)
    ON_BATCH.clear()
    yield
    ON_BATCH.clear()


def chunk_ids_seen_by_another_connection(document_id: str) -> frozenset[str]:
    """What a concurrent reader (its own connection, its own snapshot) sees right now."""
    seen: list[frozenset[str]] = []

    def read() -> None:
        try:
            seen.append(frozenset(Chunk.objects.filter(document_id=document_id).values_list("pk", flat=True)))
        finally:
            connection.close()

    thread = threading.Thread(target=read)
    thread.start()
    thread.join()
    return seen[0]


@pytest.mark.django_db(transaction=True)
def test_reingest_swaps_the_chunk_set_atomically(client, recording_embedder):
    body = upload(client, pdf_file("four-pages.pdf"), wait="true").json()
    old = frozenset(Chunk.objects.filter(document_id=body["id"]).values_list("pk", flat=True))
    assert len(old) == body["total_chunks"] >= 4
    during: list[frozenset[str]] = []
    ON_BATCH.append(lambda texts: during.append(chunk_ids_seen_by_another_connection(body["id"])))

    observed: list[frozenset[str]] = []
    stop = threading.Event()

    def poll() -> None:
        try:
            while not stop.is_set():
                observed.append(frozenset(
                    Chunk.objects.filter(document_id=body["id"]).values_list("pk", flat=True)))
        finally:
            connection.close()

    reader = threading.Thread(target=poll)
    reader.start()
    try:
        document = document_reingest(document=Document.objects.get(pk=body["id"]), chunk_strategy="size",
                                     chunk_size=200, chunk_overlap=20)  # committed: the task ran on commit
    finally:
        stop.set()
        reader.join()
    document.refresh_from_db()
    new = frozenset(document.chunks.values_list("pk", flat=True))
    assert document.status == "ready" and len(new) == document.total_chunks > 4 and not old & new
    assert during and all(seen == old for seen in during)  # embedding happens before the swap
    assert observed and set(observed) <= {old, new}, "a reader saw a mix of old and new chunks"
    assert observed[-1] == new


@pytest.mark.django_db
def test_a_superseded_run_cannot_write(client, recording_embedder, committed):
    body = upload(client, pdf_file("four-pages.pdf"), wait="true").json()
    document = Document.objects.get(pk=body["id"])
    committed(document_reingest, document=document, enqueue=False)

    def reingest_mid_run(texts):  # a new re-ingest lands while the first run is embedding
        ON_BATCH.clear()
        document_reingest(document=document, chunk_strategy="whole", enqueue=False)

    ON_BATCH.append(reingest_mid_run)
    document_ingest(document_id=document.pk)  # run 1 loses its claim and stops quietly
    document.refresh_from_db()
    assert document.status == "pending" and document.total_chunks == body["total_chunks"]
    document_ingest(document_id=document.pk)  # the re-ingest's own task
    document.refresh_from_db()
    assert document.status == "ready" and document.chunk_strategy == "whole" and document.total_chunks == 1


@pytest.mark.django_db
def test_sweep_requeues_a_stalled_document_and_it_finishes(client, committed, hashing_embedder):
    body = upload(client, pdf_file("minimal.pdf"), wait="true").json()
    stale = timezone.now() - timezone.timedelta(hours=1)
    Document.objects.filter(pk=body["id"]).update(status="processing", heartbeat_at=stale, attempts=1,
                                                  converter_state={"run": "dead-worker"})
    assert committed(document_sweep)["requeued"] == 1
    document = Document.objects.get(pk=body["id"])
    assert document.status == "ready" and document.attempts == 2


@pytest.mark.django_db
def test_sweep_fails_a_document_after_max_attempts(client, committed, hashing_embedder, engine):
    engine(INGESTION_MAX_ATTEMPTS=2)
    body = upload(client, pdf_file("minimal.pdf"), wait="true").json()
    stale = timezone.now() - timezone.timedelta(hours=1)
    Document.objects.filter(pk=body["id"]).update(status="processing", heartbeat_at=stale, attempts=2)
    assert committed(document_sweep)["failed"] == 1
    document = Document.objects.get(pk=body["id"])
    assert document.status == "failed" and document.error["code"] == "INGESTION_STALLED"
    assert document.error["details"]["attempts"] == 2 and "re-ingest" in document.error["message"]


@pytest.mark.django_db
def test_sweep_requeues_a_pending_document_whose_task_was_lost(client, committed, hashing_embedder):
    body = upload(client, pdf_file("minimal.pdf")).json()  # no commit hooks: task never ran
    assert Document.objects.get(pk=body["id"]).status == "pending"
    assert committed(document_sweep)["requeued"] == 0  # not stale yet
    Document.objects.filter(pk=body["id"]).update(updated_at=timezone.now() - timezone.timedelta(hours=1))
    assert committed(document_sweep)["requeued"] == 1
    assert Document.objects.get(pk=body["id"]).status == "ready"


@pytest.mark.django_db
def test_fresh_heartbeat_is_left_alone(client, committed, hashing_embedder):
    body = upload(client, pdf_file("minimal.pdf"), wait="true").json()
    Document.objects.filter(pk=body["id"]).update(status="processing", heartbeat_at=timezone.now())
    assert committed(document_sweep) == {"requeued": 0, "failed": 0, "timed_out": 0, "skipped": 0}


def test_sweep_schedule_exists_after_migrate(db):
    from django_q.models import Schedule

    from memory_engine.queue import SWEEP_SCHEDULE_NAME, SWEEP_TASK

    schedule = Schedule.objects.get(name=SWEEP_SCHEDULE_NAME)
    assert schedule.func == SWEEP_TASK and schedule.schedule_type == Schedule.MINUTES


# --- a real django-q2 worker ------------------------------------------------------------------


def process_alive(pid: int) -> bool:
    """Running (a killed child not yet reaped by its new parent is a zombie: not alive)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


def test_end_to_end_with_a_real_worker(qcluster, client):
    response = upload(client, pdf_file("four-pages.pdf"), path="/e2e/four.pdf")
    assert response.status_code == 202 and response.json()["status"] == "pending"
    document_id = response.json()["id"]

    def finished():
        return client.get(f"/api/v1/documents/{document_id}/status").json()["status"] in ("ready", "failed")

    wait_for(finished, timeout=120)
    status = client.get(f"/api/v1/documents/{document_id}/status").json()
    assert status["status"] == "ready", status
    assert status["indexed_chunks"] == status["total_chunks"] >= 4 and status["unembedded_chunks"] == 0
    chunks = client.get(f"/api/v1/documents/{document_id}/chunks").json()["results"]
    assert sorted({chunk["page"] for chunk in chunks}) == [1, 2, 3, 4]
    assert all(chunk["has_embedding"] and chunk["embedding_model"] for chunk in chunks)


def test_worker_killed_mid_ingest_is_recovered_by_the_sweep(qcluster, client, project, tmp_path, monkeypatch,
                                                            engine, hashing_embedder):
    engine(CONVERTER_CALLABLE_PREFIXES=["tests.documents."])
    ingestion_rule_save(project=project, content_type_glob="image/png", converter_type="callable",
                        converter_path="tests.documents.providers.sleepy_converter", converter_timeout=600)
    marker = tmp_path / "marker"
    response = upload(client, SimpleUploadedFile("slow.png", PNG), metadata=f'{{"marker": "{marker}"}}')
    assert response.status_code == 202
    document_id = response.json()["id"]

    # The worker is inside the (slow) converter: status processing, attempt 1.
    wait_for(lambda: Path(f"{marker}.attempt1").exists(), timeout=120)
    worker_pid = int(Path(f"{marker}.attempt1").read_text())
    assert worker_pid != os.getpid()
    document = Document.objects.get(pk=document_id)
    assert (document.status, document.attempts) == ("processing", 1)

    os.killpg(qcluster.pid, signal.SIGKILL)  # the whole cluster dies, no cleanup code runs
    qcluster.wait(timeout=20)
    time.sleep(0.5)
    assert not process_alive(worker_pid)
    document.refresh_from_db()
    assert document.status == "processing"  # stuck: nobody will finish it

    # The sweep notices the stalled heartbeat and re-runs the ingestion.
    engine(INGESTION_HEARTBEAT_TIMEOUT=1)
    time.sleep(1.2)
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", True)  # run the re-enqueued task here, as a worker would
    counts = document_sweep()
    assert counts["requeued"] == 1
    document.refresh_from_db()
    assert document.status == "ready", document.error
    assert document.attempts == 2 and Path(f"{marker}.attempt2").exists()
    assert list(document.chunks.values_list("page", flat=True)) == [1, 2]
