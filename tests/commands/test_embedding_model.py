"""Changing the embedding model without downtime: register, build, switch (docs/embeddings.md).

A deterministic hashing embedder stands in for both models (meaning does not matter here:
what matters is that every search answers, during and after a switch to another dimension).
"""

from __future__ import annotations

import threading
import time
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, connections

from memory_engine.checks import _database_errors
from memory_engine.exceptions import EmbeddingDimensionsTooLarge, EmbeddingModelNotActive, EmbeddingModelState
from memory_engine.models import Chunk, EmbeddingModel, MemoryAssertion, MemoryContent
from memory_engine.providers.embeddings import get_embedding_provider, reset_embedding_provider
from memory_engine.selectors.search import SearchRequest, knowledge_search
from memory_engine.services.documents.replay import transform_config_create
from memory_engine.services.embedding_models import (
    active_model,
    embedding_model_build,
    embedding_model_register,
    embedding_model_switch,
    hnsw_index_sql,
    storage_for,
    store_new_vectors_as_configured,
)
from memory_engine.services.formation import apply_declaration
from memory_engine.services.memories import memory_write
from tests.conftest import use_embedder
from tests.factories import MemoryStoreFactory, ProjectFactory
from tests.search.helpers import FILLER, make_document, write

HASHING = "tests.providers.HashingEmbeddingProvider"
SMALL = {"PROVIDER": HASHING, "MODEL": "test-hashing-256", "DIMENSIONS": 256, "STORAGE": "vector"}
TABLES = ("memory_engine_memorycontent", "memory_engine_chunk")


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def column(table: str, name: str = "embedding") -> tuple[str, int] | None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT t.typname, a.atttypmod FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
            "JOIN pg_type t ON t.oid = a.atttypid WHERE c.relname = %s AND a.attname = %s AND NOT a.attisdropped",
            [table, name])
        row = cursor.fetchone()
    return (row[0], row[1]) if row else None


@pytest.fixture
def models(transactional_db: Any, settings: Any) -> Any:
    """The hashing embedder as the active model (384) and three others in EMBEDDING_MODELS;
    afterwards the columns are put back to halfvec(384), as migrated, for the next tests."""
    use_embedder(settings, HASHING, MODEL="all-MiniLM-L6-v2", DIMENSIONS=384)
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "EMBEDDING_MODELS": {
        "small": SMALL,
        "wide": {"PROVIDER": HASHING, "MODEL": "test-hashing-2500", "DIMENSIONS": 2500},
        "huge": {"PROVIDER": HASHING, "MODEL": "test-hashing-4500", "DIMENSIONS": 4500},
        "half": {"PROVIDER": HASHING, "MODEL": "all-MiniLM-L6-v2", "DIMENSIONS": 384, "STORAGE": "halfvec"},
        "full": {"PROVIDER": HASHING, "MODEL": "all-MiniLM-L6-v2", "DIMENSIONS": 384, "STORAGE": "vector"},
        "wide-vector": {**SMALL, "MODEL": "test-hashing-2500", "DIMENSIONS": 2500, "STORAGE": "vector"},
    }}
    EmbeddingModel.objects.all().delete()
    active_model()  # the first use registers EMBEDDING as the active model
    yield settings
    with connection.cursor() as cursor:
        for table, prefix in zip(TABLES, ("content", "chunk"), strict=True):
            cursor.execute(f'DROP INDEX IF EXISTS "me_{prefix}_embedding_next_hnsw"')
            cursor.execute(f'ALTER TABLE "{table}" DROP COLUMN IF EXISTS embedding_next, '
                           "DROP COLUMN IF EXISTS embedding_model_next")
            if column(table) != ("halfvec", 384):
                cursor.execute(f'DROP INDEX IF EXISTS "me_{prefix}_embedding_hnsw"')
                cursor.execute(f'ALTER TABLE "{table}" ALTER COLUMN embedding TYPE halfvec(384) USING NULL, '
                               "ALTER COLUMN embedding SET STORAGE MAIN")
                cursor.execute(hnsw_index_sql(table, f"me_{prefix}_embedding_hnsw", "embedding", "halfvec"))
    EmbeddingModel.objects.all().delete()
    reset_embedding_provider()


