"""The write funnel, with the real default embedder (dedup depends on meaning)."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, InternalError, connection, transaction

from memory_engine.exceptions import ContentEmpty, ContentTooLong, QuotaExceeded, ThresholdsInvalid
from memory_engine.models import Memory, MemoryAssertion, MemoryContent, MemoryRevision
from memory_engine.services.memories import memory_write
from memory_engine.services.memories.consent_category import consent_index
from memory_engine.services.memory_lifecycle import memory_forget
from tests import providers
from tests.factories import MemoryStoreFactory, ProjectFactory
from tests.threads import at_once

pytestmark = pytest.mark.django_db

EMAIL = "The customer prefers email contact"


def write(store, text, **kwargs):
    return memory_write(store=store, content=text, principal="test", **kwargs)


def test_new_fact_is_created_with_one_assertion(store):
    result = write(store, EMAIL)
    assert result.action == "created"
    assert result.memory.content.text == EMAIL
    assert result.memory.content.embedding is not None
    assert list(MemoryAssertion.objects.filter(store=store).values_list("outcome", flat=True)) == ["created"]


def test_exact_restatement_and_whitespace_variant_are_skipped_without_embedding(store, settings):
    first = write(store, EMAIL)
    from tests.conftest import use_embedder

    use_embedder(settings, "tests.providers.HashingEmbeddingProvider", MODEL="all-MiniLM-L6-v2")
    consent_index()  # the consent classifier's exemplar centroids for this embedder: once per process
    providers.CALLS.clear()
    again = write(store, EMAIL)
    spaced = write(store, "  The customer   prefers email\ncontact  ")
    assert (again.action, spaced.action) == ("skipped", "skipped")
    assert again.memory.pk == spaced.memory.pk == first.memory.pk
    assert again.similarity == 1.0
    assert providers.CALLS == []  # hash hit: the stored vector is reused
    assert MemoryContent.objects.filter(store=store).count() == 1
    assert MemoryAssertion.objects.filter(store=store).count() == 3


def test_close_restatement_is_skipped(store):
    first = write(store, EMAIL)
    result = write(store, "The customer prefers contact by email")  # cosine ~0.97 with MiniLM
    assert result.action == "skipped"
    assert result.memory.pk == first.memory.pk
    assert 0.95 <= result.similarity < 1.0


def test_changed_fact_above_supersede_threshold_supersedes(store):
    first = write(store, "Our main database is hosted in Frankfurt", tags={"team": "core"})
    # MiniLM puts this pair at ~0.91, between 0.90 and 0.95 -> supersede on the default thresholds
    result = write(store, "Our main database is now hosted in Frankfurt and Paris", tags={"room": "A"})
    assert result.action == "superseded", result.similarity
    assert 0.90 <= result.similarity < 0.95
    old = Memory.objects.get(pk=first.memory.pk)
    assert old.invalidated_at is not None and old.superseded_by_id == result.memory.pk
    # inherited tags under the incoming ones
    assert result.memory.tags == {"team": "core", "room": "A"}
    assertion = result.assertion
    assert assertion.outcome == "superseded" and assertion.replaced_memory_id == old.pk


def test_unrelated_fact_is_created(store):
    write(store, EMAIL)
    result = write(store, "The quarterly revenue grew 5%")
    assert result.action == "created"
    assert result.similarity is not None and result.similarity < 0.5


def test_paraphrase_below_thresholds_is_created_beside(store):
    write(store, EMAIL)
    result = write(store, "Client would rather be reached by email")  # ~0.62
    assert result.action == "created"


def test_invalidated_memories_are_not_dedup_candidates(store):
    first = write(store, "Our main database is hosted in Frankfurt")
    second = write(store, "Our main database is now hosted in Frankfurt and Paris")
    assert second.action == "superseded"
    # writing the retired text again compares against the valid memory only
    again = write(store, "Our main database is hosted in Frankfurt")
    assert again.memory.pk != first.memory.pk
    assert again.action in ("superseded", "created")
    assert Memory.objects.filter(store=store, invalidated_at__isnull=True).count() == 1
    # the retired memory and the new one share the content row
    assert again.memory.content_id == first.memory.content_id


def test_threshold_precedence_request_over_store_over_default(store):
    write(store, EMAIL)
    # default 0.95 -> skipped (~0.97)
    assert write(store, "The customer prefers contact by email").action == "skipped"
    store.duplicate_threshold = 0.99
    store.supersede_threshold = 0.90
    store.save()
    assert write(store, "The customer prefers contact by email.").action == "superseded"
    # request overrides store
    result = write(store, "Customer prefers contact by email", duplicate_threshold=0.5, supersede_threshold=0.4)
    assert result.action == "skipped"


@pytest.mark.parametrize("dup,sup", [(1.2, 0.9), (0.9, -0.1), (0.8, 0.9), ("x", 0.5)])
def test_invalid_thresholds_raise(store, dup, sup):
    with pytest.raises(ThresholdsInvalid):
        write(store, EMAIL, duplicate_threshold=dup, supersede_threshold=sup)
    assert not MemoryAssertion.objects.exists()


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_empty_text_raises(store, text):
    with pytest.raises(ContentEmpty):
        write(store, text)


def test_text_over_maximum_raises(store, settings):
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "MAX_MEMORY_CHARS": 100}
    with pytest.raises(ContentTooLong):
        write(store, "x" * 101)


def test_embedder_failure_stores_without_vector_and_next_write_repairs(store, settings):
    from tests.conftest import use_embedder

    use_embedder(settings, "tests.providers.FailingEmbeddingProvider", MODEL="all-MiniLM-L6-v2")
    result = write(store, EMAIL)
    assert result.action == "created"
    assert result.memory.content.embedding is None
    assert result.assertion.details["embedding"] == "embedding_failed"
    use_embedder(settings, "onnx")
    again = write(store, EMAIL)
    assert again.action == "skipped" and again.memory.pk == result.memory.pk
    assert MemoryContent.objects.get(pk=result.memory.content_id).embedding is not None
    assert MemoryAssertion.objects.filter(store=store).count() == 2


def test_without_embedder_writes_still_land(store, no_embedder):
    result = write(store, EMAIL)
    assert result.action == "created"
    assert write(store, EMAIL).action == "skipped"


def test_forget_invalidates_and_records(store):
    memory = write(store, EMAIL).memory
    assertion = memory_forget(memory=memory, principal="test")
    memory.refresh_from_db()
    assert memory.invalidated_at is not None
    assert assertion.outcome == "forgotten"
    assert write(store, EMAIL).action == "created"


def test_quota_exceeded_on_create(store):
    store.project.max_memories = 1
    store.project.save()
    write(store, EMAIL)
    with pytest.raises(QuotaExceeded):
        write(store, "The quarterly revenue grew 5%")
    assert write(store, EMAIL).action == "skipped"  # skips add nothing: allowed


def test_stores_are_independent(project):
    a = MemoryStoreFactory(project=project)
    b = MemoryStoreFactory(project=project)
    write(a, EMAIL)
    assert write(b, EMAIL).action == "created"


def test_ledger_is_append_only_in_the_database(store):
    assertion = write(store, EMAIL).assertion
    with pytest.raises((IntegrityError, InternalError)), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE memory_engine_memoryassertion SET outcome = 'skipped' WHERE id = %s",
                       [assertion.pk])
    with pytest.raises((IntegrityError, InternalError)), transaction.atomic():
        MemoryAssertion.objects.filter(pk=assertion.pk).delete()
    with pytest.raises(Exception, match="append-only"):
        assertion.save()
    assert MemoryAssertion.objects.get(pk=assertion.pk).outcome == "created"


def test_project_erasure_removes_the_ledger_with_it(store):
    from memory_engine.services.stores import project_delete

    write(store, EMAIL)
    project_delete(project=store.project)
    assert not MemoryAssertion.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_of_the_same_text_make_one_memory():
    store = MemoryStoreFactory(project=ProjectFactory())
    results = at_once(lambda text: write(store, text).action, ["Deployments happen every Tuesday afternoon"] * 8)
    assert sorted(results) == ["created"] + ["skipped"] * 7
    assert Memory.objects.filter(store=store).count() == 1
    assert MemoryAssertion.objects.filter(store=store).count() == 8


#: Restatements of one fact: each pair scores >= 0.96 with MiniLM and changes no detail (a skip).
RESTATED = ["The customer prefers email contact", "The customer prefers contact by email",
            "The customer prefers email contact."]
#: One fact whose detail changes: each pair scores >= 0.95 and a changed version supersedes.
VERSIONS = ["The staging database runs PostgreSQL 15 on db-stage-2.",
            "The staging database runs PostgreSQL 16 on db-stage-2.",
            "The staging database runs PostgreSQL 17 on db-stage-2."]


def write_concurrently(store, texts: list[str]) -> list[str]:
    """Every text written by a thread of its own, all released at once; their actions."""
    return at_once(lambda text: write(store, text).action, texts)


def one_live_memory_at_the_end_of_every_chain(store) -> Memory:
    """The store's one live memory; every other memory of it retired into the next, up to it."""
    live = list(Memory.objects.live().filter(store=store))
    assert len(live) == 1, [m.content.text for m in live]
    for memory in Memory.objects.filter(store=store).exclude(pk=live[0].pk):
        seen = set()
        while memory.superseded_by_id is not None and memory.pk not in seen:
            seen.add(memory.pk)
            memory = memory.superseded_by
        assert memory.pk == live[0].pk
    return live[0]


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_of_near_duplicates_keep_one_memory():
    """Restatements in other words, written at once (the store lock serializes their decisions):
    the first creates, every other one is a skip onto it, whatever the order; the kept memory
    holds one of the wordings and files the others as revisions."""
    store = MemoryStoreFactory(project=ProjectFactory())
    actions = write_concurrently(store, RESTATED * 3)
    assert sorted(actions) == ["created"] + ["skipped"] * 8
    live = one_live_memory_at_the_end_of_every_chain(store)
    assert live.content.text in RESTATED and Memory.objects.filter(store=store).count() == 1
    assert MemoryAssertion.objects.filter(store=store).count() == 9
    texts = {live.content.text, *MemoryRevision.objects.filter(memory=live).values_list("content__text", flat=True)}
    assert texts <= set(RESTATED)


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_of_changed_details_leave_one_live_version():
    """Versions of one fact written at once: each is decided against the version live when it
    takes the lock, so whatever the order one memory was created, every other write superseded or
    skipped, and the retired versions lead to the one live version."""
    store = MemoryStoreFactory(project=ProjectFactory())
    actions = write_concurrently(store, VERSIONS * 2)
    assert actions.count("created") == 1 and set(actions) <= {"created", "superseded", "skipped"}
    live = one_live_memory_at_the_end_of_every_chain(store)
    assert live.content.text in VERSIONS
    assert MemoryAssertion.objects.filter(store=store).count() == 6
    superseded = MemoryAssertion.objects.filter(store=store, outcome="superseded")
    assert superseded.count() == actions.count("superseded")
    assert all(a.decision_reason == "changed_detail" for a in superseded)


