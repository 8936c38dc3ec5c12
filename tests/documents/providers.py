"""Test embedders and converters for the document pipeline (importable by a worker subprocess)."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memory_engine.providers.embeddings.base import EmbeddingError

from ..providers import HashingEmbeddingProvider

#: (indexed_chunks, unembedded_chunks) of the document being ingested, read at each embed call.
PROGRESS: list[tuple[int, int]] = []
#: Called with the texts of each batch (set by a test).
ON_BATCH: list[Any] = []


class ProgressRecordingProvider(HashingEmbeddingProvider):
    """Hashing embedder that records the ingesting document's progress before each batch;
    batches whose first text contains FAIL_ME fail."""

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        from memory_engine.models import Document

        document = Document.objects.filter(status="processing").order_by("-updated_at").first()
        if document is not None:
            PROGRESS.append((document.indexed_chunks, document.unembedded_chunks))
        for hook in ON_BATCH:
            hook(texts)
        if any("FAIL_ME" in text for text in texts):
            raise EmbeddingError("batch refused by the test provider")
        return super().embed_documents(texts)


#: Characters of every text the TokenCountingProvider was asked to count.
COUNTED: list[int] = []


class TokenCountingProvider(HashingEmbeddingProvider):
    """Hashing embedder that records how much text chunking asked it to count."""

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        COUNTED.extend(len(text) for text in texts)
        return super().count_tokens(texts)


def pages_converter(*, data: bytes, content_type: str, filename: str, document: Any) -> list[Any]:
    """A callable converter: two pages, the second with an explicit page number."""
    return [f"converted {filename} ({len(data)} bytes, {content_type})", {"text": "second page text", "page": 7}]


def pending_converter(*, data: bytes, content_type: str, filename: str, document: Any) -> dict[str, str]:
    grant = {"url": document.converter_callback_url, "token": document.converter_callback_token}
    Path(document.metadata["callback_file"]).write_text(json.dumps(grant))
    return {"status": "pending"}


def broken_converter(*, data: bytes, content_type: str, filename: str, document: Any) -> list[str]:
    raise RuntimeError("converter exploded")


def sleepy_converter(*, data: bytes, content_type: str, filename: str, document: Any) -> list[str]:
    """Slow on the first attempt (so a test can kill the worker mid-ingest), fast afterwards.

    Writes ``<marker>.attempt<N>`` (the worker's pid) when it starts, so the test knows the
    worker is inside it: written aside and renamed, so the file never exists empty for the test
    that waits for it.
    """
    marker = Path(document.metadata["marker"])
    written = Path(f"{marker}.attempt{document.attempts}.part")
    written.write_text(str(os.getpid()))
    written.replace(f"{marker}.attempt{document.attempts}")
    if document.attempts == 1:
        time.sleep(float(document.metadata.get("sleep", 120)))
    return ["recovered text after the worker died", "and a second page"]


#: Holds :func:`slow_converter` until the test sets it (set when the test is done with it).
SLOW_CONVERTER_RELEASE = threading.Event()
#: Set by :func:`slow_converter` when it returns (then it was released, not timed out).
SLOW_CONVERTER_RETURNED = threading.Event()


def slow_converter(*, data: bytes, content_type: str, filename: str, document: Any) -> list[str]:
    """Answers only once the test releases it, so a pipeline that waited would hang (and the
    suite's timeout fail it) instead of a wall-clock bound deciding."""
    SLOW_CONVERTER_RELEASE.wait(timeout=60)
    SLOW_CONVERTER_RETURNED.set()
    return ["too late"]
