"""Replay into staged generations: transform configs, isolation from live search, generation
search, promote/demote, failures, the command and who may do what."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from memory_engine.models import Chunk, Document, DocumentVersion, ReplayRun, TransformConfig
from memory_engine.services.documents.replay import (
    generation_demote,
    generation_promote,
    replay_run,
    transform_config_create,
)
from tests.conftest import TEST_PROVIDERS, use_embedder
from tests.providers import FailAfterEmbeddingProvider

CONFIGS = "/api/v1/transform-configs"
RUNS = "/api/v1/replay-runs"
SEARCH = "/api/v1/knowledge/search"
PAGES = {
    "p1": "The cafeteria serves breakfast from seven until nine in the morning. Lunch is served at noon "
          "and the salad bar closes at two in the afternoon.",
    "p2": "Parking permits are renewed every January at the facilities desk. Bicycles park in the "
          "basement garage beside the electric car chargers.",
    "p3": "Holiday requests go to your manager two weeks ahead. Unused holiday days expire at the end "
          "of March of the following year.",
}
QUERIES = ["when is breakfast served", "parking permit renewal", "holiday requests", "bicycles"]


def capture(client: APIClient, ref: str, content: str) -> dict[str, Any]:
    response = client.put(f"/api/v1/documents/by-ref/wiki/{ref}", {"content": content, "wait": True}, format="json")
    assert response.status_code in (200, 201), response.json()
    return response.json()


def search(client: APIClient, query: str, **extra: Any) -> Any:
    return client.post(SEARCH, {"query": query, "limit": 10, **extra}, format="json")


def live_answers(client: APIClient) -> list[dict]:
    """The live answers, whole: raw BM25 scores and the evidence grade included (staged chunks
    have a bm25 index of their own, so staging moves no live statistic)."""
    answers = []
    for query in QUERIES:
        response = search(client, query)
        assert response.status_code == 200, response.json()
        answers.append(response.json())
    return answers


def without_bm25(answers: list[list[dict]]) -> list[list[dict]]:
    """Result lists without the raw BM25 score (see :func:`live_answers`)."""
    return [[{k: v for k, v in hit.items() if k != "lexical_score"} for hit in hits] for hits in answers]


@pytest.fixture
def corpus(client: APIClient) -> dict[str, str]:
    """Three captured pages, ingested; their document ids by ref."""
    return {ref: capture(client, ref, text)["id"] for ref, text in PAGES.items()}


@pytest.fixture
def small(project: Any) -> TransformConfig:
    """Small character chunks: a staged corpus that differs from the live one."""
    return transform_config_create(project=project, name="small", chunk_strategy="size", chunk_size=60,
                                   chunk_overlap=10)


def session(project: Any, user: User) -> APIClient:
    api = APIClient()
    api.force_authenticate(user=user)
    api.credentials(HTTP_X_PROJECT_ID=project.pk)
    return api


@pytest.fixture
def admin_api(project: Any) -> APIClient:
    return session(project, User.objects.create_superuser("root", "root@example.com", "pw"))


@pytest.fixture
def viewer_api(project: Any) -> APIClient:
    """A staff member of the project who may view but not change replay runs."""
    user = User.objects.create_user("viewer", "viewer@example.com", "pw", is_staff=True)
    project.members.add(user)
    user.user_permissions.add(*Permission.objects.filter(codename__in=[
        "view_memory", "view_document", "view_replayrun"]))
    return session(project, user)


@pytest.mark.usefixtures("hashing_embedder")
class TestTransformConfigs:
    def test_create_versions_list_retrieve(self, client, other_client):
        first = client.post(CONFIGS, {"name": "small", "chunk_strategy": "size", "chunk_size": 300,
                                      "chunk_overlap": 30, "search": {"rrf_k": 10}}, format="json")
        assert first.status_code == 201, first.json()
        body = first.json()
        assert body["version"] == 1 and body["embedding_model"] == "all-MiniLM-L6-v2"
        assert body["embedding_provider"] == f"{TEST_PROVIDERS}.HashingEmbeddingProvider"
        assert body["search"] == {"rrf_k": 10} and body["created_by"].startswith("key:")
        second = client.post(CONFIGS, {"name": "small"}, format="json").json()
        assert second["version"] == 2 and second["chunk_strategy"] == ""
        assert [c["version"] for c in client.get(CONFIGS).json()["results"]] == [2, 1]
        assert client.get(f"{CONFIGS}/{body['id']}").json()["chunk_size"] == 300
        missing = other_client.get(f"{CONFIGS}/{body['id']}")
        assert missing.status_code == 404 and missing.json()["code"] == "TRANSFORM_CONFIG_NOT_FOUND"
        # Immutable: a change is a new version.
        assert client.patch(f"{CONFIGS}/{body['id']}", {"chunk_size": 5}, format="json").status_code == 405
        assert client.delete(f"{CONFIGS}/{body['id']}").status_code == 405
        assert TransformConfig.objects.get(pk=body["id"]).chunk_size == 300

    @pytest.mark.parametrize(("body", "code", "field"), [
        ({"name": "x", "search": [1, 2]}, "TRANSFORM_CONFIG_INVALID", "search"),
        ({"name": "x", "search": "rrf"}, "TRANSFORM_CONFIG_INVALID", "search"),
        ({"name": "x", "chunk_strategy": "lines"}, "TRANSFORM_CONFIG_INVALID", "chunk_strategy"),
        ({"name": "x", "chunk_size": 100}, "TRANSFORM_CONFIG_INVALID", "chunk_strategy"),
        ({"name": "   "}, "TRANSFORM_CONFIG_INVALID", "name"),
        ({"name": "x", "max_chunks_per_document": 0}, "TRANSFORM_CONFIG_INVALID", "max_chunks_per_document"),
        ({"name": "x", "chunk_strategy": "size", "chunk_size": 100, "chunk_overlap": 100},
         "CHUNK_SETTINGS_INVALID", None),
        ({"name": "x", "embedding_model": "text-embedding-3-large"}, "EMBEDDING_MODEL_NOT_ACTIVE", None),
        ({"name": "x", "embedding_provider": "openai"}, "EMBEDDING_MODEL_NOT_ACTIVE", None),
    ])
    def test_validation_errors_have_codes(self, client, body, code, field):
        response = client.post(CONFIGS, body, format="json")
        assert response.status_code == 400, response.json()
        assert response.json()["code"] == code
        if field:
            assert response.json()["details"]["field"] == field
        assert not TransformConfig.objects.exists()

    def test_active_model_named_explicitly_is_accepted(self, client):
        response = client.post(CONFIGS, {"name": "x", "embedding_model": "all-MiniLM-L6-v2"}, format="json")
        assert response.status_code == 201, response.json()
        config = TransformConfig.objects.get(pk=response.json()["id"])
        assert (config.name, config.version, config.embedding_model) == ("x", 1, "all-MiniLM-L6-v2")


@pytest.mark.usefixtures("hashing_embedder")
class TestReplay:
    def test_isolation_while_staging_and_after(self, client, corpus, small):
        before = live_answers(client)
        during: list[list[bytes]] = []
        run = replay_run(config=small, started_by="test",
                         on_progress=lambda done, total: during.append(live_answers(client)))
        assert run.status == "completed", run.error
        assert run.documents_total == run.documents_done == 3 and run.chunks_total > 3
        assert during and all(answers == before for answers in during)
        assert live_answers(client) == before
        # Beside the live rows: staged versions and chunks, live ones untouched.
        staged = DocumentVersion.objects.filter(generation=run)
        assert staged.count() == 3 and {v.status for v in staged} == {"staged"}
        assert all(v.source_class == "derived" and v.derived_from_id for v in staged)
        assert Chunk.objects.filter(generation=run).count() == run.chunks_total
        for document in Document.objects.all():
            assert document.active_version.status == "active" and document.active_version.generation_id is None
        listed = client.get(f"/api/v1/documents/{corpus['p1']}/versions").json()
        versions = listed["results"] if isinstance(listed, dict) else listed
        assert [(v["status"], v["generation_id"]) for v in versions][0] == ("staged", run.pk)
        # The document's chunk list shows the live chunks only.
        chunks = client.get(f"/api/v1/documents/{corpus['p1']}/chunks").json()
        assert all(len(c["text"]) > 60 for c in chunks["results"])

    def test_generation_search_reads_the_staged_corpus(self, client, admin_api, corpus, small):
        run = replay_run(config=small)
        staged = search(admin_api, "breakfast", generation=run.pk)
        assert staged.status_code == 200, staged.json()
        hits = staged.json()["results"]
        staged_ids = set(Chunk.objects.filter(generation=run).values_list("id", flat=True))
        assert hits and {hit["id"] for hit in hits} <= staged_ids
        assert all(len(hit["text"]) <= 60 for hit in hits)
        live = search(admin_api, "breakfast").json()["results"]
        assert live and not {hit["id"] for hit in live} & staged_ids
        # Without a query: the ordered read, staged chunks too.
        ordered = admin_api.post(SEARCH, {"document_ids": [corpus["p1"]], "generation": run.pk}, format="json")
        assert ordered.status_code == 200
        assert {hit["id"] for hit in ordered.json()["results"]} <= staged_ids

    def test_generation_search_errors(self, client, other_client, admin_api, corpus, small, other_project):
        run = replay_run(config=small)
        refused = search(client, "breakfast", generation=run.pk)
        assert refused.status_code == 403 and refused.json()["code"] == "STAGED_GENERATION_FORBIDDEN"
        assert search(other_client, "x", generation=run.pk).json()["code"] == "STAGED_GENERATION_FORBIDDEN"
        unknown = search(admin_api, "breakfast", generation="rep_nope")
        assert unknown.status_code == 404 and unknown.json()["code"] == "STAGED_GENERATION_NOT_FOUND"
        theirs = replay_run(config=transform_config_create(project=other_project, name="x"))
        assert search(admin_api, "x", generation=theirs.pk).json()["code"] == "STAGED_GENERATION_NOT_FOUND"
        generation_promote(run=run, by="test")
        promoted = search(admin_api, "breakfast", generation=run.pk)
        assert promoted.status_code == 409 and promoted.json()["code"] == "STAGED_GENERATION_STATE"

    def test_promote_demote_round_trip(self, client, admin_api, corpus, small):
        before = live_answers(client)
        run = replay_run(config=small)
        staged = [search(admin_api, q, generation=run.pk).json()["results"] for q in QUERIES]

        promoted = admin_api.post(f"{RUNS}/{run.pk}/promote")
        assert promoted.status_code == 200, promoted.json()
        assert promoted.json()["status"] == "promoted" and promoted.json()["promoted_by"] == "user:root"
        after = [search(client, q).json()["results"] for q in QUERIES]
        assert without_bm25(after) == without_bm25(staged)  # the staged corpus is now what live search answers
        for document in Document.objects.select_related("active_version"):
            assert document.active_version.generation_id == run.pk and document.active_version.status == "active"
            assert document.total_chunks == Chunk.objects.filter(document=document, generation=None).count()
        assert DocumentVersion.objects.filter(generation=None, status="superseded").count() == 3

        again = admin_api.post(f"{RUNS}/{run.pk}/promote")
        assert again.status_code == 409 and again.json()["code"] == "STAGED_GENERATION_STATE"

        demoted = admin_api.post(f"{RUNS}/{run.pk}/demote")
        assert demoted.status_code == 200, demoted.json()
        assert demoted.json()["status"] == "demoted" and demoted.json()["demoted_by"] == "user:root"
        # Rows moved out of the live bm25 index and back leave dead entries in its statistics
        # until it is vacuumed or rebuilt: the hits, order and fused scores are back, raw BM25 moves.
        restored = live_answers(client)
        assert without_bm25([body["results"] for body in restored]) == without_bm25([b["results"] for b in before])
        assert [body["results"] for body in restored] != [] and all(b["evidence"] for b in restored)
        for document in Document.objects.select_related("active_version"):
            assert document.active_version.generation_id is None and document.active_version.status == "active"
        assert {v.status for v in DocumentVersion.objects.filter(generation=run)} == {"staged"}
        # A demoted generation is a staged corpus again: searchable, promotable.
        assert without_bm25([search(admin_api, q, generation=run.pk).json()["results"] for q in QUERIES]) == \
            without_bm25(staged)
        assert admin_api.post(f"{RUNS}/{run.pk}/demote").json()["code"] == "STAGED_GENERATION_STATE"
        assert admin_api.post(f"{RUNS}/{run.pk}/promote").status_code == 200

    def test_capture_after_promote_survives_demote(self, client, admin_api, corpus, small):
        run = generation_promote(run=replay_run(config=small), by="test")
        changed = capture(client, "p2", "Parking moved to the north lot; permits are free from now on.")
        assert changed["status"] == "updated" and changed["version"]["status"] == "active"
        assert admin_api.post(f"{RUNS}/{run.pk}/demote").status_code == 200
        p2 = Document.objects.get(pk=corpus["p2"])
        assert p2.active_version_id == changed["version"]["id"]
        live = Chunk.objects.filter(document=p2, generation=None)
        assert live and all(c.version_id == changed["version"]["id"] for c in live)
        assert not Chunk.objects.filter(document=p2, generation=run).exists()
        p1 = Document.objects.get(pk=corpus["p1"])
        assert p1.active_version.generation_id is None

    def test_promote_keeps_a_newer_capture_live(self, client, corpus, small):
        run = replay_run(config=small)
        newer = capture(client, "p3", "Holidays are now booked in the HR portal, not by e-mail.")
        generation_promote(run=run, by="test")
        p3 = Document.objects.get(pk=corpus["p3"])
        assert p3.active_version_id == newer["version"]["id"]
        assert DocumentVersion.objects.get(generation=run, document=p3).status == "staged"
        assert all(c.version_id == newer["version"]["id"] for c in Chunk.objects.filter(document=p3, generation=None))
        assert Document.objects.get(pk=corpus["p1"]).active_version.generation_id == run.pk
        run.refresh_from_db()
        assert corpus["p3"] not in run.replaced_versions
        staged_p3 = set(Chunk.objects.filter(document=p3, generation=run).values_list("id", flat=True))
        assert staged_p3
        generation_demote(run=run, by="test")
        assert Document.objects.get(pk=corpus["p3"]).active_version_id == newer["version"]["id"]
        assert set(Chunk.objects.filter(document=p3, generation=run).values_list("id", flat=True)) == staged_p3
        assert Document.objects.get(pk=corpus["p1"]).active_version.generation_id is None

    def test_next_promote_discards_what_the_previous_kept(self, corpus, small, project):
        first = generation_promote(run=replay_run(config=small), by="test")
        second = generation_promote(run=replay_run(config=transform_config_create(
            project=project, name="whole", chunk_strategy="whole")), by="test")
        first.refresh_from_db()
        assert not first.keeps_replaced and second.keeps_replaced
        assert not Chunk.objects.filter(generation=first).exists()
        assert all(c.version.generation_id == second.pk for c in Chunk.objects.filter(generation=None))

    def test_failure_mid_run_keeps_live_data(self, client, corpus, settings, project):
        use_embedder(settings, f"{TEST_PROVIDERS}.FailAfterEmbeddingProvider", MODEL="all-MiniLM-L6-v2")
        capture(client, "p4", "A fourth page about the library opening hours on weekends.")
        before = live_answers(client)
        live_chunks = list(Chunk.objects.order_by("id").values_list("id", "text", "embedding_model"))
        config = transform_config_create(project=project, name="small", chunk_strategy="size", chunk_size=60,
                                         chunk_overlap=10)
        FailAfterEmbeddingProvider.calls_left = 1
        try:
            run = replay_run(config=config)
        finally:
            FailAfterEmbeddingProvider.calls_left = None
        assert run.status == "failed" and run.error["code"] == "EMBEDDING_FAILED"
        assert run.documents_done == 1 and run.finished_at is not None
        assert not Chunk.objects.filter(generation=run).exists()
        assert not DocumentVersion.objects.filter(generation=run).exists()
        assert list(Chunk.objects.order_by("id").values_list("id", "text", "embedding_model")) == live_chunks
        assert live_answers(client) == before

    def test_a_config_of_another_model_fails_the_run(self, corpus, small, settings):
        use_embedder(settings, f"{TEST_PROVIDERS}.HashingEmbeddingProvider", MODEL="another-model")
        run = replay_run(config=small)
        assert run.status == "failed" and run.error["code"] == "EMBEDDING_MODEL_NOT_ACTIVE"

    def test_filters_since_until_source(self, client, corpus, small, project):
        capture(client, "other", "x")  # same source; another one below
        client.post("/api/v1/documents", {"content": "A crm note about renewals.", "source": "crm",
                                          "external_ref": "n1", "wait": True}, format="json")
        assert replay_run(config=small, source="crm").documents_total == 1
        assert replay_run(config=small, source="wiki").documents_total == 4
        first = Document.objects.get(pk=corpus["p1"]).raw_captures.get().created_at
        assert replay_run(config=small, until=first).documents_total == 0
        assert replay_run(config=small, since=first).documents_total == 5


@pytest.mark.usefixtures("hashing_embedder")
class TestPermissions:
    def test_api_keys_and_viewers_cannot_promote_or_demote(self, client, readonly_client, viewer_api, admin_api,
                                                           corpus, small):
        run = replay_run(config=small)
        assert client.get(f"{RUNS}/{run.pk}").json()["status"] == "completed"
        for api, code in ((client, "STAGED_GENERATION_FORBIDDEN"), (viewer_api, "MODEL_PERMISSION_REQUIRED")):
            for switch in ("promote", "demote"):
                response = api.post(f"{RUNS}/{run.pk}/{switch}")
                assert response.status_code == 403, response.json()
                assert response.json()["code"] == code
        assert readonly_client.post(f"{RUNS}/{run.pk}/promote").json()["code"] == "READ_ONLY_KEY"
        # A viewer may search a generation (staff session), not switch it.
        assert search(viewer_api, "breakfast", generation=run.pk).status_code == 200
        assert ReplayRun.objects.get(pk=run.pk).status == "completed"
        missing = admin_api.post(f"{RUNS}/rep_nope/promote")
        assert missing.status_code == 404 and missing.json()["code"] == "STAGED_GENERATION_NOT_FOUND"
        failed = ReplayRun.objects.create(project=run.project, config=small, status="failed")
        refused = admin_api.post(f"{RUNS}/{failed.pk}/promote")
        assert refused.status_code == 409 and refused.json()["code"] == "STAGED_GENERATION_STATE"


@pytest.mark.usefixtures("hashing_embedder")
class TestCommand:
    def test_replay_promote_demote_from_the_command_line(self, corpus, small, project):
        out, err = io.StringIO(), io.StringIO()
        call_command("memory_engine_replay", "small", "--project", project.pk, stdout=out, stderr=err)
        run = ReplayRun.objects.get()
        assert run.status == "completed" and run.started_by == "system:manage.py"
        assert f"{run.pk} completed: 3/3 document(s)" in out.getvalue()
        assert "replay [" in err.getvalue() and "3/3" in err.getvalue()
        call_command("memory_engine_replay", "--promote", run.pk, stdout=out)
        assert ReplayRun.objects.get().status == "promoted"
        call_command("memory_engine_replay", "--demote", run.pk, "--by", "ops:alice", stdout=out)
        run.refresh_from_db()
        assert run.status == "demoted" and run.demoted_by == "ops:alice"

    def test_command_errors(self, corpus, small, project):
        with pytest.raises(CommandError, match="No such transform config"):
            call_command("memory_engine_replay", "nope", stdout=io.StringIO(), stderr=io.StringIO())
        with pytest.raises(CommandError, match="--since"):
            call_command("memory_engine_replay", "small", "--since", "yesterday", stdout=io.StringIO())
        with pytest.raises(CommandError, match="STAGED_GENERATION_STATE"):
            run = replay_run(config=small)
            call_command("memory_engine_replay", "--demote", run.pk, stdout=io.StringIO())
        out = io.StringIO()
        call_command("memory_engine_replay", f"small:{small.version}", "--since", "2999-01-01", stdout=out,
                     stderr=io.StringIO())
        assert "0/0 document(s)" in out.getvalue()


@pytest.mark.usefixtures("hashing_embedder")
def test_erasing_a_document_or_project_erases_its_generations(client, corpus, small, project):
    from memory_engine.services.documents import document_delete
    from memory_engine.services.stores import project_delete

    run = replay_run(config=small)
    document_delete(document=Document.objects.get(pk=corpus["p1"]))
    assert not Chunk.objects.filter(document_id=corpus["p1"]).exists()
    assert not DocumentVersion.objects.filter(document_id=corpus["p1"]).exists()
    generation_promote(run=run, by="test")
    project_delete(project=project)
    assert not ReplayRun.objects.exists() and not TransformConfig.objects.exists()
    assert not Chunk.objects.exists() and not DocumentVersion.objects.exists()