def test_large_store_dedup_query_can_use_the_hnsw_index(store, settings):
    """The query vector is a scalar subquery (a parameter), so HNSW can order by it."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from memory_engine.selectors import dedup

    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "DEDUP_EXACT_SCAN_MAX": 0}
    first = write(store, EMAIL)
    dedup.forget_scan_modes()  # the write found the store empty: an exact scan at any limit
    with CaptureQueriesContext(connection) as queries:
        dedup.nearest_live_memories(store, first.memory.content_id, facet=None)
    nearest_sql = next(q["sql"] for q in queries.captured_queries if "ORDER BY" in q["sql"])
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute(f"EXPLAIN {nearest_sql}")
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "me_content_embedding_hnsw" in plan, plan
    dedup.forget_scan_modes()


def test_dedup_scan_mode_follows_a_changed_setting(store, settings):
    """The funnel caches per store whether to scan exactly; a new DEDUP_EXACT_SCAN_MAX drops
    that cache (it used to keep the old answer for SCAN_MODE_TTL)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from memory_engine.selectors import dedup

    first = write(store, EMAIL)  # a small store under the default cap: exact scan, cached
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "DEDUP_EXACT_SCAN_MAX": 0}
    with CaptureQueriesContext(connection) as queries:
        dedup.nearest_live_memories(store, first.memory.content_id, facet=None)
    sql = [q["sql"] for q in queries.captured_queries]
    assert any("hnsw.ef_search" in s for s in sql), sql  # the index path, as the setting now asks
    assert not any(") + 0" in s for s in sql), sql


def test_written_content_row_reads_back_exactly(store):
    """The content row built from the upsert's RETURNING matches the stored row."""
    result = write(store, EMAIL)
    stored = MemoryContent.objects.get(pk=result.memory.content_id)
    built = result.memory.content
    for field in ("id", "store_id", "content_hash", "text", "embedding_model", "created_at"):
        assert getattr(built, field) == getattr(stored, field), field
