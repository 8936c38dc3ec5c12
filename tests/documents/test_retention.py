"""Retention and erasure (docs/retention.md): retention classes, document deprecate / forget /
purge, the redaction-only ledger guard, subject erasure with its receipt, and the sweeps."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from memory_engine.db import allow_ledger_erasure
from memory_engine.models import (
    Chunk,
    Document,
    DocumentVersion,
    ErasureReceipt,
    Memory,
    MemoryAssertion,
    MemoryContent,
    MemoryStore,
    RawCapture,
)
from memory_engine.selectors.search import SearchRequest, knowledge_search
from memory_engine.services.keys import api_key_create
from memory_engine.services.retention import document_retention_sweep
from tests.conftest import api_client, wait_for

pytestmark = pytest.mark.usefixtures("hashing_embedder")

SUBJECT = "cust-zq81-vexmoor"
SECRET = "Quillon Vexmoor prefers invoices sent to 17 Larkspur Gardens."
DOC_SECRET = "Quillon Vexmoor signed the Larkspur lease on Tuesday."


def capture(client, content, path, **extra):
    body = {"content": content, "path": path, "wait": True, **extra}
    response = client.post("/api/v1/documents", body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def subject_store(client):
    response = client.get(f"/api/v1/subjects/{SUBJECT}/memory-store")
    assert response.status_code in (200, 201), response.json()
    return response.json()["id"]


def write(client, store_id, content, **extra):
    response = client.post("/api/v1/memories", {"memory_store_id": store_id, "content": content, **extra},
                           format="json")
    assert response.status_code in (200, 201), response.json()
    return response.json()


def search_ids(project, query, **kwargs):
    return {hit.id for hit in knowledge_search(SearchRequest(project=project, query=query, **kwargs)).results}


class TestDocuments:
    def test_deprecate_hides_from_search_unless_asked(self, client, project):
        doc = capture(client, "The orchard gate code is 4471.", "/gate.md")
        assert search_ids(project, "orchard gate code")
        response = client.post(f"/api/v1/documents/{doc['id']}/deprecate")
        assert response.status_code == 200 and response.json()["deprecated_at"]
        assert not search_ids(project, "orchard gate code")
        hits = client.post("/api/v1/knowledge/search", {"query": "orchard gate code", "include_deprecated": True},
                           format="json").json()["results"]
        assert hits and client.get(f"/api/v1/documents/{doc['id']}").status_code == 200
        assert client.delete(f"/api/v1/documents/{doc['id']}/deprecate").json()["deprecated_at"] is None
        assert search_ids(project, "orchard gate code")

    def test_forget_tombstones_and_purge_needs_it(self, client, project):
        doc = capture(client, DOC_SECRET, "/lease.md", tags={"team": "legal"})
        refused = client.post(f"/api/v1/documents/{doc['id']}/purge")
        assert refused.status_code == 409 and refused.json()["code"] == "DOCUMENT_NOT_FORGOTTEN"
        response = client.post(f"/api/v1/documents/{doc['id']}/forget", {"reason": "customer request"},
                               format="json")
        assert response.status_code == 200, response.json()
        body = response.json()
        assert body["forgotten_at"] and body["forget_reason"].startswith("customer request")
        assert not Chunk.objects.filter(document_id=doc["id"]).exists()
        assert not RawCapture.objects.filter(document_id=doc["id"]).exists()
        version = DocumentVersion.objects.get(document_id=doc["id"])
        assert version.tombstoned_at and version.sha256  # metadata kept
        detail = client.get(f"/api/v1/documents/{doc['id']}/versions/{version.pk}").json()
        assert detail["text"] is None and detail["tombstoned_at"]
        assert not search_ids(project, "Larkspur lease")
        assert client.post(f"/api/v1/documents/{doc['id']}/purge").status_code == 204
        assert not Document.objects.filter(pk=doc["id"]).exists()

    def test_legal_hold_refuses_forget_purge_and_delete(self, client):
        doc = capture(client, "Board minutes, March.", "/minutes.md", retention_class="legal_hold")
        assert doc["capture"]["version"]["retention_class"] == "legal_hold"
        for method, url in (("post", "forget"), ("post", "purge")):
            response = getattr(client, method)(f"/api/v1/documents/{doc['id']}/{url}", {"reason": "x"},
                                               format="json")
            assert response.status_code == 409 and response.json()["code"] == "LEGAL_HOLD"
            assert response.json()["details"]["document_ids"] == [doc["id"]]
        response = client.delete(f"/api/v1/documents/{doc['id']}")
        assert response.status_code == 409 and response.json()["code"] == "LEGAL_HOLD"
        # releasing the hold is its own action: a key needs a grant that names `hold`
        refused = client.post(f"/api/v1/documents/{doc['id']}/retention", {"retention_class": "durable"},
                              format="json")
        assert (refused.status_code, refused.json()["details"]) == (403, {"action": "hold"})
        owner = Document.objects.get(pk=doc["id"]).access_tags[0]
        holder = api_client(api_key_create(project=Document.objects.get(pk=doc["id"]).project,
                                           grants=[{"pattern": owner, "actions": ["search", "forget", "hold"]}])[1])
        released = holder.post(f"/api/v1/documents/{doc['id']}/retention", {"retention_class": "durable"},
                               format="json")
        assert released.status_code == 200 and released.json()[0]["retention_class"] == "durable"
        assert client.delete(f"/api/v1/documents/{doc['id']}").status_code == 204

    def test_ephemeral_version_is_tombstoned_by_the_sweep(self, client, project):
        doc = capture(client, "Temporary parking: level 3.", "/tmp.md", retention_class="ephemeral")
        assert document_retention_sweep() == {"versions": 0, "documents_forgotten": 0}
        later = timezone.now() + timedelta(days=2)
        assert document_retention_sweep(now=later) == {"versions": 1, "documents_forgotten": 1}
        document = Document.objects.get(pk=doc["id"])
        assert document.forgotten_at and document.forget_reason.startswith("expired")
        assert not Chunk.objects.filter(document=document).exists()


class TestMemories:
    def test_ephemeral_memory_gets_an_expiry_and_legal_hold_refuses_forget(self, client):
        store = subject_store(client)
        ephemeral = write(client, store, "The courier comes on Fridays.", retention_class="ephemeral")
        memory = Memory.objects.get(pk=ephemeral["memory"]["id"] if "memory" in ephemeral else ephemeral["id"])
        assert memory.retention_class == "ephemeral" and memory.expires_at is not None
        held = client.post(f"/api/v1/memories/{memory.pk}/retention", {"retention_class": "legal_hold"},
                           format="json")
        assert held.status_code == 200 and held.json()["retention_class"] == "legal_hold"
        response = client.delete(f"/api/v1/memories/{memory.pk}")
        assert response.status_code == 409 and response.json()["code"] == "LEGAL_HOLD"
        assert response.json()["details"]["memory_ids"] == [memory.pk]
        # the sweep keeps a held memory past its expiry
        from memory_engine.services.memory_lifecycle import memory_sweep
        Memory.objects.filter(pk=memory.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
        assert memory_sweep().expired == 0 and Memory.objects.filter(pk=memory.pk).exists()


class TestLedgerGuard:
    def _row(self, client):
        store = subject_store(client)
        write(client, store, "The loading dock is behind building C.")
        return MemoryAssertion.objects.get()

    def _update(self, sql, params):
        with transaction.atomic(), connection.cursor() as cursor:
            allow_ledger_erasure()
            cursor.execute(sql, params)

    def test_redaction_is_the_only_update_allowed(self, client):
        row = self._row(client)
        table = "memory_engine_memoryassertion"
        refused = [
            (f"UPDATE {table} SET content = 'something else' WHERE id = %s", [row.pk]),
            (f"UPDATE {table} SET content = '[erased]' WHERE id = %s", [row.pk]),  # details unchanged
            (f"UPDATE {table} SET content = '[erased]', details = '{{\"erased\": true}}', outcome = 'failed' "
             f"WHERE id = %s", [row.pk]),
            (f"UPDATE {table} SET content = '[erased]', details = '{{\"erased\": true}}', principal = 'x' "
             f"WHERE id = %s", [row.pk]),
            (f"UPDATE {table} SET outcome = 'failed' WHERE id = %s", [row.pk]),
        ]
        for sql, params in refused:
            with pytest.raises(IntegrityError):
                self._update(sql, params)
        # without the switch even the redaction is refused
        with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"UPDATE {table} SET content = '[erased]', details = '{{\"erased\": true}}' "
                           f"WHERE id = %s", [row.pk])
        self._update(f"UPDATE {table} SET content = '[erased]', details = '{{\"erased\": true}}' WHERE id = %s",
                     [row.pk])
        after = MemoryAssertion.objects.get(pk=row.pk)
        assert (after.content, after.details) == ("[erased]", {"erased": True})
        assert (after.outcome, after.principal, after.created_at) == (row.outcome, row.principal, row.created_at)


def text_columns():
    """Every text, json/jsonb and bytea column of every memory_engine table."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name LIKE 'memory\\_engine\\_%%' "
            "AND data_type IN ('text', 'character varying', 'jsonb', 'json', 'bytea')")
        return cursor.fetchall()


