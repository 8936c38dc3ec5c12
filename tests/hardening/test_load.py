"""Suite 5, load: the app under gunicorn with a real worker, N concurrent clients for T
seconds mixing new and repeated facts, searches and document uploads.

Zero 5xx, zero lost writes (every acknowledged write has its assertion; each store holds
exactly the valid memories the funnel's decisions imply), every uploaded document ingested.
The full run (32 clients x 60 s, the real embedder) is ``python bench/load.py``.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from django.db import connection

from bench.loadgen import LiveApp, check_writes, latency_table, run_load
from memory_engine.models import Document

from ..conftest import ROOT, wait_for
from ..factories import MemoryStoreFactory, ProjectFactory, make_key

pytestmark = pytest.mark.slow

CLIENTS = int(os.environ.get("LOAD_TEST_CLIENTS", "8"))
SECONDS = float(os.environ.get("LOAD_TEST_SECONDS", "15"))


def conninfo() -> dict[str, Any]:
    s = connection.settings_dict
    return {"dbname": s["NAME"], "user": s["USER"], "host": s["HOST"], "port": s["PORT"], "password": s["PASSWORD"]}


def test_mixed_load_under_gunicorn_loses_nothing(transactional_db: Any) -> None:
    project = ProjectFactory()
    stores = [MemoryStoreFactory(project=project) for _ in range(3)]
    key = make_key(project)
    env = {"MEMORY_ENGINE_DB_NAME": connection.settings_dict["NAME"],
           "MEMORY_ENGINE_EMBEDDING_PROVIDER": "tests.providers.HashingEmbeddingProvider",
           "MEMORY_ENGINE_LOG_LEVEL": "WARNING"}
    log = ROOT / ".pytest_cache" / "load.log" if (ROOT / ".pytest_cache").is_dir() else None
    store_ids = [s.pk for s in stores]
    with LiveApp(env, web_workers=2, threads=4, qcluster=True, log=log) as app:
        result = run_load(app.url, key, store_ids, clients=CLIENTS, seconds=SECONDS)
        documents = result.document_ids()
        wait_for(lambda: not Document.objects.filter(pk__in=documents, status__in=["pending", "processing"])
                 .exists(), timeout=120, interval=0.5)

    table = latency_table(result)
    print("\n" + "\n".join(str(row) for row in table))
    ops = {row["op"] for row in table}
    assert ops == {"write_new", "write_repeat", "search", "upload_document"}, table
    assert result.server_errors() == [], [(c.op, c.status, c.body) for c in result.server_errors()[:5]]
    assert set(result.statuses()) <= {200, 201, 202}, result.statuses()
    assert len(result.writes()) > 20 * CLIENTS / 8
    assert check_writes(conninfo(), result, store_ids) == []
    actions = {a for counts in result.actions_by_store().values() for a in counts}
    assert "created" in actions and "skipped" in actions  # repeated facts were deduplicated
    assert documents and set(Document.objects.filter(pk__in=documents).values_list("status", flat=True)) == {"ready"}
    # Searches answered with both channels (the hashing embedder never fails).
    assert all(c.body["degraded"] == [] for c in result.by_op()["search"])
