"""Fixtures for the document tests: a private MEDIA_ROOT, upload helpers, on-commit execution."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.pdfs import read_pdf

#: The start of a PNG: a type with no native extractor (415 without a rule).
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


@pytest.fixture(autouse=True)
def media_root(settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Stored files go to a per-test directory (the worker subprocess reads MEDIA_ROOT too)."""
    root = tmp_path / "media"
    root.mkdir()
    settings.MEDIA_ROOT = str(root)
    monkeypatch.setenv("MEDIA_ROOT", str(root))
    return root


@pytest.fixture
def engine(settings: Any) -> Callable[..., None]:
    """``engine(MAX_UPLOAD_BYTES=10)``: override MEMORY_ENGINE keys, keeping the others."""

    def override(**values: Any) -> None:
        settings.MEMORY_ENGINE = {**(getattr(settings, "MEMORY_ENGINE", {}) or {}), **values}

    return override


@pytest.fixture
def committed(django_capture_on_commit_callbacks: Any) -> Callable[..., Any]:
    """``committed(fn, *args)``: call fn and run its on-commit hooks (enqueued tasks run inline)."""

    def run(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        with django_capture_on_commit_callbacks(execute=True):
            return fn(*args, **kwargs)

    return run


def pdf_file(name: str, *, as_name: str | None = None, content_type: str = "application/pdf") -> SimpleUploadedFile:
    """A generated sample PDF (tests/pdfs.py) or a corpus PDF, as an upload."""
    return SimpleUploadedFile(as_name or name, read_pdf(name), content_type=content_type)


def upload(client: Any, file: SimpleUploadedFile, **fields: Any) -> Any:
    return client.post("/api/v1/documents/ingest", {"file": file, **fields}, format="multipart")


def assert_chunks_cover(chunks: Any, text: str) -> None:
    """Every chunk is a piece of ``text`` (between words) and together they hold all its words."""
    chunks = list(chunks)
    assert chunks
    for chunk in chunks:
        assert chunk.text in text and chunk.text == chunk.text.strip()
    assert set(" ".join(chunk.text for chunk in chunks).split()) == set(text.split())
