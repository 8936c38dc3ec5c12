"""Many documents at once, all or none (:func:`document_create_many`): each checked as
:mod:`.intake` checks one, then the rows made in one transaction and a few statements."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from memory_engine.conf import engine_settings
from memory_engine.db import lock_project_documents
from memory_engine.exceptions import MemoryEngineError, PathTaken, ValidationFailed
from memory_engine.grants import owner_tag
from memory_engine.models import Document, DocumentVersion, IngestionRule, Project, RawCapture
from memory_engine.queue import enqueue_documents_ingest_on_commit

from .intake import (
    Lineage,
    Upload,
    _capture_parameters,
    _check_quota,
    _check_upload,
    _Checked,
    _new_document,
    _raw_capture_row,
    _store_file,
    _text_upload,
    _version_row,
)


@dataclass
class NewDocument:
    """One document of :func:`document_create_many`: a file (``upload``) or a text (``content``,
    as :func:`document_create_text` takes it, with its ``content_type``), and what
    :func:`document_create` takes besides."""

    upload: Upload | None = None
    content: str | None = None
    content_type: str | None = None
    path: str | None = None
    title: str = ""
    tags: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    chunk_strategy: str | None = None
    chunk_size: int | None = None
    chunk_overlap: int | None = None


@contextmanager
def _item(index: int) -> Iterator[None]:
    """An error raised for one document of a batch names it: ``details["index"]``."""
    try:
        yield
    except MemoryEngineError as error:
        error.details = {**error.details, "index": index}
        raise


def _check_batch_paths(project: Project, documents: Sequence[Document]) -> None:
    """PATH_TAKEN, naming the document by ``details["index"]``, for a path given twice in the batch
    or taken in the project (under the project's documents lock)."""
    paths: dict[str, int] = {}
    for index, document in enumerate(documents):
        if document.path in paths:
            raise PathTaken(f"The path {document.path} is given twice in this batch "
                            f"(documents {paths[document.path]} and {index}).",
                            details={"path": document.path, "index": index})
        paths[document.path] = index
    taken = set(Document.objects.filter(project=project, path__in=list(paths)).values_list("path", flat=True))
    for index, document in enumerate(documents):
        if document.path in taken:
            raise PathTaken(details={"path": document.path, "index": index})


def document_create_many(*, project: Project, documents: Sequence[NewDocument], lineage: Lineage | None = None,
                         base_url: str = "", owner: str | None = None, enqueue: bool = True) -> list[Document]:
    """Create many documents at once, all or none: the rows :func:`document_create` (or
    :func:`document_create_text`) makes for each, in one transaction and a few statements.

    Every document is checked first as :func:`document_capture` checks one (the same errors;
    ``details["index"]`` names the document refused); then, under the project's documents
    lock: PATH_TAKEN for a path taken or given twice in the batch, QUOTA_EXCEEDED for the
    total, the files stored, the documents, raw captures and first versions inserted in bulk.
    A refusal leaves no row and no stored file. ``owner``: the creating key's owner tag on
    every document (docs/security.md). The ingestion is queued on commit, the small documents
    INGESTION_GROUP_DOCUMENTS to a task. Returns the documents in the order given.
    """
    lineage = lineage or Lineage()
    tags = [owner_tag(owner)] if owner is not None else []
    rules: dict[str, IngestionRule | None] = {}
    made: list[tuple[Document, Upload, _Checked, dict[str, Any]]] = []
    for index, item in enumerate(documents):
        with _item(index):
            if item.upload is not None and item.content is None:
                upload, path = item.upload, item.path
            elif item.content is not None and item.upload is None:
                upload, path = _text_upload(item.content, content_type=item.content_type, path=item.path,
                                            title=item.title, external_ref=None)
            else:
                raise ValidationFailed("Each document has either `upload` (a file) or `content` (a text).")
            checked = _check_upload(project=project, upload=upload, source="upload", external_ref=None,
                                    title=item.title, rules=rules,
                                    chunking=(item.chunk_strategy, item.chunk_size, item.chunk_overlap))
            document = _new_document(project, upload, checked, source="upload", external_ref=None, path=path,
                                     title=item.title, tags=item.tags, metadata=item.metadata, password=None,
                                     base_url=base_url, access_tags=tags)
            parameters = _capture_parameters(upload, checked, source="upload", external_ref=None, path=path,
                                             title=item.title, tags=item.tags, metadata=item.metadata)
            made.append((document, upload, checked, parameters))
    if not made:
        return []
    with transaction.atomic():
        lock_project_documents(project.pk)
        _check_batch_paths(project, [document for document, *_ in made])
        _check_quota(project, sum(len(upload.data) for _, upload, _, _ in made))
        created = [document for document, *_ in made]
        try:
            for document, upload, checked, _ in made:
                _store_file(document, upload, checked.content_type)
            Document.objects.bulk_create(created)
            raws = RawCapture.objects.bulk_create([
                _raw_capture_row(document=document, data=upload.data, content_type=checked.content_type,
                                 parameters=parameters) for document, upload, checked, parameters in made])
            DocumentVersion.objects.bulk_create([_version_row(document, number=1, raw=raw, lineage=lineage)
                                                 for document, raw in zip(created, raws, strict=True)])
        except BaseException:
            storage = Document._meta.get_field("file").storage
            for document in created:
                if document.file.name:
                    storage.delete(document.file.name)
            raise
        if enqueue:
            enqueue_documents_ingest_on_commit(_ingestion_groups(created), project.pk)
    return created


def _ingestion_groups(documents: list[Document]) -> list[list[str]]:
    """The worker tasks of new documents: INGESTION_GROUP_DOCUMENTS small ones (at most
    INGESTION_GROUP_MAX_BYTES) to a task, as a worker's task would take them along
    (:func:`document_ingest_group`); a larger one alone."""
    size = max(1, engine_settings.INGESTION_GROUP_DOCUMENTS)
    small = [d.pk for d in documents if d.size_bytes <= engine_settings.INGESTION_GROUP_MAX_BYTES]
    large = [[d.pk] for d in documents if d.size_bytes > engine_settings.INGESTION_GROUP_MAX_BYTES]
    return [small[start:start + size] for start in range(0, len(small), size)] + large
