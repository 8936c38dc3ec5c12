"""Documents: accept a file or a text, ingest it into chunks, re-ingest, delete, recover.

The pipeline (:func:`document_ingest`) runs in a django-q2 worker, enqueued on commit:

    claim (pending -> processing, attempts + 1, a fresh ``run`` token)
    -> read the stored file -> native extractor and/or the rule's converter -> pages
    -> chunking (request -> rule -> entry-point default) -> embed in batches
       (``indexed_chunks`` advances and the heartbeat beats after every batch)
    -> ONE transaction deletes the old chunks, inserts the new ones and marks the
       document ready, so search sees the old version or the new one, never a mix.

Every write after the claim is fenced by the run token: a worker that was presumed
dead (and replaced by the sweep) or a run superseded by a re-ingest can no longer
touch the document. Embedding is best-effort: a failed batch is stored without
vectors and counted in ``unembedded_chunks`` (lexical search still finds it).

A converter may answer ``{"status": "pending"}``; the document then waits in
``processing`` until its signed, single-use, expiring callback URL receives the pages
(:func:`converter_callback`), or the sweep fails it with ``CONVERTER_TIMEOUT``.
:func:`document_sweep` (a django-q2 Schedule, see ``memory_engine.queue``) re-runs
documents whose heartbeat stalled, up to ``INGESTION_MAX_ATTEMPTS``.

Identity and versions: a capture (:func:`document_capture`) names its document by
(project, ``source``, ``external_ref``) when it has an ``external_ref``; the same content
again is a ``noop``, new content a new pending version whose swap makes it the active one
(the previous one ``superseded``, its chunks gone). Every capture stores its raw input once
(``RawCapture``, append-only) in the transaction that writes the version derived from it.

Modules: :mod:`.intake` (capture, create one, re-ingest, delete), :mod:`.batch` (create many),
:mod:`.chunk_settings`, :mod:`.pipeline` (claim -> pages -> chunks -> embeddings -> swap;
:func:`document_ingest_many` shares embedder batches across documents), :mod:`.swap` (the guard's
findings and the swap's transaction), :mod:`.runs` (the run
token's fence and the failure record), :mod:`.tokens` (sealed password, signed URLs),
:mod:`.callback` (pending converters), :mod:`.sweep` (recovery) and :mod:`.inline` (the
``wait`` rule: ingest in the request or queue). Import from the
package: the names below are its public API.
"""

from __future__ import annotations

from .batch import NewDocument, document_create_many
from .callback import converter_callback
from .chunk_settings import (
    CHUNK_REQUEST_KEYS,
    DEFAULT_CHUNK_OVERLAP,
    DEFAULT_CHUNK_SIZE,
    RECURSIVE_CONTENT_TYPES,
    chunking_label,
    default_chunk_strategy,
    resolve_chunking,
)
from .inline import document_capture_or_enqueue, document_ingest_or_enqueue, documents_create_or_enqueue
from .intake import (
    Capture,
    CaptureStatus,
    Lineage,
    Upload,
    document_capture,
    document_capture_text,
    document_create,
    document_create_text,
    document_delete,
    document_reingest,
    normalize_path,
    project_document_bytes,
    stored_files_delete_on_commit,
)
from .pipeline import CONVERTER_FALLBACK_ERRORS, document_ingest, document_ingest_group, document_ingest_many
from .runs import PERSISTENT_STATE
from .sweep import document_sweep
from .tokens import CALLBACK_SALT, DOWNLOAD_SALT, document_for_download, download_token

__all__ = [
    "CALLBACK_SALT",
    "CHUNK_REQUEST_KEYS",
    "CONVERTER_FALLBACK_ERRORS",
    "DEFAULT_CHUNK_OVERLAP",
    "DEFAULT_CHUNK_SIZE",
    "DOWNLOAD_SALT",
    "PERSISTENT_STATE",
    "RECURSIVE_CONTENT_TYPES",
    "Capture",
    "CaptureStatus",
    "Lineage",
    "NewDocument",
    "Upload",
    "chunking_label",
    "converter_callback",
    "default_chunk_strategy",
    "document_capture",
    "document_capture_or_enqueue",
    "document_capture_text",
    "document_create",
    "document_create_many",
    "document_create_text",
    "document_delete",
    "document_for_download",
    "document_ingest",
    "document_ingest_group",
    "document_ingest_many",
    "document_ingest_or_enqueue",
    "document_reingest",
    "document_sweep",
    "documents_create_or_enqueue",
    "download_token",
    "normalize_path",
    "project_document_bytes",
    "resolve_chunking",
    "stored_files_delete_on_commit",
]