def raw_scan(needles):
    """(table, column) pairs where any of ``needles`` occurs."""
    found = []
    with connection.cursor() as cursor:
        for table, column, data_type in text_columns():
            expr = {"bytea": f"convert_from(\"{column}\", 'UTF8')"}.get(data_type, f"\"{column}\"::text")
            for needle in needles:
                cursor.execute(f'SELECT count(*) FROM "{table}" WHERE strpos({expr}, %s) > 0', [needle])
                if cursor.fetchone()[0]:
                    found.append((table, column, needle))
    return found


class TestSubjectErasure:
    def _fill(self, client):
        store = subject_store(client)
        first = write(client, store, SECRET)
        write(client, store, "Quillon Vexmoor's account number is VX-55190.")
        write(client, store, "Quillon Vexmoor prefers invoices sent to 17 Larkspur Gardens, please.")
        institutional = client.post("/api/v1/memory-stores", {"name": "crm"}, format="json").json()["id"]
        tagged = write(client, institutional, "Vexmoor household opted out of marketing.",
                       tags={"subject": SUBJECT})
        other = write(client, institutional, "The office closes at six.")
        doc = capture(client, DOC_SECRET, "/crm/lease.md", tags={"subject": SUBJECT})
        kept_doc = capture(client, "Office plants are watered on Mondays.", "/plants.md")
        return store, first, tagged, other, doc, kept_doc

    def test_nothing_remains_and_the_receipt_counts_match(self, client, project):
        store, first, tagged, other, doc, kept_doc = self._fill(client)
        needles = [SUBJECT, "Vexmoor", "Larkspur", "VX-55190"]
        assert raw_scan(needles)  # the scan does see them before
        response = client.post("/api/v1/erasure", {"subject_external_id": SUBJECT, "tags": {"subject": SUBJECT}},
                               format="json")
        assert response.status_code == 201, response.json()
        receipt = response.json()
        assert raw_scan(needles) == []
        counts = receipt["counts"]
        assert counts["memory"] == 4 and counts["document"] == 1 and counts["chunk"] >= 1
        assert counts["rawcapture"] == 1 and counts["documentversion"] == 1 and counts["memorystore"] == 1
        assert counts["memoryassertion"] >= 4 and counts["vector"] >= counts["memorycontent"]
        for table, ids in receipt["ids"].items():
            assert len(ids) == counts[table], table
        assert len(receipt["sha256"]) == 64 and receipt["principal"]
        # every read path is empty
        hits = knowledge_search(SearchRequest(project=project, query="Vexmoor Larkspur invoices lease",
                                              memory_store_ids=[store])).results
        erased = {i for ids in receipt["ids"].values() for i in ids}
        assert hits == [] or not ({h.id for h in hits} & erased)
        assert not any("Vexmoor" in h.text or "Larkspur" in h.text for h in
                       knowledge_search(SearchRequest(project=project, query="Vexmoor Larkspur lease",
                                                      limit=50)).results)
        listed = client.get("/api/v1/memories", {"include_invalidated": "true"}).json()["results"]
        assert [m["id"] for m in listed] == [other["id"] if "id" in other else other["memory"]["id"]]
        for memory_id in receipt["ids"]["memory"]:
            assert client.get(f"/api/v1/memories/{memory_id}/open").status_code == 404
        assert client.get(f"/api/v1/documents/{doc['id']}").status_code == 404
        assert client.get(f"/api/v1/documents/{kept_doc['id']}").status_code == 200
        # the ledger keeps its rows, redacted
        rows = MemoryAssertion.objects.filter(pk__in=receipt["ids"]["memoryassertion"])
        assert rows.count() == counts["memoryassertion"]
        assert {(r.content, str(r.details)) for r in rows} == {("[erased]", "{'erased': True}")}
        assert MemoryStore.objects.get(pk=store).subject_external_id is None
        assert not MemoryContent.objects.filter(store_id=store).exists()
        # listable and retrievable
        listed = client.get("/api/v1/erasure-receipts").json()["results"]
        assert [r["id"] for r in listed] == [receipt["id"]]
        assert client.get(f"/api/v1/erasure-receipts/{receipt['id']}").json()["sha256"] == receipt["sha256"]

    def test_legal_hold_blocks_the_whole_erasure(self, client):
        store, first, *_ = self._fill(client)
        memory_id = first["id"] if "id" in first else first["memory"]["id"]
        Memory.objects.filter(pk=memory_id).update(retention_class="legal_hold")
        response = client.post("/api/v1/erasure", {"subject_external_id": SUBJECT}, format="json")
        assert response.status_code == 409 and response.json()["code"] == "LEGAL_HOLD"
        assert response.json()["details"]["memory_ids"] == [memory_id]
        assert Memory.objects.filter(store_id=store).count() == 3 and not ErasureReceipt.objects.exists()

    def test_selector_required_and_other_projects_untouched(self, client, other_client):
        response = client.post("/api/v1/erasure", {}, format="json")
        assert response.status_code == 400
        self._fill(client)
        other = other_client.post("/api/v1/erasure", {"subject_external_id": SUBJECT}, format="json")
        assert other.status_code == 201 and other.json()["counts"]["memory"] == 0
        assert Memory.objects.count() == 5
        assert other_client.get("/api/v1/erasure-receipts").json()["results"][0]["id"] == other.json()["id"]
        assert client.get("/api/v1/erasure-receipts").json()["results"] == []