def corpus(count: int = 40) -> tuple[Any, Any]:
    project = ProjectFactory()
    store = MemoryStoreFactory(project=project)
    for i in range(count):
        write(store, f"Fact number {i}: the deploy window {i} opens on day {i % 7}.")
    document = make_document(project, "/runbook.txt", [f"Runbook step {i}: restart worker {i}." for i in range(count)])
    return project, store, document


def test_switch_to_another_dimension_with_searches_running(models: Any) -> None:
    project, store, document = corpus()
    model = embedding_model_register(name="small")
    assert (model.dimensions, model.storage, model.state) == (256, "vector", "building")
    assert column("memory_engine_chunk", "embedding_next") == ("vector", 256)

    outcomes: list[str] = []
    stop = threading.Event()

    def searching() -> None:
        try:
            while not stop.is_set():
                try:
                    memories = knowledge_search(SearchRequest(project=project, query="deploy window", limit=5,
                                                              memory_store_ids=[store.pk])).results
                    chunks = knowledge_search(SearchRequest(project=project, query="restart worker", limit=5,
                                                            document_ids=[document.pk])).results
                    outcomes.append("ok" if memories and chunks else f"empty:{len(memories)},{len(chunks)}")
                except Exception as exc:  # noqa: BLE001  (the test counts every failure)
                    outcomes.append(f"failed:{type(exc).__name__}: {exc}")
        finally:
            connections.close_all()

    thread = threading.Thread(target=searching)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not outcomes and time.monotonic() < deadline:  # the searches are running
            time.sleep(0.05)
        embedding_model_build(model=model, batch_size=8)
        write(store, "Fact written during the build: the canary ships on Fridays.")  # caught up by switch
        report = embedding_model_switch(model=model, batch_size=8)
        deadline = time.monotonic() + 30  # a loaded machine searches less often during the switch
        while len(outcomes) <= 10 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop.set()
        thread.join()

    failures = [outcome for outcome in outcomes if outcome != "ok"]
    assert len(outcomes) > 10 and failures == []
    assert report.previous == "all-MiniLM-L6-v2" and report.lock_ms < 5000
    assert column("memory_engine_chunk") == column("memory_engine_memorycontent") == ("vector", 256)
    assert column("memory_engine_chunk", "embedding_next") is None
    assert active_model().model == "test-hashing-256"
    assert EmbeddingModel.objects.get(model="all-MiniLM-L6-v2").state == "retired"
    # Memories and chunks follow: every row has a vector of the new model, the late write too.
    for rows in (MemoryContent.objects.all(), Chunk.objects.all()):
        assert set(rows.values_list("embedding_model", flat=True)) == {"test-hashing-256"}
        assert not rows.filter(embedding__isnull=True).exists()
    assert get_embedding_provider().model_name == "test-hashing-256"
    hits = knowledge_search(SearchRequest(project=project, query="canary ships on Fridays", limit=3,
                                          memory_store_ids=[store.pk])).results
    assert "canary" in hits[0].text
    # Writes after the switch embed with the new model.
    write(store, "A fact after the switch.")
    assert MemoryContent.objects.get(text="A fact after the switch.").embedding_model == "test-hashing-256"


