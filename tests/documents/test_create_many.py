"""document_create_many: many documents in one transaction, the rows of one-by-one creation, all or none."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import DataError
from django_q.models import Task

from memory_engine.exceptions import MemoryEngineError
from memory_engine.models import Document, DocumentVersion, RawCapture
from memory_engine.selectors.search import SearchRequest, knowledge_search
from memory_engine.services.documents import (
    Lineage,
    NewDocument,
    Upload,
    document_create,
    document_create_many,
    document_create_text,
)
from tests.pdfs import read_pdf

from .conftest import PNG

pytestmark = pytest.mark.usefixtures("hashing_embedder")

LINEAGE = Lineage(provenance=DocumentVersion.Provenance.STATED, captured_by="key-1",
                  captured_by_kind=DocumentVersion.CapturedByKind.AGENT)


def row(obj: object, *, skip: tuple[str, ...]) -> dict[str, object]:
    """A row's fields without its id, timestamps and what names the project or the document."""
    skipped = {"id", "project", "document", "raw_capture", "created_at", "updated_at", "last_seen_at", "file", *skip}
    return {field.attname: getattr(obj, field.attname) for field in type(obj)._meta.concrete_fields
            if field.name not in skipped}


def stored_files(media_root: Path) -> list[Path]:
    return sorted(path for path in media_root.rglob("*") if path.is_file())


def test_rows_are_those_of_one_by_one_creation(project, other_project):
    """The same documents, one by one in one project and as a batch in another: the same rows."""
    pdf = read_pdf("minimal.pdf")
    options = {"tags": {"team": "hr"}, "metadata": {"origin": "drive"}, "chunk_size": 64}
    one = [
        document_create_text(project=project, content="A note about kestrels.", path="/notes/k.md",
                             title="Kestrels", lineage=LINEAGE, base_url="http://x", enqueue=False, **options),
        document_create(project=project, upload=Upload(pdf, filename="hr.pdf", declared_content_type="text/plain"),
                        lineage=LINEAGE, base_url="http://x", enqueue=False, **options),
    ]
    many = document_create_many(project=other_project, lineage=LINEAGE, base_url="http://x", enqueue=False,
                                documents=[
        NewDocument(content="A note about kestrels.", path="/notes/k.md", title="Kestrels", **options),
        NewDocument(upload=Upload(pdf, filename="hr.pdf", declared_content_type="text/plain"), **options),
    ])
    assert [document.path for document in many] == ["/notes/k.md", "/hr.pdf"]
    for single, batched in zip(one, many, strict=True):
        batched = Document.objects.get(pk=batched.pk)
        single = Document.objects.get(pk=single.pk)
        assert batched.project_id == other_project.pk
        assert row(batched, skip=()) == row(single, skip=())
        assert batched.file.read() == single.file.read()
        raws = [RawCapture.objects.get(document=document) for document in (single, batched)]
        assert row(raws[1], skip=()) == row(raws[0], skip=())
        versions = [DocumentVersion.objects.get(document=document) for document in (single, batched)]
        assert row(versions[1], skip=()) == row(versions[0], skip=())
        assert versions[1].raw_capture_id == raws[1].pk and versions[1].number == 1
    assert one[0].content_type == "text/markdown" and one[1].content_type == "application/pdf"


def test_owner_tag_on_every_document(project):
    created = document_create_many(project=project, owner="key-7", enqueue=False,
                                   documents=[NewDocument(content="one"), NewDocument(content="two")])
    assert [document.access_tags for document in Document.objects.filter(pk__in=[d.pk for d in created])] == [
        ["owner:key-7"], ["owner:key-7"]]


@pytest.mark.parametrize("case", ["path taken", "path twice", "too large", "unsupported type", "quota",
                                  "empty text", "bad path", "neither upload nor content"])