@pytest.mark.slow
def test_the_retention_sweep_runs_on_a_real_worker(qcluster, project, settings):
    from django_q.models import Schedule

    from memory_engine.models.retention import RetentionClass
    from memory_engine.queue import RETENTION_SWEEP_SCHEDULE_NAME, ensure_schedules

    document = Document.objects.create(project=project, path="/eph.md", content_type="text/plain",
                                       chunk_strategy="whole")
    version = DocumentVersion.objects.create(document=document, number=1, sha256="0" * 64, status="active",
                                             retention_class=RetentionClass.EPHEMERAL)
    Document.objects.filter(pk=document.pk).update(active_version=version)
    DocumentVersion.objects.filter(pk=version.pk).update(created_at=timezone.now() - timedelta(days=2))
    ensure_schedules()
    Schedule.objects.filter(name=RETENTION_SWEEP_SCHEDULE_NAME).update(next_run=timezone.now())
    forgotten = wait_for(lambda: Document.objects.filter(pk=document.pk, forgotten_at__isnull=False).first(),
                         timeout=120)
    assert forgotten.forget_reason.startswith("expired")


def test_a_forgotten_source_document_stays_forgotten_until_new_content(client):
    wiki = "/api/v1/documents/by-ref/wiki/page-9"
    first = client.put(wiki, {"content": "Old page text.", "wait": True}, format="json").json()
    doc_id = first["id"]
    client.post(f"/api/v1/documents/{doc_id}/forget", {"reason": "request"}, format="json")
    again = client.put(wiki, {"content": "Old page text.", "wait": True}, format="json").json()
    assert again["status"] == "noop" and Document.objects.get(pk=doc_id).forgotten_at is not None
    changed = client.put(wiki, {"content": "New page text.", "wait": True}, format="json").json()
    assert changed["status"] == "updated" and changed["document"]["forgotten_at"] is None
    assert Chunk.objects.filter(document_id=doc_id).exists()