def test_a_search_that_meets_the_swap_is_not_kept_waiting(models: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The swap writes the vectors of rows that came after the catch-up only once it holds both
    tables. Written before that, they would hold pg_textsearch 1.0's bm25 index lock (the
    embedded server) while a search holding the table waited for it, and the swap for the
    search: a wait no timeout ends (docs/operations.md, "A backend that ignores cancel and
    terminate"). The search here starts just before the swap asks for the tables."""
    import memory_engine.services.embedding_models as embedding_models

    # Searched through the bm25 index, not by the small scope's exact scan.
    models.MEMORY_ENGINE = {**models.MEMORY_ENGINE, "SEARCH_EXACT_SCAN_MAX": 0}
    project, store, _document = corpus(count=3)
    model = embedding_model_register(name="small")
    embedding_model_build(model=model, batch_size=8)
    create_side_index = embedding_models._create_side_index

    def then_a_late_write(model: Any) -> None:  # between the catch-up and the swap
        create_side_index(model)
        write(store, "Written after the catch-up: the release train leaves at noon.")

    monkeypatch.setattr(embedding_models, "_create_side_index", then_a_late_write)
    searched: list[str] = []

    def searching() -> None:
        try:
            searched.append(knowledge_search(SearchRequest(project=project, query="release train", limit=5,
                                                           memory_store_ids=[store.pk])).results[0].text)
        finally:
            connections.close_all()

    def search_before_the_exclusive_lock(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if "IN ACCESS EXCLUSIVE MODE" in sql:
            thread = threading.Thread(target=searching)
            thread.start()
            thread.join(timeout=10)
            if thread.is_alive():  # it waits for the swap: give up the swap, so that it can end
                raise AssertionError("a search waited for the swap's bm25 write")
        return execute(sql, params, many, context)

    with connection.execute_wrapper(search_before_the_exclusive_lock):
        report = embedding_model_switch(model=model, batch_size=8)

    assert searched == ["Written after the catch-up: the release train leaves at noon."]
    assert report.caught_up == 1 and active_model().model == "test-hashing-256"
    late = MemoryContent.objects.get(text__startswith="Written after the catch-up")
    assert late.embedding_model == "test-hashing-256" and late.embedding is not None


def test_the_commands_and_the_system_check(models: Any) -> None:
    corpus(5)
    assert _database_errors() == []
    # Editing EMBEDDING directly is refused, with the commands to run.
    use_embedder(models, HASHING, MODEL="test-hashing-256", DIMENSIONS=256)
    errors = _database_errors()
    assert [e.id for e in errors] == ["memory_engine.E004"]
    assert "memory_engine_embedding_model register NAME" in errors[0].hint
    use_embedder(models, HASHING, MODEL="all-MiniLM-L6-v2", DIMENSIONS=384)

    assert "Registered test-hashing-256: 256 dimensions as vector" in run("memory_engine_embedding_model",
                                                                          "register", "small")
    with pytest.raises(CommandError, match="EMBEDDING_MODEL_STATE"):
        run("memory_engine_embedding_model", "switch")  # not built yet
    assert "test-hashing-256 is ready" in run("memory_engine_embedding_model", "build")
    assert "building" not in run("memory_engine_embedding_model", "status")
    assert _database_errors() == []  # nothing changed for search yet
    assert "is the active model (was all-MiniLM-L6-v2)" in run("memory_engine_embedding_model", "switch")
    status = run("memory_engine_embedding_model", "status")
    assert "active    small" in status and "memory_contents 5/5" in status and "chunks 5/5" in status
    # EMBEDDING still names the previous model: a warning until the next deploy updates it.
    assert [e.id for e in _database_errors()] == ["memory_engine.W012"]
    use_embedder(models, HASHING, MODEL="test-hashing-256", DIMENSIONS=256)
    assert _database_errors() == []
    # Without the EMBEDDING_MODELS entry and with EMBEDDING on the old model, nothing reaches the active one.
    models.MEMORY_ENGINE = {**models.MEMORY_ENGINE, "EMBEDDING_MODELS": {},
                            "EMBEDDING": {"PROVIDER": HASHING, "MODEL": "all-MiniLM-L6-v2", "DIMENSIONS": 384}}
    assert [e.id for e in _database_errors()] == ["memory_engine.E005"]


def test_size_limits_and_states(models: Any) -> None:
    assert storage_for(384) == storage_for(4000) == "halfvec" and storage_for(2000, storage="vector") == "vector"
    with pytest.raises(EmbeddingDimensionsTooLarge):
        storage_for(2001, storage="vector")
    with pytest.raises(EmbeddingDimensionsTooLarge) as too_large:
        embedding_model_register(name="huge")
    assert too_large.value.details["dimensions"] == 4500
    with pytest.raises(CommandError, match="EMBEDDING_MODEL_UNKNOWN"):
        run("memory_engine_embedding_model", "register", "nope")
    with pytest.raises(EmbeddingModelState):
        embedding_model_register(name="EMBEDDING")  # the active model already
    wide = embedding_model_register(name="wide")
    assert wide.storage == "halfvec" and column("memory_engine_chunk", "embedding_next") == ("halfvec", 2500)
    with pytest.raises(EmbeddingModelState):
        embedding_model_register(name="small")  # one model at a time
    assert "Discarded test-hashing-2500" in run("memory_engine_embedding_model", "discard")
    assert column("memory_engine_chunk", "embedding_next") is None


def test_a_halfvec_model_serves_search(models: Any) -> None:
    project, _, _ = corpus(5)
    wide = embedding_model_register(name="wide")
    embedding_model_build(model=wide)
    embedding_model_switch(model=wide)
    assert column("memory_engine_chunk") == ("halfvec", 2500)
    result = knowledge_search(SearchRequest(project=project, query="restart worker 3", limit=3))
    assert result.results and "degraded" not in str(result.degraded)


def test_a_transform_config_names_only_the_active_model(models: Any) -> None:
    project = ProjectFactory()
    model = embedding_model_register(name="small")
    embedding_model_build(model=model)
    with pytest.raises(EmbeddingModelNotActive):  # ready is not enough: staged chunks use the active columns
        transform_config_create(project=project, name="next", embedding_model="test-hashing-256")
    embedding_model_switch(model=model)
    config = transform_config_create(project=project, name="next")
    assert (config.embedding_provider, config.embedding_model) == (HASHING, "test-hashing-256")
    with pytest.raises(EmbeddingModelNotActive):
        transform_config_create(project=project, name="old", embedding_model="all-MiniLM-L6-v2")


def switch_unseen_by_this_process() -> None:
    """Switch to the "small" model (256 dimensions), then give this process back its cached
    provider of the old model, as a process that has not looked at the registry since has."""
    import memory_engine.providers.embeddings as embeddings

    stale, stale_active = get_embedding_provider(), embeddings._active
    model = embedding_model_register(name="small")
    embedding_model_build(model=model, batch_size=8)
    embedding_model_switch(model=model, batch_size=8)
    with embeddings._lock:
        embeddings._provider, embeddings._active = stale, stale_active
        embeddings._checked_at = time.monotonic() + 3600


def test_a_write_embedded_by_the_previous_model_is_embedded_again(models: Any) -> None:
    """A write whose text was embedded just before the switch committed lands with the new model
    (the insert meets the new column's dimension, the funnel embeds once more)."""
    _project, store, _document = corpus(count=3)
    switch_unseen_by_this_process()
    assert get_embedding_provider().model_name == "all-MiniLM-L6-v2"

    result = write(store, "Written by a process that had not seen the switch yet.")

    content = MemoryContent.objects.get(text="Written by a process that had not seen the switch yet.")
    assert content.embedding_model == "test-hashing-256" and content.embedding is not None
    assert len(content.embedding) == 256 and result is not None
    assert get_embedding_provider().model_name == "test-hashing-256"


def test_a_formation_run_embedded_by_the_previous_model_is_embedded_again(models: Any) -> None:
    """A formation run whose texts were embedded just before the switch committed applies its
    store with the new model: the store's transaction rolls back at the content insert, and the
    run embeds the store's new texts once more and applies it again."""
    project, store, _document = corpus(count=3)
    switch_unseen_by_this_process()
    texts = ["The depot opens at 7am.", "The depot closes at 7pm."]

    report = apply_declaration(project=project, data={"stores": [{"name": store.name, "memories": texts}]})

    assert sorted(text for _, text in report.created) == sorted(texts) and len(report.retired) == 0
    for text in texts:
        content = MemoryContent.objects.get(store=store, text=text)
        assert content.embedding_model == "test-hashing-256" and len(content.embedding) == 256
    assert MemoryAssertion.objects.filter(mechanism="formation", memory__store=store).count() == 2
    assert get_embedding_provider().model_name == "test-hashing-256"


@pytest.mark.parametrize("name, storage", [("full", "vector"), ("half", "halfvec")])
def test_the_same_model_moves_between_storages(models: Any, name: str, storage: str) -> None:
    """STORAGE names a model's column type without changing the model: the default halfvec
    columns move to vector and back, registered, built and switched like any model, and after
    each move writes dedup and searches answer."""
    project, store, _document = corpus(6)
    with pytest.raises(EmbeddingDimensionsTooLarge) as too_large:
        embedding_model_register(name="wide-vector")
    assert too_large.value.details["storage"] == "vector"
    with pytest.raises(EmbeddingModelState):
        embedding_model_register(name="half")  # the migrated columns are halfvec already

    moves = ["full", "half"] if name == "half" else ["full"]
    for move in moves:
        model = embedding_model_register(name=move)
        embedding_model_build(model=model)
        embedding_model_switch(model=model)
    assert (model.model, model.dimensions, model.storage) == ("all-MiniLM-L6-v2", 384, storage)
    assert column("memory_engine_memorycontent") == column("memory_engine_chunk") == (storage, 384)
    assert active_model().name == name
    # EMBEDDING names the same model and dimensions: no error, and the columns agree with the registry
    assert [e.id for e in _database_errors()] == []
    with pytest.raises(EmbeddingModelState):
        embedding_model_register(name=name)  # the active model already

    # other words' case, the same hashed vector: a duplicate found through the shortlist
    again = memory_write(store=store, content="FACT NUMBER 3: the deploy window 3 opens on day 3.", principal="t")
    assert (again.action, again.decision_reason) == ("skipped", "duplicate") and again.similarity > 0.999
    fresh = memory_write(store=store, content="The staging cluster is rebuilt every Sunday night.", principal="t")
    assert fresh.action == "created"
    assert MemoryContent.objects.get(pk=fresh.memory.content_id).embedding is not None
    hits = knowledge_search(SearchRequest(project=project, query="restart worker 3", limit=3)).results
    assert hits and "degraded" not in str(knowledge_search(SearchRequest(project=project,
                                                                         query="deploy window")).degraded)


def test_a_storage_setting_that_the_columns_do_not_hold_is_flagged(models: Any) -> None:
    """EMBEDDING's STORAGE shapes a new installation's columns only: naming another storage than
    the active model's is a warning that says how to move."""
    models.MEMORY_ENGINE = {**models.MEMORY_ENGINE,
                            "EMBEDDING": {**models.MEMORY_ENGINE["EMBEDDING"], "STORAGE": "vector"}}
    flagged = _database_errors()
    assert [e.id for e in flagged] == ["memory_engine.W013"] and "register, build and switch" in flagged[0].hint
    models.MEMORY_ENGINE = {**models.MEMORY_ENGINE,
                            "EMBEDDING": {**models.MEMORY_ENGINE["EMBEDDING"], "STORAGE": "halfvec"}}
    assert _database_errors() == []


@pytest.mark.parametrize("move_to, storage", [(None, "halfvec"), ("full", "vector")])
def test_documents_ingested_in_either_storage_land_and_are_found(models: Any, move_to: str | None,
                                                                storage: str) -> None:
    """The swap's insert casts its float4 slices to the column's type, halfvec as migrated or vector
    after a move: the same values as an INSERT of the vector's text, and the new chunks are searchable."""
    import numpy as np

    from memory_engine.db import insert_rows
    from memory_engine.services.documents import document_create_text, document_ingest

    project, _store, _document = corpus(3)
    if move_to:
        model = embedding_model_register(name=move_to)
        embedding_model_build(model=model)
        embedding_model_switch(model=model)
    assert column("memory_engine_chunk") == (storage, 384)

    make_document(project, "/filler.txt", FILLER)  # more chunks than the limit: the vector channel ranks
    document = document_create_text(project=project, content="The quartermaster counts the lanterns at dusk.",
                                    path="/lanterns.txt", enqueue=False)
    ingested = document_ingest(document_id=document.pk)
    assert ingested is not None and ingested.status == "ready" and ingested.unembedded_chunks == 0
    hits = knowledge_search(SearchRequest(project=project, query="quartermaster lanterns",
                                          channels=("vector",))).results
    assert len(hits) == 10 and (hits[0].document_id, hits[0].ranks["vector"]) == (document.pk, 1)

    vector = np.random.default_rng(3).standard_normal(384).astype(np.float32)
    copied, inserted = (make_document(project, f"/{name}.txt", [], embed=False) for name in ("copied", "inserted"))
    insert_rows([Chunk(document=copied, chunk_index=0, text="x", embedding=vector, embedding_model="m"),
                 Chunk(document=copied, chunk_index=1, text="y", embedding=None)])
    Chunk.objects.bulk_create([Chunk(document=inserted, chunk_index=0, text="x", embedding=vector,
                                     embedding_model="m"),
                               Chunk(document=inserted, chunk_index=1, text="y", embedding=None)])
    with connection.cursor() as cursor:
        cursor.execute("SELECT document_id, embedding::text FROM memory_engine_chunk WHERE document_id IN (%s, %s) "
                       "ORDER BY chunk_index", [copied.pk, inserted.pk])
        stored = cursor.fetchall()
    by_document = {pk: [text for owner, text in stored if owner == pk] for pk in (copied.pk, inserted.pk)}
    assert by_document[copied.pk] == by_document[inserted.pk] and by_document[copied.pk][1] is None


def vector_indexes() -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE indexname LIKE 'me\\_%%\\_embedding\\_hnsw'")
        return dict(cursor.fetchall())


def inline(table: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT attstorage FROM pg_attribute WHERE attrelid = %s::regclass AND attname = 'embedding'",
                       [table])
        return cursor.fetchone()[0] == "m"


def test_a_new_installation_stores_halfvec(models: Any) -> None:
    """Migration 0018 gave the test database's empty tables the default storage: halfvec columns,
    kept inline, halfvec HNSW indexes, and the registry's active row says so."""
    assert column("memory_engine_memorycontent") == column("memory_engine_chunk") == ("halfvec", 384)
    assert all(inline(table) for table in TABLES)
    indexes = vector_indexes()
    assert set(indexes) == {"me_content_embedding_hnsw", "me_chunk_embedding_hnsw"}
    assert all("halfvec_cosine_ops" in definition and "m='16'" in definition for definition in indexes.values())
    assert active_model().storage == "halfvec"
    assert store_new_vectors_as_configured() == "halfvec"  # run again: nothing to do


def test_the_storage_setting_shapes_empty_tables_only(models: Any) -> None:
    """STORAGE "vector" turns empty tables' columns to vector; once rows exist, the columns stay and
    the registry stays truthful (moving them is the registry's job)."""
    models.MEMORY_ENGINE = {**models.MEMORY_ENGINE,
                            "EMBEDDING": {**models.MEMORY_ENGINE["EMBEDDING"], "STORAGE": "vector"}}
    assert store_new_vectors_as_configured() == "vector"
    assert column("memory_engine_memorycontent") == column("memory_engine_chunk") == ("vector", 384)
    assert all(inline(table) for table in TABLES)
    assert all("vector_cosine_ops" in definition for definition in vector_indexes().values())
    assert active_model().storage == "vector"

    _project, store, _document = corpus(2)
    models.MEMORY_ENGINE = {**models.MEMORY_ENGINE,
                            "EMBEDDING": {**models.MEMORY_ENGINE["EMBEDDING"], "STORAGE": "halfvec"}}
    assert store_new_vectors_as_configured() is None
    assert column("memory_engine_chunk") == ("vector", 384) and active_model().storage == "vector"
    assert write(store, "Fact number 1: the deploy window 1 opens on day 1.") is not None