def test_one_refused_document_creates_nothing(project, engine, media_root, case):
    existing = document_create_text(project=project, content="already here", path="/taken.txt", enqueue=False)
    before = (Document.objects.count(), RawCapture.objects.count(), DocumentVersion.objects.count())
    files = stored_files(media_root)
    documents = [NewDocument(content=f"note {index}", path=f"/notes/{index}.txt") for index in range(5)]
    expected = {"path taken": ("PATH_TAKEN", 409), "path twice": ("PATH_TAKEN", 409),
                "too large": ("FILE_TOO_LARGE", 413), "unsupported type": ("UNSUPPORTED_CONTENT_TYPE", 415),
                "quota": ("QUOTA_EXCEEDED", 429), "empty text": ("EMPTY_FILE", 400),
                "bad path": ("PATH_INVALID", 400), "neither upload nor content": ("VALIDATION_ERROR", 400)}[case]
    index = 3
    if case == "path taken":
        documents[index].path = "/taken.txt"
    elif case == "path twice":
        documents[index].path = "/notes/1.txt"
    elif case == "too large":
        engine(MAX_UPLOAD_BYTES=100)
        documents[index].content = "x" * 101
    elif case == "unsupported type":
        documents[index] = NewDocument(upload=Upload(PNG, filename="scan.png"))
    elif case == "quota":
        engine(MAX_DOCUMENT_BYTES_PER_PROJECT=existing.size_bytes + 5 * 6 - 1)  # 5 notes of 6 bytes: one too many
        index = None
    elif case == "empty text":
        documents[index].content = "   "
    elif case == "bad path":
        documents[index].path = "/a/../../etc"
    else:
        documents[index].content = None

    with pytest.raises(MemoryEngineError) as raised:
        document_create_many(project=project, documents=documents)
    assert (raised.value.code, raised.value.status_code) == expected
    assert raised.value.details.get("index") == index
    assert (Document.objects.count(), RawCapture.objects.count(), DocumentVersion.objects.count()) == before
    assert stored_files(media_root) == files


def test_a_failing_insert_leaves_no_stored_file(project, media_root):
    """A database refusal after the files were stored (a NUL in the metadata) removes them."""
    files = stored_files(media_root)
    with pytest.raises(DataError):
        document_create_many(project=project, documents=[
            NewDocument(content="fine", path="/a.txt"), NewDocument(content="fine too", path="/b.txt",
                                                                     metadata={"bad": "nul\x00"})])
    assert not Document.objects.filter(project=project).exists()
    assert stored_files(media_root) == files


def test_queued_ingestion_makes_them_ready_in_grouped_tasks(project, engine, committed):
    engine(INGESTION_GROUP_DOCUMENTS=4)
    words = ["apricot", "bramble", "cinnabar", "dulcimer", "ember", "fjord"]
    created = committed(document_create_many, project=project, documents=[
        NewDocument(content=f"A short note about the {word}.", path=f"/notes/{word}.txt") for word in words])
    documents = Document.objects.in_bulk([document.pk for document in created])
    assert all(documents[d.pk].status == "ready" and documents[d.pk].total_chunks == 1 for d in created)
    tasks = Task.objects.filter(func__startswith="memory_engine.tasks.").order_by("started")
    sizes = [(task.func.rsplit(".", 1)[-1], len(task.args[0]) if isinstance(task.args[0], list) else 1)
             for task in tasks]
    assert [size for size in sizes if size[0] == "documents_ingest_task"] == [("documents_ingest_task", 4),
                                                                              ("documents_ingest_task", 2)]
    # each group's new chunks are then read into the entity graph, a task per group
    assert [size for size in sizes if size[0] != "documents_ingest_task"] == [("entities_documents_task", 4),
                                                                              ("entities_documents_task", 2)]
    hits = knowledge_search(SearchRequest(project=project, query="the cinnabar", channels=("lexical",),
                                          limit=5)).results
    assert created[2].pk in {hit.document_id for hit in hits}


def test_an_empty_batch_creates_nothing(project):
    assert document_create_many(project=project, documents=[]) == []
