"""The optional real-world corpus: where it is, and the mark of the tests that need it.

The suite passes on a clone with nothing beside it: its behaviour tests use files it
writes itself (``tests/pdfs.py``). Tests that need the external corpus (real PDFs from
other projects' test suites, see ``shared/data/README.md``) carry ``@pytest.mark.corpus``
and run only when ``MEMORY_ENGINE_TEST_CORPUS`` names that data directory (the one holding
``pdfs/``, ``paraphrase/``, ``scifact/``, ``locomo/``); otherwise they are skipped, and
pytest's summary says so in one line. There is no default location: a missing corpus is
never guessed at.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CORPUS_ENV = "MEMORY_ENGINE_TEST_CORPUS"
SKIP_REASON = f"corpus tests skipped: set {CORPUS_ENV}=/path/to/shared/data to run them"

corpus = pytest.mark.corpus


def corpus_dir() -> Path | None:
    """The corpus directory named by ``MEMORY_ENGINE_TEST_CORPUS``, or None when unset."""
    value = os.environ.get(CORPUS_ENV, "").strip()
    return Path(value).expanduser().resolve() if value else None


CORPUS = corpus_dir()


def corpus_path(*parts: str) -> Path:
    """A file of the corpus; only corpus-marked tests call this (they are skipped without one)."""
    if CORPUS is None:
        raise LookupError(f"{CORPUS_ENV} is not set; mark the test with @pytest.mark.corpus")
    return CORPUS.joinpath(*parts)
