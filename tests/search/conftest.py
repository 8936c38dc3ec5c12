"""Search tests run once per lexical backend: pg_textsearch BM25 and the tsvector fallback."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection

from memory_engine.lexical import BM25, BM25_INDEXES, TSVECTOR, build_lexical_indexes


@pytest.fixture(autouse=True)
def bm25_rebuilt_after(request: pytest.FixtureRequest, django_db_blocker: Any) -> Iterator[None]:
    """After a test of a lexical backend, once its transaction is rolled back, rebuild the bm25
    indexes for good.

    A bm25 index rebuilt inside a transaction that is rolled back (``lexical_backend``) leaves
    pg_textsearch's shared state describing the discarded rebuild: the next transaction that
    writes a memory content then fails reading a block that no longer exists ("could not read
    blocks ... read only 0 of 8192 bytes"). An autouse fixture is set up before ``db`` and so
    torn down after its rollback.
    """
    yield
    if "lexical_backend" not in request.fixturenames:
        return
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        for name in BM25_INDEXES:
            cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [name])
            if cursor.fetchone()[0]:
                cursor.execute(f'REINDEX INDEX "{name}"')


@pytest.fixture(params=[BM25, TSVECTOR])
def lexical_backend(request: pytest.FixtureRequest, settings: Any, db: Any) -> str:
    """The backend under test. The fallback's GIN indexes replace the bm25 ones inside the
    test's transaction (rolled back after it), exactly as migration 0004 builds them on a
    server without pg_textsearch.

    pg_textsearch counts rows of rolled-back transactions in its corpus statistics until
    the index is rebuilt, so every earlier test's rows would shift BM25 scores here: each
    test starts from a rebuilt (empty) index.
    """
    if request.param == BM25:
        with connection.cursor() as cursor:
            for name in BM25_INDEXES:
                cursor.execute(f'REINDEX INDEX "{name}"')
    if request.param == TSVECTOR:
        settings.MEMORY_ENGINE = {**(getattr(settings, "MEMORY_ENGINE", None) or {}),
                                  "KNOWLEDGE_LEXICAL_BACKEND": TSVECTOR}
        build_lexical_indexes(backend=TSVECTOR)
    return request.param
